#!/usr/bin/env bash
# Device call 26 (nvidia-h200, one GPU): (1) the serving loop after its cache rows were rounded up
# to a multiple of 8 (this session): a chunked run at max_model_len 601 (608 rows a slot; short stream, 60 req/s, a 4,000-token pool: preemptions), its
# chunk graphs checked against SDPA before the clock as every run's are; (2) more points no fit or
# check saw: qwen3-8b, gemma-2-9b, internlm2.5-7b, qwen3-32b at prompt 16,384, llama-2-13b (MHA,
# 13B) at 512 and 3,072.
set -u
source calibrate/runs/common.sh
W26="$W/call26"; mkdir -p "$W26"
env_info > "$W26/env.txt" 2>&1
serve_into "$W26" q15-odd --model qwen2.5-1.5b --max-num-seqs 32 --max-model-len 601 --policy chunked \
  --max-num-batched-tokens 256 --kv-capacity-tokens 4000 --runs short@60:300:7
timeout 200 python3 -m calibrate.gpu_job --out "$W26/long" --card h200 --engines graph \
  --models qwen3-8b,gemma-2-9b,internlm2.5-7b,qwen3-32b --prompts 16384 --gen 16 --batches 1,4,16,64 \
  --no-ceilings --budget-s 170 > "$W26/long.log" 2>&1
echo "== long done at $(elapsed) s"; snap
timeout 120 python3 -m calibrate.gpu_job --out "$W26/l2" --card h200 --engines graph \
  --models llama-2-13b --prompts 512,3072 --gen 16 --batches 1,4,16,64,256 \
  --no-ceilings --budget-s 100 > "$W26/l2.log" 2>&1
echo "== llama-2-13b done at $(elapsed) s"; snap
grep -E "check|chunk" "$W26/q15-odd.log" | head -5; tail -3 "$W26/long.log"; tail -3 "$W26/l2.log"
