#!/usr/bin/env bash
# Device call 38 (nvidia-h200, one GPU): the `layer-features` probe again, its grid grown by two
# variants of the fitted MoE model's layer (qwen3-30b-a3b) with deepseek-v2's absorbed MLA decode and
# router, without and with two shared experts; the rest of call 37's grid repeated (q/k norms, MHA,
# 96-wide heads at llama-3.1-8b's and qwen2.5-1.5b's shapes; gpt-oss's MoE layer). Cut to 2 and 6
# layers, batches 1-256, a static cache of 2,048 positions, the kernels of one eager step counted.
set -u
source calibrate/runs/common.sh
W38="$W/call38"; mkdir -p "$W38"
env_info > "$W38/env.txt" 2>&1
timeout 400 python3 -m calibrate.probes --out "$W38/probes" --what layer-features --budget-s 360 \
  > "$W38/probe-layer-features.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W38/probe-layer-features.log"
