#!/usr/bin/env bash
# Device call 102 (the thirty-second session; nvidia-h200 asked for, an H100 runs it the same way and
# is recorded as h100-sxm): eight held-out serving runs, streams and seeds no run had, at rates
# picked before the call with both term sets (calibrate/runs/pick_rates_call102.py, its output in
# docs/data/h100-2026-12-06/call102/picks.txt (the call was lent an H100)):
#   q3a/q3b  qwen3-8b, 128 slots of 1,024 rows, short requests at 80 req/s (under load: ~72 running)
#            and 140 (the slots full: TTFT p50 ~40 ms);
#   m7       mistral-7b-v0.3, 96 slots, long-gen at 22 req/s (~93 running);
#   l1       llama-3.2-1b, 128 slots of 1,280 rows, mixed at 120 req/s (~77 running);
#   q3c      qwen2.5-3b, chunked prefill (1,024 tokens an iteration), 64 slots of 1,792, long-prompt at 30;
#   q7p      qwen2.5-7b, 64 slots of 1,280, a pool of 10,000 tokens, mixed at 25 (preempts: ~31-36);
#   l8f      llama-3.1-8b, 128 slots of 512 rows, the fixed stream (256 + 128 tokens) at 40 (~96 running);
#   q14      qwen2.5-14b, 64 slots of 1,792, long-prompt at 9 (~30 running).
# The 5 ms power sampler runs through each.
set -u
source calibrate/runs/common.sh
W102="$W/call102"; mkdir -p "$W102"
env_info > "$W102/env.txt" 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then export CARD=h200; else export CARD=h100-sxm; fi
sampled() { SAMPLER_MAX_S=150 sample_through "$W102" "$@"; }
# in order of what a cut-short call should still bring back (the snapshot after each run keeps it)
sampled q3a serve_into "$W102" q3a --max-num-seqs 128 --max-model-len 1024 --model qwen3-8b --runs short@80:500:771
sampled q7p serve_into "$W102" q7p --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 10000 --model qwen2.5-7b \
  --runs mixed@25:300:775
sampled q3c serve_into "$W102" q3c --max-num-seqs 64 --max-model-len 1792 --policy chunked --max-num-batched-tokens 1024 \
  --model qwen2.5-3b --runs long-prompt@30:300:774
sampled m7 serve_into "$W102" m7 --max-num-seqs 96 --max-model-len 1024 --model mistral-7b-v0.3 --runs long-gen@22:300:772
sampled q3b serve_into "$W102" q3b --max-num-seqs 128 --max-model-len 1024 --model qwen3-8b --runs short@140:500:771
sampled l1 serve_into "$W102" l1 --max-num-seqs 128 --max-model-len 1280 --model llama-3.2-1b --runs mixed@120:500:773
sampled l8f serve_into "$W102" l8f --max-num-seqs 128 --max-model-len 512 --model llama-3.1-8b --runs fixed@40:400:776
sampled q14 serve_into "$W102" q14 --max-num-seqs 64 --max-model-len 1792 --model qwen2.5-14b --runs long-prompt@9:200:777
echo "== total $(elapsed) s"
for f in "$W102"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback" "$f" | tail -3; done
