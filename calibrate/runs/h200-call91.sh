#!/usr/bin/env bash
# Device call 91 (nvidia-h200, one GPU): held-out serving runs at the settings a new user reaches
# first, which no committed run had: the KV pool sized from the GPU's memory (no
# --kv-capacity-tokens: --gpu-memory-utilization 0.9, `roofline serve`'s default) and more than 64
# slots (decode buckets 96-256). qwen2.5-1.5b with the defaults, slot-bound at 90 req/s;
# qwen2.5-1.5b with 128 slots at 120 req/s; llama-3.1-8b with 256 slots of 512 rows, short
# requests at 150 and 250 req/s; qwen2.5-7b long prompts chunked at a 1,024-token budget, 128
# slots of 1,792 rows. Rates picked with `roofline simulate --pass-cost serving-loop` before the
# call; nothing replayed before it runs. Each run carries the device probe; clocks logged.
set -u
source calibrate/runs/common.sh
W91="$W/call91"; mkdir -p "$W91"
env_info > "$W91/env.txt" 2>&1
# the loop terms these runs are held out against are the H200's: on another card, stop at once
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: $(nvidia-smi --query-gpu=name --format=csv,noheader)"; snap; exit 3; }
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$W91/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >> "$W91/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$W91/clocks.txt"; clocks; serve_into "$W91" "$@"; clocks; }
serve d15 --max-num-seqs 64 --max-model-len 1280 --model qwen2.5-1.5b --runs mixed@90:400:701
serve s128 --max-num-seqs 128 --max-model-len 1280 --kv-capacity-tokens 60000 --model qwen2.5-1.5b --runs mixed@120:500:702
serve l8a --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@150:600:703
serve l8b --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@250:600:703
serve q7lp --max-num-seqs 128 --max-model-len 1792 --policy chunked --max-num-batched-tokens 1024 --model qwen2.5-7b \
  --runs long-prompt@10:200:704
echo "== total $(elapsed) s"
for f in "$W91"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -5; done
