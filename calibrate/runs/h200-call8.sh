#!/usr/bin/env bash
# Device call 8 (nvidia-h200, one GPU): the card's bf16 matmul table (calibrate.probes, probe
# "gemm": F.linear over M x N x K, each shape in one CUDA graph over copies of W beyond L2), which
# the serving loop's prefill price reads (issue 14: its prefill graphs at 16-2,048 tokens ran at
# 0.93-1.09x a price fitted on large prefills, by model and bucket).
set -u
source calibrate/runs/common.sh
W8="$W/call8"; mkdir -p "$W8"
env_info > "$W8/env.txt" 2>&1
snap_loop & LOOP=$!
timeout 420 python3 -m calibrate.probes --out "$W8" --what gemm --budget-s 400 > "$W8/gemm.log" 2>&1
echo "== gemm done at $(elapsed) s"
kill $LOOP; snap
tail -5 "$W8/gemm.log"
