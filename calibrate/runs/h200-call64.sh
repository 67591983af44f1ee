#!/usr/bin/env bash
# Device call 64 (nvidia-h200, one GPU): the attention-table probe (`python3 -m calibrate.probes --what
# attention-table`): the graph engine's decode attention alone at ten head shapes of the catalog's dense
# models (64-wide heads 4, 7, 16 and 71 a KV head; 96-wide MHA; 128-wide 1, 4 and 7 a KV head; 256-wide
# 1 and 2), every power of two of batched matrices (batch x KV heads) 64-16,384, caches of 256-16,416
# positions (every 64 to 4,096, every 256 to 16,384), one layer's K + V up to 8 GiB. Why: the held-out
# 64-wide models run 12-20% slower than priced at 1,024-2,048 batched matrices at some cache lengths
# (docs/method.md section 13: cuBLAS picks the QK kernel by the batch count too), which the
# attention-batches probe (call 55) saw at three lengths only.
set -u
source calibrate/runs/common.sh
W64="$W/call64"; mkdir -p "$W64"
env_info > "$W64/env.txt" 2>&1
timeout 560 python3 -m calibrate.probes --out "$W64/probes" --what attention-table --budget-s 520 \
  > "$W64/probe-attention-table.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 12 "$W64/probe-attention-table.log"
