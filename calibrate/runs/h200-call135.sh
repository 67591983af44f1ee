#!/usr/bin/env bash
# Device call 135 (the thirty-sixth session), asked as nvidia-h200 (an H100 or an H200, whichever
# comes). On an H100: call 134's three new models under the server's other regimes, seeds 841-843,
# rates picked before the call (docs/data/h100-2026-12-06/call135/picks.txt): gemma-3-4b long
# generations on a 20,000-token pool that preempts, qwen2.5-32b long prompts chunked at 1,024 tokens,
# gemma-3-12b's fixed 256 + 128 chunked at 512. On an H200: calibrate/runs/h200-call133.sh.
set -u
source calibrate/runs/common.sh
W135="$W/call135"; mkdir -p "$W135"
env_info > "$W135/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W135/env.txt"
if [ "$CARD" = h200 ]; then
  bash calibrate/runs/h200-call133.sh
  exit
fi
serve_into "$W135" g4p --max-num-seqs 96 --max-model-len 1024 --kv-capacity-tokens 20000 --model gemma-3-4b \
  --runs "long-gen@30:300:841"
serve_into "$W135" q32c --max-num-seqs 16 --max-model-len 1792 --policy chunked --max-num-batched-tokens 1024 \
  --model qwen2.5-32b --runs "long-prompt@4:150:842"
serve_into "$W135" g12c --max-num-seqs 64 --max-model-len 1024 --policy chunked --max-num-batched-tokens 512 \
  --model gemma-3-12b --runs "fixed@12:300:843"
snap; echo "== total $(elapsed) s"
for f in "$W135"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
