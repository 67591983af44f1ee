#!/usr/bin/env bash
# Device call 142 (the forty-first session): part two of calibrate/runs/h200-call141.sh's streams, at
# the rates picked before the call (docs/data/cpu/call141-picks/picks.txt): qwen2.5-14b with a load
# step (the arrival rate doubles halfway) and qwen2.5-32b chat, both on an H200 only (an H100 cannot
# hold their caches), and llama-3.2-3b chat on 128 slots on either card.
set -u
source calibrate/runs/common.sh
W142="$W/call142"; mkdir -p "$W142"
S=calibrate/runs/streams
env_info > "$W142/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W142/env.txt"
fits l3c && serve_into "$W142" l3c --max-num-seqs 128 --max-model-len 3840 --model llama-3.2-3b \
  --requests "$S/chat-s885-r20.csv,$S/chat-s885-r30.csv"
if [ "$CARD" = h200 ]; then
  fits q14s && serve_into "$W142" q14s --max-num-seqs 64 --max-model-len 4096 --model qwen2.5-14b \
    --requests "$S/step-s884-r6.csv"
  fits q32c && serve_into "$W142" q32c --max-num-seqs 32 --max-model-len 3584 --model qwen2.5-32b \
    --requests "$S/chat-s886-r3.csv"
fi
snap; echo "== total $(elapsed) s"
for f in "$W142"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
