#!/usr/bin/env bash
# Device call 132 (the thirty-sixth session): the one stream of call 118 that no H100 can hold,
# gpt-neox-20b on 32 slots of 1,280 rows (its static cache and weights need 86.8 GB), at the H200
# rate picked before call 118 (docs/data/h100-2026-12-06/call118/picks.txt). Asked with needs_h200
# because of its memory. The rest of call 118's H200 streams follow on the same machine
# (calibrate/runs/h200-call133.sh serves the other three).
set -u
source calibrate/runs/common.sh
W132="$W/call132"; mkdir -p "$W132"
env_info > "$W132/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W132/env.txt"
if [ "$CARD" = h200 ]; then
  serve_into "$W132" n20m --max-num-seqs 32 --max-model-len 1280 --model gpt-neox-20b --runs "mixed@8:250:812"
fi
snap; echo "== total $(elapsed) s"
for f in "$W132"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
