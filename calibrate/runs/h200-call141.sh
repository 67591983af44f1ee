#!/usr/bin/env bash
# Device call 141 (the forty-first session), asked for an H200: request files shaped as a user would
# write them (calibrate/runs/make_call141_streams.py: heavy-tailed chat and code-completion lengths,
# clustered gamma arrivals; seeds no run had), served with a new user's settings -- max_model_len the
# longest request rounded up to 256 (the serving job's default_max_model_len), the KV pool from 90% of
# the GPU's memory -- at the rates picked before the call for the card it lands on
# (docs/data/cpu/call141-picks/picks.txt; calibrate/runs/pick_rates_call141.py). Part one of two:
# qwen2.5-7b chat, llama-3.1-8b code chunked at 2,048 tokens, mistral-7b-v0.3 gamma arrivals
# (calibrate/runs/h200-call142.sh serves the other three).
set -u
source calibrate/runs/common.sh
W141="$W/call141"; mkdir -p "$W141"
S=calibrate/runs/streams
env_info > "$W141/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W141/env.txt"
fits q7c && serve_into "$W141" q7c --max-num-seqs 64 --max-model-len 3584 --model qwen2.5-7b \
  --requests "$S/chat-s881-r$(rate 15 10).csv,$S/chat-s881-r$(rate 25 20).csv"
fits l8k && serve_into "$W141" l8k --max-num-seqs 64 --max-model-len 3840 --policy chunked --max-num-batched-tokens 2048 \
  --model llama-3.1-8b --requests "$S/code-s882-r$(rate 8 6).csv"
fits m7g && serve_into "$W141" m7g --max-num-seqs 64 --max-model-len 3328 --model mistral-7b-v0.3 \
  --requests "$S/gamma-s883-r$(rate 12 8).csv,$S/gamma-s883-r$(rate 20 16).csv"
snap; echo "== total $(elapsed) s"
for f in "$W141"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
