#!/usr/bin/env bash
# Device call 49 (nvidia-h200, one GPU): the `sustained-matmul` probe again, now with the graph engine's
# prefill of two fitted models back to back (qwen2.5-7b 4 x 512 tokens a forward, ~50 ms; llama-3.1-8b
# 16 x 2,048, ~0.9 s) after the GEMM series: call 48's pure-GEMM clock curve (-14% from 0.1 s) priced
# the fitted models' short prefills too slow, so the prefill's own rate against time under load.
set -u
source calibrate/runs/common.sh
W49="$W/call49"; mkdir -p "$W49"
env_info > "$W49/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W49/probes" --what sustained-matmul --budget-s 180 \
  > "$W49/probe-sustained-matmul.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 4 "$W49/probe-sustained-matmul.log"
