#!/usr/bin/env bash
# Device call 55 (nvidia-h200, one GPU): the attention-batches probe (the graph engine's decode
# attention and its QK and values' products alone at 2-8 KV heads, batches 32-512, caches of 576, 1,152
# and 2,112 positions): where device call 54 saw eight KV heads at batch 128 run ~1.7x slower than at
# 64 or 256 at 576 positions.
set -u
source calibrate/runs/common.sh
W55="$W/call55"; mkdir -p "$W55"
env_info > "$W55/env.txt" 2>&1
timeout 400 python3 -m calibrate.probes --out "$W55" --what attention-batches --budget-s 380 > "$W55/probe.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 5 "$W55/probe.log"
