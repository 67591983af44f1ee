#!/usr/bin/env bash
# Device call 140 (the fortieth session), asked for an H200 (an H100 if that is what comes): six
# held-out streams on seeds no run had, at the rates picked before the call for the card it lands
# on (docs/data/cpu/call140-picks/picks.txt; calibrate/runs/pick_rates_call140.py): falcon-7b short,
# internlm2.5-7b mixed, llama-3.2-3b mixed on a 12,000-token pool that preempts, qwen2.5-14b long
# prompts chunked at 1,024 tokens, gpt-j-6b long-gen overloaded, qwen3-8b fixed.
set -u
source calibrate/runs/common.sh
W140="$W/call140"; mkdir -p "$W140"
env_info > "$W140/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W140/env.txt"
fits f7s && serve_into "$W140" f7s --max-num-seqs 96 --max-model-len 512 --model falcon-7b --runs "short@$(rate 120 90):500:871"
fits i7m && serve_into "$W140" i7m --max-num-seqs 64 --max-model-len 1280 --model internlm2.5-7b --runs "mixed@25:300:872"
fits l3t && serve_into "$W140" l3t --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 --model llama-3.2-3b \
  --runs "mixed@40:400:873"
fits q14c && serve_into "$W140" q14c --max-num-seqs 32 --max-model-len 1792 --policy chunked --max-num-batched-tokens 1024 \
  --model qwen2.5-14b --runs "long-prompt@$(rate 12 9):200:874"
fits gjl && serve_into "$W140" gjl --max-num-seqs 64 --max-model-len 1024 --model gpt-j-6b --runs "long-gen@$(rate 20 16):250:875"
fits q8f && serve_into "$W140" q8f --max-num-seqs 128 --max-model-len 512 --model qwen3-8b --runs "fixed@$(rate 40 30):400:876"
snap; echo "== total $(elapsed) s"
for f in "$W140"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -2; }; done
