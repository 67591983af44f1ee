#!/usr/bin/env bash
# Device call 45 (nvidia-h200, one GPU): a third check after the fact of the windows, their factor per
# head width now at the probe's largest batch (committed before it ran): qwen2.5-0.5b (64-wide heads,
# 7 a KV head), qwen2.5-3b and llama-3.2-3b (128 wide) at prompt 512 + gen 128 (640 positions) and
# 1,024 + 48 (1,072), lengths none of them was measured at; batches 1-256.
set -u
source calibrate/runs/common.sh
W45="$W/call45"; mkdir -p "$W45"
env_info > "$W45/env.txt" 2>&1
timeout 300 python3 -m calibrate.gpu_job --out "$W45/dense" --card h200 --engines graph \
  --models qwen2.5-0.5b,qwen2.5-3b,llama-3.2-3b \
  --prompts 512,1024 --gen 128,48 --batches 1,4,16,64,256 --no-ceilings --budget-s 270 > "$W45/dense.log" 2>&1
echo "== dense done at $(elapsed) s"; snap
tail -n 3 "$W45/dense.log"
