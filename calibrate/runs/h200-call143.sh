#!/usr/bin/env bash
# Device call 143 (the forty-sixth session), asked for an H200: calls 141-142's two streams whose
# replays missed a bound on the H200 of the same session, served again on whichever H200 machine
# comes, with the same settings and rates -- llama-3.2-3b chat on 128 slots at 20 and 30 req/s,
# qwen2.5-7b chat on 64 slots at 15 and 25 req/s. The check: the same stream's TPOT p50 and TTFT
# p50 move from machine to machine with the decode steps' speed, as the replays at each speed
# predicted before the call (docs/data/cpu/call143-predictions.txt,
# benchmarks/serving_speed_edge.py).
set -u
source calibrate/runs/common.sh
W143="$W/call143"; mkdir -p "$W143"
S=calibrate/runs/streams
env_info > "$W143/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W143/env.txt"
[ "$CARD" = h200 ] || { echo "not an H200: call 143 repeats H200 runs only"; snap; exit 1; }
fits l3c && serve_into "$W143" l3c --max-num-seqs 128 --max-model-len 3840 --model llama-3.2-3b \
  --requests "$S/chat-s885-r20.csv,$S/chat-s885-r30.csv"
fits q7c && serve_into "$W143" q7c --max-num-seqs 64 --max-model-len 3584 --model qwen2.5-7b \
  --requests "$S/chat-s881-r15.csv,$S/chat-s881-r25.csv"
snap; echo "== total $(elapsed) s"
for f in "$W143"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
