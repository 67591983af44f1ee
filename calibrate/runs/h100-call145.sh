#!/usr/bin/env bash
# Device call 145 (the forty-eighth session), asked for an H100: call 144's four runs of qwen2.5-1.5b
# and qwen2.5-7b served again on whichever H100 machine comes, with the same settings and rates --
# qwen2.5-1.5b chat on 256 slots at 40 and 60 req/s, qwen2.5-7b reasoning answers on 64 slots at 3
# and 5 req/s. The check: the two of them that missed a bound on the first H100 (the TTFT p50s of
# chat at 60 and reasoning at 5) land, on another machine, where the replays at that machine's
# decode speed put them (docs/data/cpu/call145-predictions.txt, benchmarks/serving_speed_edge.py,
# written before the call), or miss again by the same amount (a term's error, not the machine's).
set -u
source calibrate/runs/common.sh
W145="$W/call145"; mkdir -p "$W145"
S=calibrate/runs/streams
env_info > "$W145/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W145/env.txt"
[ "$CARD" = h100-sxm ] || { echo "not an H100: call 145 repeats H100 runs only"; snap; exit 1; }
fits q15c && serve_into "$W145" q15c --max-num-seqs 256 --max-model-len 4096 --model qwen2.5-1.5b \
  --requests "$S/chat-s893-r40.csv,$S/chat-s893-r60.csv"
fits q7r3 && serve_into "$W145" q7r3 --max-num-seqs 64 --max-model-len 3840 --model qwen2.5-7b \
  --requests "$S/reason-s891-r3.csv"
fits q7r5 && serve_into "$W145" q7r5 --max-num-seqs 64 --max-model-len 3840 --model qwen2.5-7b \
  --requests "$S/reason-s891-r5.csv"
snap; echo "== total $(elapsed) s"
for f in "$W145"/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
