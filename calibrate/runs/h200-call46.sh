#!/usr/bin/env bash
# Device call 46 (nvidia-h200, one GPU): the `attention-widths` probe, evidence for the decode
# attention's cost by head width at small batches: the graph engine's decode attention and each of its
# kernels (QK, softmax, PV) alone at generic shapes of 32 query heads of 64, 80, 96, 112, 128 (16 of
# 256), one and four a KV head, batches 1-64, caches of 528, 2,048 and 8,192 positions.
set -u
source calibrate/runs/common.sh
W46="$W/call46"; mkdir -p "$W46"
env_info > "$W46/env.txt" 2>&1
timeout 400 python3 -m calibrate.probes --out "$W46/probes" --what attention-widths --budget-s 360 \
  > "$W46/probe-attention-widths.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W46/probe-attention-widths.log"
