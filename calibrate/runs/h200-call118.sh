#!/usr/bin/env bash
# Device call 118 (the thirty-fifth session): four held-out serving runs on the layouts whose price
# the elementwise launches moved (prefill_launch_s): qwen3-32b and gpt-neox-20b (no serving run had
# them), olmo-2-7b long prompts and qwen3-8b short requests, seeds 811-814, rates picked before the
# call per card (calibrate/runs/pick_rates_call118.py; docs/data/h100-2026-12-06/call118/picks.txt).
set -u
source calibrate/runs/common.sh
W118="$W/call118"; mkdir -p "$W118"
env_info > "$W118/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W118/env.txt"
serve_into "$W118" o7p --max-num-seqs 32 --max-model-len 1792 --model olmo-2-7b --runs "long-prompt@$(rate 14 10):200:813"
serve_into "$W118" q8s --max-num-seqs 64 --max-model-len 1024 --model qwen3-8b --runs "short@60:400:814"
serve_into "$W118" n20m --max-num-seqs 32 --max-model-len 1280 --model gpt-neox-20b --runs "mixed@$(rate 8 5):250:812"
serve_into "$W118" q32m --max-num-seqs 16 --max-model-len 1280 --model qwen3-32b --runs "mixed@$(rate 3 2):150:811"
echo "== total $(elapsed) s"
for f in "$W118"/*.log; do echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; done
