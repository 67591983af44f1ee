#!/usr/bin/env bash
# Device call 72 (nvidia-h200, one GPU): the grouped-mm probe (python3 -m calibrate.probes --what
# grouped-mm): torch._grouped_mm alone at generic shapes, 1-256 experts x 1-4,096 rows an expert
# (routed at random from 16) x K 512-16,384 x N 1,024-32,768 on the 1.5x ladder, and the spread
# series (one row each among empty groups). Call 71 ran the powers of two alone, every group exactly
# its rows: at K = N = 2,880 (device call 70) they read 4-11% fast, and exact rows from 64 on miss the
# spread of a router's counts. The table a calibration prices its experts' matmuls from
# (roofline fit --grouped-mm-probe), measured at no catalog model's shape (docs/method.md section 4).
set -u
source calibrate/runs/common.sh
W72="$W/call72"; mkdir -p "$W72"
env_info > "$W72/env.txt" 2>&1
snap_loop & SNAP=$!
timeout 560 python3 -m calibrate.probes --out "$W72" --what grouped-mm --budget-s 480 > "$W72/grouped-mm.log" 2>&1
echo "== grouped-mm done at $(elapsed) s (rc $?)"
kill $SNAP 2>/dev/null; snap
tail -n 30 "$W72/grouped-mm.log"
