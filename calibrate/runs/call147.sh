#!/usr/bin/env bash
# Device call 147 (the fiftieth session), on either card: does pinning the serving loop to one CPU
# core steady its host time, and with it a near-capacity TTFT? Call 146 served qwen2.5-1.5b's mixed
# stream (seed 702, 128 slots, a 60,000-token pool, 110 req/s) four times on one H100: the host's
# median gap between passes went 0.24-0.41 ms from process to process (a shift of the whole
# distribution, not a few stalls: no gap over 1.1 ms), and TTFT p50 29.5-74.0 ms. Here the same
# stream six times, alternating a free process (rep1, rep3, rep5) with one pinned by `taskset -c 3`
# (rep2, rep4, rep6), each in its own process; the cores' clock (/proc/cpuinfo) is logged before
# each. If the pinned repeats agree where the free ones spread, the harness should pin.
set -u
source calibrate/runs/common.sh
W147="$W/call147"; mkdir -p "$W147"
env_info > "$W147/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W147/env.txt"
for i in 1 2 3 4 5 6; do
  mkdir -p "$W147/rep$i"
  pin=""; [ $((i % 2)) -eq 0 ] && command -v taskset > /dev/null && pin="taskset -c 3"
  { echo "rep$i prefix '$pin' at $(elapsed) s"; grep MHz /proc/cpuinfo | awk '{print $4}' | tr '\n' ' '; echo; } \
    >> "$W147/cpu-mhz.txt"
  fits "s128-$i" && SERVE_PREFIX="$pin" serve_into "$W147/rep$i" s128 --max-num-seqs 128 --max-model-len 1280 \
    --kv-capacity-tokens 60000 --model qwen2.5-1.5b --runs "mixed@$(rate 120 110):500:702"
done
snap; echo "== total $(elapsed) s"
for f in "$W147"/rep*/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
