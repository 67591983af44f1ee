#!/usr/bin/env bash
# Device call 77 (nvidia-h200, one GPU): the index probe again with the graph engine's own index
# patterns (calibrate/index_probe.py after call 76: a token's k routed rows gather its one hidden row k
# times, the 1-D ops gather a just-written vector of the rows by their sort order, the bias rows by the
# sorted expert ids; k = 1, 2, 4, 8). Call 76's grid drew every index at random over 128 rows, and
# read the warm ops 20-40% over what the kernels probe found inside qwen3-30b-a3b's and
# deepseek-v2-lite's steps (k = 8 and 6), near it for mixtral-8x7b's (k = 2).
set -u
source calibrate/runs/common.sh
W77="$W/call77"; mkdir -p "$W77"
env_info > "$W77/env.txt" 2>&1
timeout 250 python3 -m calibrate.probes --out "$W77/index" --what index --budget-s 230 > "$W77/index.log" 2>&1
echo "== index done at $(elapsed) s"; snap
tail -n 4 "$W77"/*.log
