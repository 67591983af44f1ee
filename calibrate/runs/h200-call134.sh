#!/usr/bin/env bash
# Device call 134 (the thirty-sixth session), asked as nvidia-h200 (an H100 or an H200, whichever
# comes). On an H200: call 118's held-out streams at the H200 rates picked before call 118
# (docs/data/h100-2026-12-06/call118/picks.txt: olmo-2-7b long prompts, qwen3-8b short, qwen3-32b
# mixed, gpt-neox-20b on 32 slots), then as the time allows the three below at their H200 rates. On
# an H100: three models no serving run had (gemma-3-4b, gemma-3-12b, qwen2.5-32b; seeds 831-833) at
# the rates picked before the call (docs/data/h100-2026-12-06/call134/picks.txt).
set -u
source calibrate/runs/common.sh
W134="$W/call134"; mkdir -p "$W134"
env_info > "$W134/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W134/env.txt"
if [ "$CARD" = h200 ]; then
  serve_into "$W134" o7p --max-num-seqs 32 --max-model-len 1792 --model olmo-2-7b --runs "long-prompt@14:200:813"
  serve_into "$W134" q8s --max-num-seqs 64 --max-model-len 1024 --model qwen3-8b --runs "short@60:400:814"
  serve_into "$W134" q3m --max-num-seqs 16 --max-model-len 1280 --model qwen3-32b --runs "mixed@3:150:811"
  fits n20m && serve_into "$W134" n20m --max-num-seqs 32 --max-model-len 1280 --model gpt-neox-20b --runs "mixed@8:250:812"
fi
fits g4s && serve_into "$W134" g4s --max-num-seqs 128 --max-model-len 512 --model gemma-3-4b --runs "short@$(rate 160 120):500:831"
fits g12l && serve_into "$W134" g12l --max-num-seqs 64 --max-model-len 1024 --model gemma-3-12b --runs "long-gen@$(rate 9 6):300:832"
fits q32m && serve_into "$W134" q32m --max-num-seqs 16 --max-model-len 1280 --model qwen2.5-32b --runs "mixed@$(rate 3 2.5):150:833"
snap; echo "== total $(elapsed) s"
for f in "$W134"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
