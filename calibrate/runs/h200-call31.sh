#!/usr/bin/env bash
# Device call 31 (nvidia-h200, one GPU): the `attention-groups` probe (`python3 -m calibrate.probes
# --what attention-groups`): the graph engine's decode attention alone at generic shapes of 1 to 64
# query heads a KV head (head widths 64 and 128), batches 1-256, 512-8,192 cached tokens. The fitted
# attention family saw 4-8 heads a KV head; falcon-7b (71) came out 16% slow, MHA phi-3 ~10% fast.
set -u
source calibrate/runs/common.sh
W31="$W/call31"; mkdir -p "$W31"
env_info > "$W31/env.txt" 2>&1
timeout 280 python3 -m calibrate.probes --out "$W31/probes" --what attention-groups --budget-s 250 > "$W31/probe-attention-groups.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 4 "$W31/probe-attention-groups.log"
