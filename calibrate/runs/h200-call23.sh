#!/usr/bin/env bash
# Device call 23 (nvidia-h200, one GPU): after every cache is laid out in a multiple of 8 slots
# (calibrate.graph_engine.RING_ALIGN), the kernels probe again (the unaligned static caches of call
# 22, 2,053 and 4,100 positions, should now run the tensor-core kernels), then two held-out models
# at prompt + gen lengths that are not multiples of 8 (1,000 + 50, 3,000 + 50), which the
# calibration never saw.
set -u
source calibrate/runs/common.sh
W23="$W/call23"; mkdir -p "$W23"
env_info > "$W23/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W23/probes" --what kernels --budget-s 170 > "$W23/probe-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
timeout 250 python3 -m calibrate.gpu_job --out "$W23/unaligned" --card h200 --engines graph \
  --models qwen2.5-3b,llama-3.2-3b,mistral-7b-v0.3 --prompts 1000,3000 --gen 50 \
  --batches 1,4,16,64,256 --no-ceilings --budget-s 220 > "$W23/unaligned.log" 2>&1
echo "== unaligned done at $(elapsed) s"; snap
tail -4 "$W23/unaligned.log"
