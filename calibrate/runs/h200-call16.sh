#!/usr/bin/env bash
# Device call 16 (nvidia-h200, one GPU): the layers probe (`python3 -m calibrate.probes --what
# layers`): the graph engine's decode step of ten models and head-split variants cut to 2, 4, 8
# and 12 layers, batches 1, 16, 64, a 256-token static cache: one layer's time and the step's own,
# per model, and what the head width alone costs a layer (issue 9: qwen2.5-0.5b and llama-3.2-1b,
# the two 64-wide-head models, are over-predicted at small batches).
set -u
source calibrate/runs/common.sh
W16="$W/call16"; mkdir -p "$W16"
env_info > "$W16/env.txt" 2>&1
timeout 300 python3 -m calibrate.probes --out "$W16/probes" --what layers --budget-s 270 > "$W16/probe-layers.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -14 "$W16/probe-layers.log"
