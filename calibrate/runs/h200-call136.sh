#!/usr/bin/env bash
# Device call 136 (the thirty-seventh session): choose-server against the real server loop
# (benchmarks/choose_server_check.py). llama-3.1-8b, the mixed stream, 400 requests, seed 851, 64
# slots of 1,280 rows, prefill-first, served at the card's choose-server rate R* (SLOs TTFT p99 <=
# 500 ms, TPOT p99 <= 16 ms) x 0.7, 0.85, 1, 1.15 and 1.3, picked before the call with the terms as
# shipped (`.venv/bin/python benchmarks/choose_server_check.py pick --card CARD`,
# docs/data/h100-2026-12-06/call136/picks-CARD.txt). On an H200 its H200 rates, on an H100 its H100
# rates: one job, the model built once.
set -u
source calibrate/runs/common.sh
W136="$W/call136"; mkdir -p "$W136"
env_info > "$W136/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W136/env.txt"
RATES=$(rate "12.4 15.1 17.8 20.4 23.1" "7.9 9.6 11.2 12.9 14.6")
RUNS=$(for r in $RATES; do printf "mixed@%s:400:851," "$r"; done); RUNS=${RUNS%,}
echo "runs $RUNS" | tee -a "$W136/env.txt"
snap_loop & SNAPPER=$!  # the runs served so far come back even if the call is cut short
timeout 480 python3 -m calibrate.serving_job --out "$W136/serve" --card "$CARD" --model llama-3.1-8b \
  --max-num-seqs 64 --max-model-len 1280 --runs "$RUNS" --budget-s 450 > "$W136/cs8.log" 2>&1
echo "== cs8 done at $(elapsed) s"
kill $SNAPPER 2>/dev/null; wait $SNAPPER 2>/dev/null
snap; echo "== total $(elapsed) s"
grep -E "served in|Error|error|Traceback|refuse|skipped" "$W136/cs8.log" | tail -8
