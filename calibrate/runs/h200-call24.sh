#!/usr/bin/env bash
# Device call 24 (nvidia-h200, one GPU): the `masked-attention` probe (`python3 -m calibrate.probes
# --what masked-attention`): the graph engine's prefill attention where it takes its masked path (a
# window shorter than the prompt, or attention sinks: K/V repeated to every head, an explicit mask,
# SDPA over every tile of the square), at generic shapes of head widths 64, 96, 128 and 256, prompts
# 1,024-8,192: the rate the windowed and sinks models' prefills run at (their TTFT came out 25-67%
# fast, priced as the window's causal pairs at the causal kernel's rate).
set -u
source calibrate/runs/common.sh
W24="$W/call24"; mkdir -p "$W24"
env_info > "$W24/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W24/probes" --what masked-attention --budget-s 170 > "$W24/probe-masked-attention.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -8 "$W24/probe-masked-attention.log"
