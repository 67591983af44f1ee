#!/usr/bin/env bash
# H100 device call 3 (nvidia-h200 asked for; an H100 is what the device lends this session):
# more leave-one-card-out checks, committed before the call, nothing about the H100 fitted.
#  1. four serving runs (`--card h100-sxm`): two of call 1's streams again, the same stream on the
#     same settings (how far one stream's measured tails move between two runs on this card:
#     qwen2.5-1.5b with 128 slots at 110 req/s, TTFT p50 -26% in call 1; with 64 slots at 80 req/s,
#     TTFT p99 +80%), and two new ones with the pool from memory: qwen2.5-7b mixed at 25 req/s
#     (64 slots of 2,048 rows, prefill-first) and llama-3.1-8b mixed chunked at a 512-token budget,
#     20 req/s (128 slots of 2,048 rows). Rates picked with `roofline simulate --card h100-sxm
#     --pass-cost serving-loop` on the terms transferred to the H100 (roofline.pass_costs.
#     transferred_loop_terms: the H200's fitted terms with the H100's probe tables of calls 1-2).
#  2. the graph engine as `roofline calibrate --no-fit` measures it, at models and contexts of
#     other kinds: qwen2.5-7b at 1,024 and 8,192 + 16, gpt-oss-20b (MoE, windows, sinks) and
#     deepseek-v2-lite (latent attention, shared experts) at 2,048 + 16, qwen3-30b-a3b at 1,024 + 16.
set -u
source calibrate/runs/common.sh
WH="$W/h100-call3"; mkdir -p "$WH"
env_info > "$WH/env.txt" 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 || { echo "not an H100"; snap; exit 3; }
export CARD=h100-sxm
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$WH/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >> "$WH/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$WH/clocks.txt"; clocks; serve_into "$WH" "$@"; clocks; }
serve s128 --max-num-seqs 128 --max-model-len 1280 --kv-capacity-tokens 60000 --model qwen2.5-1.5b --runs mixed@110:500:702
serve d15 --max-num-seqs 64 --max-model-len 1280 --model qwen2.5-1.5b --runs mixed@80:400:701
serve q7m --max-num-seqs 64 --max-model-len 2048 --model qwen2.5-7b --runs mixed@25:300:711
serve l8c --max-num-seqs 128 --max-model-len 2048 --policy chunked --max-num-batched-tokens 512 --model llama-3.1-8b \
  --runs mixed@20:300:712
graph() {  # graph NAME MODEL PROMPTS BATCHES TIMEOUT
  timeout "$5" python3 -m calibrate.gpu_job --out "$WH/$1" --card h100-sxm --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches "$4" --no-ceilings --budget-s $(( $5 - 15 )) > "$WH/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
graph g7 qwen2.5-7b 1024,8192 1,4,16,64 60
graph goss gpt-oss-20b 2048 1,4,16,64 90
graph gdsv deepseek-v2-lite 2048 1,4,16,64 70
graph gq3m qwen3-30b-a3b 1024 1,4,16 80
echo "== total $(elapsed) s"
for f in "$WH"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -4; done
