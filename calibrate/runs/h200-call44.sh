#!/usr/bin/env bash
# Device call 44 (nvidia-h200, one GPU): a second check after the fact of the windows and the layer
# features (all committed before it ran), on lengths never measured: prompt 512 + gen 128 (640
# positions: in a window), 1,000 + 88 (1,088: the window's last length) and 1,100 + 28 (1,128: past
# it) for falcon-7b (71 heads on one KV head, 64 wide), qwen2.5-14b, llama-3.2-1b and
# mistral-7b-v0.1; batches 1-256.
set -u
source calibrate/runs/common.sh
W44="$W/call44"; mkdir -p "$W44"
env_info > "$W44/env.txt" 2>&1
timeout 400 python3 -m calibrate.gpu_job --out "$W44/dense" --card h200 --engines graph \
  --models falcon-7b,qwen2.5-14b,llama-3.2-1b,mistral-7b-v0.1 \
  --prompts 512,1000,1100 --gen 128,88,28 --batches 1,4,16,64,256 --no-ceilings --budget-s 370 > "$W44/dense.log" 2>&1
echo "== dense done at $(elapsed) s"; snap
tail -n 3 "$W44/dense.log"
