#!/usr/bin/env bash
# Device call 146 (the forty-ninth session), on either card: the same stream served several times
# back to back on one machine, to split the spread of a near-capacity TTFT between the machine and
# the run itself. Calls 144 and 145 served qwen2.5-1.5b's chat stream at 60 req/s on 256 full slots
# on two H100 leases with TTFT p50 21.5 and 24.5 ms; calls 91 and 92 served qwen2.5-1.5b's mixed
# stream (seed 702, 128 slots, a 60,000-token pool) at 120 req/s on two H200 leases with 17.2 and
# 29.4 ms, and H100 calls 1 and 3 at 110 req/s with 58.8 and 64.8 ms
# (benchmarks/serving_repeatability.py). Here: that mixed stream four times (at the card's rate:
# H200 120, H100 110 req/s, call 91's and call 1's settings), then the chat stream three times,
# each in its own process (the serving job's model build, graph capture and probes each time), into
# rep1..rep4; nothing else differs. If the repeats on one machine agree within a few percent, the
# spread between leases is the machines'; if they spread as far, it is the run's own.
set -u
source calibrate/runs/common.sh
W146="$W/call146"; mkdir -p "$W146"
S=calibrate/runs/streams
env_info > "$W146/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W146/env.txt"
for i in 1 2 3 4; do
  mkdir -p "$W146/rep$i"
  fits "s128-$i" && serve_into "$W146/rep$i" s128 --max-num-seqs 128 --max-model-len 1280 --kv-capacity-tokens 60000 \
    --model qwen2.5-1.5b --runs "mixed@$(rate 120 110):500:702"
done
for i in 1 2 3; do
  fits "q15c-$i" && serve_into "$W146/rep$i" q15c --max-num-seqs 256 --max-model-len 4096 --model qwen2.5-1.5b \
    --requests "$S/chat-s893-r60.csv"
done
snap; echo "== total $(elapsed) s"
for f in "$W146"/rep*/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
