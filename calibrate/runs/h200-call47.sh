#!/usr/bin/env bash
# Device call 47 (nvidia-h200, one GPU): a held-out check on catalog models no H200 run had measured
# (chosen and committed before it ran; the attention-widths probe of call 46 changed nothing in the
# calibration): gpt-neox-20b (64 MHA heads of 96, parallel residual) at prompts 512, 2,048, 4,096;
# falcon-40b (128 query heads of 64 on 8 KV heads, parallel attention) at 512, 2,048, 8,192; gen 16,
# batches 1-256 until memory runs out; llama-2-70b (80 layers, 128 GiB of weights) at 512 and 2,048,
# batches 1-16.
set -u
source calibrate/runs/common.sh
W47="$W/call47"; mkdir -p "$W47"
env_info > "$W47/env.txt" 2>&1
timeout 200 python3 -m calibrate.gpu_job --out "$W47/neox" --card h200 --engines graph --models gpt-neox-20b \
  --prompts 512,2048,4096 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 170 > "$W47/neox.log" 2>&1
echo "== neox done at $(elapsed) s"; snap
timeout 240 python3 -m calibrate.gpu_job --out "$W47/falcon" --card h200 --engines graph --models falcon-40b \
  --prompts 512,2048,8192 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 210 > "$W47/falcon.log" 2>&1
echo "== falcon done at $(elapsed) s"; snap
timeout 150 python3 -m calibrate.gpu_job --out "$W47/llama70" --card h200 --engines graph --models llama-2-70b \
  --prompts 512,2048 --gen 16 --batches 1,4,16 --no-ceilings --budget-s 120 > "$W47/llama70.log" 2>&1
echo "== llama70 done at $(elapsed) s"; snap
tail -n 3 "$W47/neox.log" "$W47/falcon.log" "$W47/llama70.log"
