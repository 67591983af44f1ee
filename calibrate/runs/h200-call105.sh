#!/usr/bin/env bash
# Device call 105 (the thirty-third session): eight held-out serving runs, streams and seeds no run
# had and three models no serving run had (llama-2-7b, llama-2-13b: full multi-head attention;
# phi-3-mini-4k: 96-wide heads), at rates picked before the call with both term sets
# (calibrate/runs/pick_rates_call105.py; docs/data/h100-2026-12-06/call105/picks.txt names each rate, per card: a call
# asking for an H200 may be lent an H100). The 5 ms power sampler runs through each.
set -u
source calibrate/runs/common.sh
W105="$W/call105"; mkdir -p "$W105"
env_info > "$W105/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W105/env.txt"
# rate on the H200, rate on the H100 (docs/data/h100-2026-12-06/call105/picks.txt)
sampled() { SAMPLER_MAX_S=150 sample_through "$W105" "$@"; }
# in order of what a cut-short call should still bring back
sampled l2 serve_into "$W105" l2 --max-num-seqs 64 --max-model-len 1280 --model llama-2-7b --runs "mixed@$(rate 25 15):400:781"
sampled l3p serve_into "$W105" l3p --max-num-seqs 96 --max-model-len 1024 --kv-capacity-tokens 20000 --model llama-3.2-3b \
  --runs "long-gen@30:300:783"
sampled q15c serve_into "$W105" q15c --max-num-seqs 128 --max-model-len 1792 --policy chunked --max-num-batched-tokens 512 \
  --model qwen2.5-1.5b --runs "long-prompt@30:400:784"
sampled p3 serve_into "$W105" p3 --max-num-seqs 128 --max-model-len 1024 --model phi-3-mini-4k --runs "short@$(rate 140 100):500:782"
sampled l13 serve_into "$W105" l13 --max-num-seqs 32 --max-model-len 1792 --model llama-2-13b --runs "long-prompt@7:150:787"
sampled q7c serve_into "$W105" q7c --max-num-seqs 64 --max-model-len 1536 --policy chunked --max-num-batched-tokens 2048 \
  --model qwen2.5-7b --runs "mixed@$(rate 35 25):300:785"
sampled q8g serve_into "$W105" q8g --max-num-seqs 96 --max-model-len 1024 --model qwen3-8b --runs "long-gen@$(rate 20 15):300:786"
sampled l8m serve_into "$W105" l8m --max-num-seqs 128 --max-model-len 1280 --model llama-3.1-8b --runs "mixed@60:400:788"
echo "== total $(elapsed) s"
for f in "$W105"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback" "$f" | tail -3; done
