#!/usr/bin/env bash
# Device call 18 (nvidia-h200, one GPU): the prefill-attention probe (`python3 -m calibrate.probes
# --what prefill-attention`): the graph engine's prefill attention alone (causal SDPA, grouped K/V,
# the default backend) at eight models' head shapes, prompts 512-16,384, 32,768 tokens a call:
# its FLOP rate by head width and prompt (issue 9: the 64-wide-head models' long prompts were fast).
set -u
source calibrate/runs/common.sh
W18="$W/call18"; mkdir -p "$W18"
env_info > "$W18/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W18/probes" --what prefill-attention --budget-s 170 > "$W18/probe-prefill-attention.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -12 "$W18/probe-prefill-attention.log"
