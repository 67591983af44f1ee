#!/usr/bin/env bash
# Device call 42 (nvidia-h200, one GPU): the `attention-contexts` probe, evidence for the decode
# attention's kernel regimes by the cached tokens: the graph engine's decode attention and its QK
# product alone at generic shapes of 1, 4, 8 (128 wide) and 7 (64 wide) query heads a KV head,
# batches 16, 64, 256, over 40 cache lengths around the powers of two (512-16,416 positions; call 41 ran 19 of them: the regime past 1,024 positions, its edges found here).
set -u
source calibrate/runs/common.sh
W42="$W/call42"; mkdir -p "$W42"
env_info > "$W42/env.txt" 2>&1
timeout 560 python3 -m calibrate.probes --out "$W42/probes" --what attention-contexts --budget-s 520 \
  > "$W42/probe-attention-contexts.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W42/probe-attention-contexts.log"
