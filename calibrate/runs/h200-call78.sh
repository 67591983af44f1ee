#!/usr/bin/env bash
# Device call 78 (nvidia-h200, one GPU): whether a dense matmul whose K or N is an odd multiple of 64
# runs slower at decode's few rows than its bytes say (calibrate/runs/linear_alignment.py, generic widths
# around 2,048-6,144, with and without a bias), the one generic reason left for gpt-oss-20b's batch 1
# (priced 7-9% fast: its attention GEMMs, K or N = 2,880, run 27 us a layer against about 15 priced);
# and the kernels probe on falcon-7b (hidden 4,544 = 71 x 64) beside mistral-7b-v0.3 (4,096), each cut
# to 2 and 6 layers at batch 1. Evidence first: no term is set from it in this script.
set -u
source calibrate/runs/common.sh
W78="$W/call78"; mkdir -p "$W78"
env_info > "$W78/env.txt" 2>&1
timeout 150 python3 calibrate/runs/linear_alignment.py "$W78/h200-probe-linear-alignment.json" 130 \
  > "$W78/linear-alignment.log" 2>&1
echo "== alignment done at $(elapsed) s"; snap
P=""
for m in falcon-7b mistral-7b-v0.3; do for l in 2 6; do for b in 1 4; do P="$P,$m:$l:$b:520"; done; done; done
timeout 80 python3 -m calibrate.probes --out "$W78/kernels" --what kernels --kernels-points "${P#,}" --budget-s 65 \
  > "$W78/kernels.log" 2>&1
echo "== kernels done at $(elapsed) s"; snap
tail -n 3 "$W78"/*.log
