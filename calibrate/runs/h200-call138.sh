#!/usr/bin/env bash
# Device call 138 (the thirty-eighth session): choose-server against the real server loop
# (benchmarks/choose_server_check.py), case chunked: qwen2.5-7b, the long-prompt stream (prompts
# 512-1,536, generations 16-64), 400 requests, seed 861, 32 slots of 1,792 rows, prompts chunked at
# 512 tokens beside the decodes (policy chunked); SLOs TTFT p99 <= 500 ms, TPOT p99 <= 30 ms (TTFT
# binds at ~80% of the capacity). Served at the card's choose-server rate R* x 0.7, 0.85, 1, 1.15,
# 1.3, picked before the call with the terms as shipped
# (`.venv/bin/python benchmarks/choose_server_check.py pick --card CARD --case chunked`,
# docs/data/cpu/call138-picks/picks-chunked-CARD.txt). One job, the model built once.
set -u
source calibrate/runs/common.sh
W138="$W/call138"; mkdir -p "$W138"
env_info > "$W138/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W138/env.txt"
RATES=$(rate "13 15.8 18.6 21.4 24.1" "11 13.4 15.7 18.1 20.4")
RUNS=$(for r in $RATES; do printf "long-prompt@%s:400:861," "$r"; done); RUNS=${RUNS%,}
echo "runs $RUNS" | tee -a "$W138/env.txt"
snap_loop & SNAPPER=$!  # the runs served so far come back even if the call is cut short
timeout 500 python3 -m calibrate.serving_job --out "$W138/serve" --card "$CARD" --model qwen2.5-7b \
  --max-num-seqs 32 --max-model-len 1792 --policy chunked --max-num-batched-tokens 512 \
  --runs "$RUNS" --budget-s 470 > "$W138/q7c.log" 2>&1
echo "== q7c done at $(elapsed) s"
kill $SNAPPER 2>/dev/null; wait $SNAPPER 2>/dev/null
snap; echo "== total $(elapsed) s"
grep -E "served in|Error|error|Traceback|refuse|skipped" "$W138/q7c.log" | tail -12
