#!/usr/bin/env bash
# Device call 144 (the forty-seventh session), asked for an H200 (an H100 serves it at its own
# rates for the reasoning stream, picked by the same script): held-out serving runs of two
# shapes no earlier run served and a small model on many slots (calibrate/runs/make_call144_streams.py;
# rates picked before the call, docs/data/cpu/call144-picks/picks.txt, whose shipped rows are the
# predictions): qwen2.5-1.5b chat on 256 slots at 40 and 60 req/s; llama-3.1-8b retrieval-shaped
# prompts on 64 slots, chunked, at 6 req/s; qwen2.5-7b reasoning-shaped answers on 64 slots at 3
# and 6 req/s (H100: 3 and 5) (one job each: each is most of a job's 130 s budget).
set -u
source calibrate/runs/common.sh
W144="$W/call144"; mkdir -p "$W144"
S=calibrate/runs/streams
env_info > "$W144/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W144/env.txt"
fits q15c && serve_into "$W144" q15c --max-num-seqs 256 --max-model-len 4096 --model qwen2.5-1.5b \
  --requests "$S/chat-s893-r40.csv,$S/chat-s893-r60.csv"
fits l8rc && serve_into "$W144" l8rc --max-num-seqs 64 --max-model-len 4096 --policy chunked --max-num-batched-tokens 2048 \
  --model llama-3.1-8b --requests "$S/rag-s892-r6.csv"
fits q7r3 && serve_into "$W144" q7r3 --max-num-seqs 64 --max-model-len 3840 --model qwen2.5-7b \
  --requests "$S/reason-s891-r3.csv"
fits q7r6 && serve_into "$W144" q7r6 --max-num-seqs 64 --max-model-len 3840 --model qwen2.5-7b \
  --requests "$S/reason-s891-r$(rate 6 5).csv"
snap; echo "== total $(elapsed) s"
for f in "$W144"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
