#!/usr/bin/env bash
# Device call 33 (nvidia-h200, one GPU): call 32's phi-3-mini-4k at 1,024 + 16 ran 16-23% slower than
# priced from batch 16 up (its rows at 528, 2,064 and 4,112 positions within 5-8%). The kernels probe
# at its step over caches of 1,024, 1,040, 1,056, 1,088 and 1,536 positions (batch 64), and a GQA
# model (qwen2.5-7b) and an MHA one of 128-wide heads (llama-2-7b) at 1,040 as controls.
set -u
source calibrate/runs/common.sh
W33="$W/call33"; mkdir -p "$W33"
env_info > "$W33/env.txt" 2>&1
timeout 150 python3 -m calibrate.probes --out "$W33/probes" --what kernels --budget-s 130 --kernels-points \
  phi-3-mini-4k:2:64:1024,phi-3-mini-4k:2:64:1040,phi-3-mini-4k:2:64:1056,phi-3-mini-4k:2:64:1088,phi-3-mini-4k:2:64:1536,qwen2.5-7b:2:64:1040,llama-2-7b:2:64:1040,llama-2-7b:2:64:1024 \
  > "$W33/probe-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W33/probe-kernels.log"
