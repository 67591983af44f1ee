#!/usr/bin/env bash
# Device call 79 (nvidia-h200, one GPU): what gpt-oss-20b's decode layer pays that the step model
# does not price (batch 1 -7 to -11%, batches 4-256 -2 to -7%, every length). A walk between
# gpt-oss-20b's layer and qwen3-30b-a3b's with gpt-oss's MoE layer, one architecture difference at
# a time (windows, attention biases, head shape, expert count and width, hidden width), each cut to
# 2 and 6 layers at batches 1, 4, 16 (520 positions) and 1 (4,104): the graph step's time and one
# eager step's kernels with their launch counts (calibrate/runs/layer_walk.py). Evidence first: no
# term is set from it in this script.
set -u
source calibrate/runs/common.sh
W79="$W/call79"; mkdir -p "$W79"
env_info > "$W79/env.txt" 2>&1
snap_loop & SNAP=$!
timeout 480 python3 calibrate/runs/layer_walk.py "$W79/h200-probe-layer-walk.json" 440 > "$W79/layer-walk.log" 2>&1
echo "== walk done at $(elapsed) s"; kill $SNAP; snap
tail -n 20 "$W79"/*.log
