#!/usr/bin/env bash
# H100 device call 1 (nvidia-h200 asked for; the device lent an NVIDIA H100 80GB HBM3, and its docs
# say to rerun a baseline on the card that came rather than insist on the H200): the first
# measurements of any card but the H200 with the graph engine and its serving loop, all held out
# (leave-one-card-out). If the machine is an H200 after all, this runs call 91 instead.
#  1. six serving runs of the real loop with `--card h100-sxm`: call 91's settings (the pool from
#     memory, 64-256 slots; 128 slots and 60,000 tokens; 256 slots of 512 rows; a chunked
#     long-prompt stream) and one with a 40,000-token pool that preempts. Rates picked before the
#     call with `roofline simulate --card h100-sxm --pass-cost serving-loop --loop-terms
#     hardware_profiles/serving/h200-graph-loop.json` (the H200's terms carried over unchanged).
#     Each run carries the host and device probes; clocks logged around each.
#  2. the graph engine's decode and prefill as `roofline calibrate --no-fit` measures them
#     (`calibrate.gpu_job --engines graph`): qwen2.5-1.5b and llama-3.1-8b at 128 and 2,048 + 16,
#     batches 1-256 until out of memory: the graph profile's transfer to the H100, held out.
#  3. the chunk probe at 1,280 and 4,096 rows (card measurements the loop's chunk price reads).
set -u
source calibrate/runs/common.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash calibrate/runs/h200-call91.sh; fi
WH="$W/h100-call1"; mkdir -p "$WH"
env_info > "$WH/env.txt" 2>&1
export CARD=h100-sxm
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$WH/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >> "$WH/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$WH/clocks.txt"; clocks; serve_into "$WH" "$@"; clocks; }
serve d15 --max-num-seqs 64 --max-model-len 1280 --model qwen2.5-1.5b --runs mixed@80:400:701
serve s128 --max-num-seqs 128 --max-model-len 1280 --kv-capacity-tokens 60000 --model qwen2.5-1.5b --runs mixed@110:500:702
serve l8a --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@150:600:703
serve l8b --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@250:600:703
serve q7lp --max-num-seqs 128 --max-model-len 1792 --policy chunked --max-num-batched-tokens 1024 --model qwen2.5-7b \
  --runs long-prompt@8:200:704
serve p40 --max-num-seqs 128 --max-model-len 1280 --kv-capacity-tokens 40000 --model qwen2.5-1.5b --runs mixed@120:500:705
graph() {  # graph NAME MODEL PROMPTS BATCHES TIMEOUT
  timeout "$5" python3 -m calibrate.gpu_job --out "$WH/$1" --card h100-sxm --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches "$4" --no-ceilings --budget-s $(( $5 - 15 )) > "$WH/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
graph g15 qwen2.5-1.5b 128,2048 1,4,16,64,256 70
graph g8 llama-3.1-8b 128,2048 1,4,16,64,256 80
timeout 60 python3 -m calibrate.probes --out "$WH/probes" --what chunk --budget-s 45 > "$WH/probe-chunk.log" 2>&1
echo "== chunk probe done at $(elapsed) s"; snap
timeout 60 python3 -m calibrate.probes --out "$WH/probes-rows4096" --what chunk --chunk-rows 4096 --budget-s 45 \
  > "$WH/probe-chunk-rows4096.log" 2>&1; echo "== chunk probe 4096 done at $(elapsed) s"; snap
echo "== total $(elapsed) s"
for f in "$WH"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -4; done
