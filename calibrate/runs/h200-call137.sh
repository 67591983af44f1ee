#!/usr/bin/env bash
# Device call 137 (the thirty-eighth session): choose-server against the real server loop
# (benchmarks/choose_server_check.py), both cases on one stream: llama-3.1-8b, the mixed stream,
# 400 requests, seed 851, 64 slots of 1,280 rows, prefill-first.
# - case ttft (TTFT p99 <= 200 ms, TPOT p99 <= 40 ms: TTFT binds near the capacity): the card's
#   choose-server rate R* x 0.85, 0.93, 1, 1.07, 1.15, picked before the call with the terms as
#   shipped (`.venv/bin/python benchmarks/choose_server_check.py pick --card CARD --case ttft`,
#   docs/data/cpu/call137-picks/picks-ttft-CARD.txt);
# - case tpot (call 136's SLOs), on an H200 only (call 136 served it on an H100): its H200 rates
#   (docs/data/h100-2026-12-06/call136/picks-h200.txt).
# One job, the model built once; the ttft rates first (they are the shorter runs).
set -u
source calibrate/runs/common.sh
W137="$W/call137"; mkdir -p "$W137"
env_info > "$W137/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W137/env.txt"
RATES=$(rate "28.5 31.2 33.6 35.9 38.6 12.4 15.1 17.8 20.4 23.1" "24.3 26.6 28.6 30.6 32.9")
RUNS=$(for r in $RATES; do printf "mixed@%s:400:851," "$r"; done); RUNS=${RUNS%,}
echo "runs $RUNS" | tee -a "$W137/env.txt"
snap_loop & SNAPPER=$!  # the runs served so far come back even if the call is cut short
timeout 500 python3 -m calibrate.serving_job --out "$W137/serve" --card "$CARD" --model llama-3.1-8b \
  --max-num-seqs 64 --max-model-len 1280 --runs "$RUNS" --budget-s 470 > "$W137/cs8.log" 2>&1
echo "== cs8 done at $(elapsed) s"
kill $SNAPPER 2>/dev/null; wait $SNAPPER 2>/dev/null
snap; echo "== total $(elapsed) s"
grep -E "served in|Error|error|Traceback|refuse|skipped" "$W137/cs8.log" | tail -12
