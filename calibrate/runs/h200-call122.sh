#!/usr/bin/env bash
# Device call 122 (the thirty-fifth session's last device time, ~540 s). On an H200 only: calibrate/
# runs/h200-call120.sh's H200 part (the q/k-norm probe on qwen3-8b, the kernel walk on four layouts,
# the kv-repeat probe, the H200 gemm table's slow points re-timed; into $W/call120): does the
# acceptance card show the launches and the q/k norms the H100s priced? On any other card it stops
# at once (the H100 work is done: calls 117-121).
set -u
source calibrate/runs/common.sh
W122="$W/call122"; mkdir -p "$W122"
env_info > "$W122/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W122/env.txt"
if [ "$CARD" = h200 ]; then
  bash calibrate/runs/h200-call120.sh  # its H200 part, into $W/call120
fi
snap; echo "== total $(elapsed) s"
