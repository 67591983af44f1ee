#!/usr/bin/env bash
# Device call 119 (the thirty-fifth session). On an H200 (the acceptance card): calibrate/runs/
# h200-call117.sh's H200 part -- the kv-repeat probe, the kernel walk on four layouts (does the
# H200 show the launches the H100 walks priced?), the H200 gemm table's slow points re-timed and
# llama-2-7b's 128-slot stream. On an H100: three held-out streams on models no serving run had
# (gemma-2-9b, gpt-neox-20b, mistral-7b-v0.1), seeds 821-823, rates picked before the call
# (calibrate/runs/pick_rates_call119.py; docs/data/h100-2026-12-06/call119/picks.txt).
set -u
source calibrate/runs/common.sh
W119="$W/call119"; mkdir -p "$W119"
env_info > "$W119/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W119/env.txt"
if [ "$CARD" = h200 ]; then
  bash calibrate/runs/h200-call117.sh  # its H200 part, into $W/call117
else
  serve_into "$W119" m1s --max-num-seqs 64 --max-model-len 1024 --model mistral-7b-v0.1 --runs "short@60:400:823"
  serve_into "$W119" g9m --max-num-seqs 32 --max-model-len 1280 --model gemma-2-9b --runs "mixed@12:250:821"
  serve_into "$W119" n20m --max-num-seqs 16 --max-model-len 1280 --model gpt-neox-20b --runs "mixed@2:150:822"
fi
echo "== total $(elapsed) s"
for f in "$W119"/*.log; do echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; done
