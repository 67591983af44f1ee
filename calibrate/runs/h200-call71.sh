#!/usr/bin/env bash
# Device call 71 (nvidia-h200, one GPU): the grouped-mm probe (python3 -m calibrate.probes --what
# grouped-mm): torch._grouped_mm alone at generic shapes, 1-256 experts x 1-4,096 rows an expert x
# K 512-16,384 x N 1,024-32,768 (powers of two), and the spread series (the same rows among empty
# groups). The table a calibration prices its experts' matmuls from (roofline fit --grouped-mm-probe),
# measured at no catalog model's shape (docs/method.md section 4).
set -u
source calibrate/runs/common.sh
W71="$W/call71"; mkdir -p "$W71"
env_info > "$W71/env.txt" 2>&1
snap_loop & SNAP=$!
timeout 540 python3 -m calibrate.probes --out "$W71" --what grouped-mm --budget-s 500 > "$W71/grouped-mm.log" 2>&1
echo "== grouped-mm done at $(elapsed) s (rc $?)"
kill $SNAP 2>/dev/null; snap
tail -n 30 "$W71/grouped-mm.log"
