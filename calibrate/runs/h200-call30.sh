#!/usr/bin/env bash
# Device call 30 (nvidia-h200, one GPU): call 29's worst TPOT point (qwen2.5-0.5b, 2,048 + 16,
# batch 256: -15.5%, its neighbours within 4%) -- a kernel or the machine? The kernels probe at that
# step and beside it (caches of 2,048, 2,064, 2,112, 4,128 positions; llama-3.2-1b, the other
# 64-wide-head model; falcon-7b's worst point, 71 query heads on one KV head), then the same
# qwen2.5-0.5b rows again and qwen2.5-1.5b (a fitted model) at 2,048 + 16 as the machine's control.
set -u
source calibrate/runs/common.sh
W30="$W/call30"; mkdir -p "$W30"
env_info > "$W30/env.txt" 2>&1
timeout 150 python3 -m calibrate.probes --out "$W30/probes" --what kernels --budget-s 130 --kernels-points \
  qwen2.5-0.5b:2:256:2048,qwen2.5-0.5b:2:256:2064,qwen2.5-0.5b:2:256:2112,qwen2.5-0.5b:2:256:4128,llama-3.2-1b:2:256:2064,llama-3.2-1b:2:256:2048,falcon-7b:2:256:528,falcon-7b:2:16:528 \
  > "$W30/probe-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
timeout 200 python3 -m calibrate.gpu_job --out "$W30/control" --card h200 --engines graph \
  --models qwen2.5-0.5b,qwen2.5-1.5b --prompts 2048 --gen 16 --batches 1,16,64,256 --no-ceilings --budget-s 170 \
  > "$W30/control.log" 2>&1
echo "== control done at $(elapsed) s"; snap
tail -n 3 "$W30/probe-kernels.log" "$W30/control.log"
