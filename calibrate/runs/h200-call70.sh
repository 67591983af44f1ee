#!/usr/bin/env bash
# Device call 70 (nvidia-h200, one GPU): torch._grouped_mm at widths around gpt-oss's 2,880
# (calibrate/runs/grouped_mm_widths.py): whether a K or N that is not a multiple of the small-tile
# path's 128 costs more than its padding, the one generic reason found for gpt-oss's expert matmuls
# running slower than the other shapes' (docs/method.md section 13, "MoE decode at one to four
# tokens"). Not used to set any term.
set -u
source calibrate/runs/common.sh
W70="$W/call70"; mkdir -p "$W70"
env_info > "$W70/env.txt" 2>&1
timeout 200 python3 calibrate/runs/grouped_mm_widths.py "$W70/h200-probe-grouped-mm-widths.json" 170 \
  > "$W70/grouped-mm-widths.log" 2>&1
echo "== widths done at $(elapsed) s"; snap
tail -n 100 "$W70/grouped-mm-widths.log"
