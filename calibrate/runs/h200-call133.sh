#!/usr/bin/env bash
# Device call 133 (the thirty-sixth session), on the H200 call 132 was lent: call 118's other three
# held-out streams at the H200 rates picked before call 118 (olmo-2-7b long prompts, qwen3-8b short,
# qwen3-32b mixed; docs/data/h100-2026-12-06/call118/picks.txt), then, as the time allows, call 134's
# three at their H200 rates picked before call 134 (gemma-3-4b, gemma-3-12b, qwen2.5-32b;
# docs/data/h100-2026-12-06/call134/picks.txt), then the H200 gemm table's slow points re-timed. On
# any other card it stops at once.
set -u
source calibrate/runs/common.sh
W133="$W/call133"; mkdir -p "$W133"
env_info > "$W133/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W133/env.txt"
if [ "$CARD" = h200 ]; then
  serve_into "$W133" o7p --max-num-seqs 32 --max-model-len 1792 --model olmo-2-7b --runs "long-prompt@14:200:813"
  serve_into "$W133" q8s --max-num-seqs 64 --max-model-len 1024 --model qwen3-8b --runs "short@60:400:814"
  serve_into "$W133" q3m --max-num-seqs 16 --max-model-len 1280 --model qwen3-32b --runs "mixed@3:150:811"
  fits g4s && serve_into "$W133" g4s --max-num-seqs 128 --max-model-len 512 --model gemma-3-4b --runs "short@160:500:831"
  fits g12l && serve_into "$W133" g12l --max-num-seqs 64 --max-model-len 1024 --model gemma-3-12b --runs "long-gen@9:300:832"
  fits q32m && serve_into "$W133" q32m --max-num-seqs 16 --max-model-len 1280 --model qwen2.5-32b --runs "mixed@3:150:833"
  if [ "$(elapsed)" -lt 520 ]; then
    timeout 60 python3 calibrate/runs/gemm_recheck.py "$W133/gemm-recheck.json" 24 > "$W133/gemm-recheck.log" 2>&1
    grep -v Warning "$W133/gemm-recheck.log" | tail -12
  fi
fi
snap; echo "== total $(elapsed) s"
for f in "$W133"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
