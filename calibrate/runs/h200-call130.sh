#!/usr/bin/env bash
# Device call 130 (the thirty-sixth session). On an H200 only: call 118's four held-out streams at
# the H200 rates picked before call 118 (docs/data/h100-2026-12-06/call118/picks.txt, its H200
# column; the H100s served the H100 column in call 118): qwen3-32b, gpt-neox-20b on 32 slots (86.8 GB:
# an H200 holds it, the H100 refused it), olmo-2-7b long prompts, qwen3-8b short; seeds 811-814. Then,
# if the time allows, the H200 gemm table's slow points re-timed (calibrate/runs/gemm_recheck.py).
# On any other card it stops at once.
set -u
source calibrate/runs/common.sh
W130="$W/call130"; mkdir -p "$W130"
env_info > "$W130/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W130/env.txt"
if [ "$CARD" = h200 ]; then
  serve_into "$W130" o7p --max-num-seqs 32 --max-model-len 1792 --model olmo-2-7b --runs "long-prompt@14:200:813"
  serve_into "$W130" q8s --max-num-seqs 64 --max-model-len 1024 --model qwen3-8b --runs "short@60:400:814"
  serve_into "$W130" n20m --max-num-seqs 32 --max-model-len 1280 --model gpt-neox-20b --runs "mixed@8:250:812"
  serve_into "$W130" q32m --max-num-seqs 16 --max-model-len 1280 --model qwen3-32b --runs "mixed@3:150:811"
  if [ "$(elapsed)" -lt 480 ]; then
    timeout 60 python3 calibrate/runs/gemm_recheck.py "$W130/gemm-recheck.json" 24 > "$W130/gemm-recheck.log" 2>&1
    grep -v Warning "$W130/gemm-recheck.log" | tail -12
  fi
fi
snap; echo "== total $(elapsed) s"
for f in "$W130"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
