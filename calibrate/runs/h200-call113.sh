#!/usr/bin/env bash
# Device call 113 (the thirty-fourth session, the last ~450 s of device time). On an H200:
# calibrate/runs/h200-call112.sh, which runs its H200 part there (the kv-repeat probe and the kernel
# walk on the acceptance card, llama-2-7b's stream call 111's H100 could not hold; into $W/call112),
# then the H200 table's slow points re-timed. On an H100: its gemm
# table's 40 slowest-for-their-size points re-timed (calibrate/runs/gemm_recheck.py): the table's
# or the card's?
set -u
source calibrate/runs/common.sh
W113="$W/call113"; mkdir -p "$W113"
env_info > "$W113/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W113/env.txt"
if [ "$CARD" = h200 ]; then
  bash calibrate/runs/h200-call112.sh  # its H200 part, into $W/call112
  timeout 60 python3 calibrate/runs/gemm_recheck.py "$W113/gemm-recheck.json" 24 > "$W113/gemm-recheck.log" 2>&1
else
  timeout 150 python3 calibrate/runs/gemm_recheck.py "$W113/gemm-recheck.json" 40 > "$W113/gemm-recheck.log" 2>&1
fi
grep -v Warning "$W113/gemm-recheck.log" | tail -40; snap
echo "== total $(elapsed) s"
