#!/usr/bin/env bash
# Written in the thirty-fifth session, not run there (the device time ran out). On an H200 only:
# call 119's three held-out streams (gemma-2-9b, gpt-neox-20b, mistral-7b-v0.1: models no H200 run
# had; seeds 821-823) at the H200's rates picked before any of them ran on one
# (docs/data/h100-2026-12-06/call119/picks.txt, its H200 table). Its companion for call 118's streams
# is calibrate/runs/h200-call118.sh itself, which serves the H200's rates on an H200. On any other
# card it stops at once (the H100s served these in call 119).
set -u
source calibrate/runs/common.sh
W131="$W/call131"; mkdir -p "$W131"
env_info > "$W131/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W131/env.txt"
if [ "$CARD" = h200 ]; then
  serve_into "$W131" m1s --max-num-seqs 64 --max-model-len 1024 --model mistral-7b-v0.1 --runs "short@75:400:823"
  serve_into "$W131" g9m --max-num-seqs 32 --max-model-len 1280 --model gemma-2-9b --runs "mixed@16:250:821"
  serve_into "$W131" n20m --max-num-seqs 16 --max-model-len 1280 --model gpt-neox-20b --runs "mixed@2:150:822"
fi
snap; echo "== total $(elapsed) s"
for f in "$W131"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
