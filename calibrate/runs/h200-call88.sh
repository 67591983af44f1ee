#!/usr/bin/env bash
# Device call 88 (nvidia-h200, one GPU): more held-out serving runs after the fact, none looked at
# before its replay was computed with the shipped calibration and loop terms: two models the loop
# never served (llama-3.1-8b, prefill-first and chunked; qwen2.5-14b, 48 layers, the deepest yet),
# a tight pool (qwen2.5-1.5b with 32 slots and 8,000 tokens), a high rate of short requests
# (qwen2.5-0.5b), the bursty stream on qwen2.5-7b (its bursts overload it), and call 85's missed
# llama-3.2-1b stream again (its decode ran 1.046x its price on call 85's machine). GPU clocks
# logged around each job.
set -u
source calibrate/runs/common.sh
W88="$W/call88"; mkdir -p "$W88"
env_info > "$W88/env.txt" 2>&1
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$W88/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >> "$W88/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$W88/clocks.txt"; clocks; serve_into "$W88" "$@"; clocks; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve l8 $P --model llama-3.1-8b --runs mixed@24:250:401
serve l1r $P --model llama-3.2-1b --runs mixed@65:400:302
serve q14 $P --model qwen2.5-14b --runs mixed@12:200:402
serve l8c $P --policy chunked --max-num-batched-tokens 512 --model llama-3.1-8b --runs mixed@21:250:403
serve q15t --max-num-seqs 32 --max-model-len 1280 --kv-capacity-tokens 8000 --model qwen2.5-1.5b --runs mixed@40:300:405
serve q05s $P --model qwen2.5-0.5b --runs short@130:400:404
serve q7b $P --model qwen2.5-7b --requests calibrate/runs/streams/bursty-mixed-s300.csv
echo "== total $(elapsed) s"
for f in "$W88"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -5; done
