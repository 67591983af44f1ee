#!/usr/bin/env bash
# Device call 111 (the thirty-fourth session): six held-out serving runs after the K/V repeats'
# fixed time was priced apart (prefill_kv_repeat_s_per_layer): four full multi-head models whose
# price that moved (phi-3-mini-4k, llama-2-7b, llama-2-13b, pythia-6.9b) and two grouped-query
# controls, seeds 791-796 no run had, rates picked before the call per card
# (calibrate/runs/pick_rates_call111.py; docs/data/h100-2026-12-06/call111/picks.txt). The 5 ms power
# sampler runs through each. Then, on an H200 only and if time is left, the kv-repeat probe (the
# shipped term was measured on H100s).
set -u
source calibrate/runs/common.sh
W111="$W/call111"; mkdir -p "$W111"
env_info > "$W111/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W111/env.txt"
sampled() { SAMPLER_MAX_S=150 sample_through "$W111" "$@"; }
sampled p3m serve_into "$W111" p3m --max-num-seqs 64 --max-model-len 1536 --model phi-3-mini-4k --runs "mixed@$(rate 30 20):400:791"
sampled l2s serve_into "$W111" l2s --max-num-seqs 128 --max-model-len 1024 --model llama-2-7b --runs "short@$(rate 120 90):500:792"
sampled l13m serve_into "$W111" l13m --max-num-seqs 32 --max-model-len 1280 --model llama-2-13b --runs "mixed@$(rate 9 6):200:793"
sampled px serve_into "$W111" px --max-num-seqs 32 --max-model-len 1792 --model pythia-6.9b --runs "long-prompt@$(rate 18 14):200:794"
sampled m7s serve_into "$W111" m7s --max-num-seqs 128 --max-model-len 1024 --model mistral-7b-v0.3 --runs "short@$(rate 90 60):500:795"
sampled q3p serve_into "$W111" q3p --max-num-seqs 64 --max-model-len 1792 --model qwen2.5-3b --runs "long-prompt@40:300:796"
if [ "$CARD" = h200 ] && [ "$(elapsed)" -lt 450 ]; then
  timeout $(( 570 - $(elapsed) )) python3 calibrate/runs/kv_repeat_probe.py "$W111/kv-repeat.json" \
    qwen2.5-7b:32:2304 llama-2-7b:32:2304 llama-3.1-8b:32:2304 qwen2.5-1.5b:32:2304 > "$W111/kv-repeat.log" 2>&1
  grep -v Warning "$W111/kv-repeat.log" | tail -24; snap
fi
echo "== total $(elapsed) s"
for f in "$W111"/*.log; do echo "----- $f"; grep -E "^==|served in|Error|error|Traceback" "$f" | tail -3; done
