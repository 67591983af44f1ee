#!/usr/bin/env bash
# Device call 148 (the fiftieth session), on either card: does the host probe read a run's host when it
# serves as many sequences as the run does? On call 147's H100 the same stream's host time between passes
# went 0.34-0.50 s from one process to the next (pinned to a core or not), the TTFT p50 with it (58.5-99.1
# ms), while the host probe -- 16 sequences, before and after the clock -- read the slowest host for the
# fastest run. Here call 147's stream (qwen2.5-1.5b mixed, seed 702, 128 slots, a 60,000-token pool; H200
# 120, H100 110 req/s) six times, each in its own process, with `--wide-host-probe`: the probe also taken
# with all 128 slots decoding, before and after each clock (config's host_probe_wide; the replay does
# not read it). If the wide probe ranks the six runs' host times where the narrow one did not, the
# replay's host scaling should move to it.
set -u
source calibrate/runs/common.sh
W148="$W/call148"; mkdir -p "$W148"
env_info > "$W148/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W148/env.txt"
for i in 1 2 3 4 5 6; do
  mkdir -p "$W148/rep$i"
  fits "s128-$i" && serve_into "$W148/rep$i" s128 --max-num-seqs 128 --max-model-len 1280 --kv-capacity-tokens 60000 \
    --model qwen2.5-1.5b --runs "mixed@$(rate 120 110):500:702" --wide-host-probe
done
snap; echo "== total $(elapsed) s"
for f in "$W148"/rep*/*.log; do [ -e "$f" ] && { echo "----- $f"; grep -E "served in|Error|error|Traceback|refuse" "$f" | tail -3; }; done
