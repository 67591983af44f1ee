#!/usr/bin/env bash
# Device call 37 (nvidia-h200, one GPU): the `layer-features` probe. The graph engine's decode step
# at two fitted models' shapes (llama-3.1-8b, qwen2.5-1.5b) with one architecture feature switched
# on at a time (q/k norms, one KV head per query head, 96-wide heads), and the fitted MoE model's
# layer (qwen3-30b-a3b) with gpt-oss's features; each cut to 2 and 6 layers, batches 1-256, a static
# cache of 2,048 positions, the kernels of one eager step counted. What a feature adds per layer.
set -u
source calibrate/runs/common.sh
W37="$W/call37"; mkdir -p "$W37"
env_info > "$W37/env.txt" 2>&1
timeout 400 python3 -m calibrate.probes --out "$W37/probes" --what layer-features --budget-s 360 \
  > "$W37/probe-layer-features.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W37/probe-layer-features.log"
