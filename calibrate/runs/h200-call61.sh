#!/usr/bin/env bash
# Device call 61 (nvidia-h200, one GPU): what a layer's fixed time is made of, model by model.
# The layers probe (calls 16, 17) measures a layer's time at batch 1 less its weight bytes at 43.7-49.0 us
# across seven dense models (docs/calibration.md), the one small fitted model (qwen2.5-1.5b) at the top; the
# kernels probe here profiles the same seven models' eager decode step cut to 2 and 4 layers, batches 1
# and 2, a 256-position static cache (as the layers probe), kernel by kernel (each kernel's device time a
# step), beside the same step replayed from a CUDA graph: the difference of 4 and 2 layers over 2 is one
# layer's kernels, the graph step less the kernels' time the gaps between them.
set -u
source calibrate/runs/common.sh
W61="$W/call61"; mkdir -p "$W61"
env_info > "$W61/env.txt" 2>&1
POINTS=""
for m in qwen2.5-0.5b llama-3.2-1b qwen2.5-1.5b qwen2.5-3b llama-3.2-3b qwen2.5-7b llama-3.1-8b; do
  for l in 2 4; do for b in 1 2; do POINTS="$POINTS,$m:$l:$b:256"; done; done
done
timeout 400 python3 -m calibrate.probes --out "$W61/probes" --what kernels --kernels-points "${POINTS#,}" \
  --budget-s 380 > "$W61/probe-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W61/probe-kernels.log"
