#!/usr/bin/env bash
# Device call 115 (the thirty-fourth session, the device time left): four held-out serving runs on
# models no serving run had (falcon-7b multi-query, olmo-2-7b and gpt-j-6b full attention,
# internlm2.5-7b grouped queries), seeds 801-804, rates picked before the call per card
# (calibrate/runs/pick_rates_call115.py; docs/data/h100-2026-12-06/call115/picks.txt). The 5 ms power
# sampler runs through each.
set -u
source calibrate/runs/common.sh
W115="$W/call115"; mkdir -p "$W115"
env_info > "$W115/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W115/env.txt"
sampled() { SAMPLER_MAX_S=120 sample_through "$W115" "$@"; }
sampled f7m serve_into "$W115" f7m --max-num-seqs 64 --max-model-len 1280 --model falcon-7b --runs "mixed@$(rate 35 25):300:801"
sampled o7s serve_into "$W115" o7s --max-num-seqs 64 --max-model-len 1024 --model olmo-2-7b --runs "short@$(rate 70 50):400:802"
sampled i7p serve_into "$W115" i7p --max-num-seqs 64 --max-model-len 1792 --model internlm2.5-7b --runs "long-prompt@25:200:803"
sampled j6m serve_into "$W115" j6m --max-num-seqs 32 --max-model-len 1280 --model gpt-j-6b --runs "mixed@$(rate 20 16):250:804"
echo "== total $(elapsed) s"
for f in "$W115"/*.log; do echo "----- $f"; grep -E "served in|Error|error|Traceback" "$f" | tail -2; done
