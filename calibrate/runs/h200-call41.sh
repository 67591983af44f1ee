#!/usr/bin/env bash
# Device call 41 (nvidia-h200, one GPU): the `attention-contexts` probe, evidence for the decode
# attention's kernel regimes by the cached tokens: the graph engine's decode attention and its QK
# product alone at generic shapes of 1, 4, 8 (128 wide) and 7 (64 wide) query heads a KV head,
# batches 16, 64, 256, over 19 cache lengths around the powers of two (1,024-8,224 positions).
set -u
source calibrate/runs/common.sh
W41="$W/call41"; mkdir -p "$W41"
env_info > "$W41/env.txt" 2>&1
timeout 330 python3 -m calibrate.probes --out "$W41/probes" --what attention-contexts --budget-s 300 \
  > "$W41/probe-attention-contexts.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W41/probe-attention-contexts.log"
