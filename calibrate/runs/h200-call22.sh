#!/usr/bin/env bash
# Device call 22 (nvidia-h200, one GPU): after the graph engine's two alignment fixes (a windowed
# layer's ring rounded up to 8 slots, masked; the sinks' softmax row padded to a multiple of 8), the
# kernels probe again (phi-3-mini-4k and gpt-oss-20b should now run tensor-core kernels; and three
# static caches of unaligned length, to see whether those fall back too), then phi-3-mini-4k and
# gpt-oss-20b measured again at the prompts where they missed (call 20, call 19).
set -u
source calibrate/runs/common.sh
W22="$W/call22"; mkdir -p "$W22"
env_info > "$W22/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W22/probes" --what kernels --budget-s 170 > "$W22/probe-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
timeout 250 python3 -m calibrate.gpu_job --out "$W22/remeasure" --card h200 --engines graph \
  --models phi-3-mini-4k,gpt-oss-20b --prompts 512,4096,8192 --gen 16 \
  --batches 1,4,16,64,256 --no-ceilings --budget-s 220 > "$W22/remeasure.log" 2>&1
echo "== re-measure done at $(elapsed) s"; snap
tail -4 "$W22/remeasure.log"
