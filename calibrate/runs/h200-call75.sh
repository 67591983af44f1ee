#!/usr/bin/env bash
# Device call 75 (nvidia-h200, one GPU): evidence for gpt-oss-20b's batch 4, priced 7-11% fast at
# every length after call 74 (worse than batch 1). The kernels probe on gpt-oss-20b and qwen3-30b-a3b
# cut to 2 and 6 layers at batches 2, 4 and 8, a 520-position cache (4 also at 4,104); then
# gpt-oss-20b's whole step at prompt 1,024 + 16 over batches 1-16 (2, 3, 6, 8, 12 not measured
# before). Evidence only: nothing is fitted on it.
set -u
source calibrate/runs/common.sh
W75="$W/call75"; mkdir -p "$W75"
env_info > "$W75/env.txt" 2>&1
P=""
for m in gpt-oss-20b qwen3-30b-a3b; do for l in 2 6; do
  for bc in 2:520 4:520 8:520 4:4104; do P="$P,$m:$l:$bc"; done; done; done
timeout 100 python3 -m calibrate.probes --out "$W75/kernels" --what kernels --kernels-points "${P#,}" --budget-s 85 \
  > "$W75/kernels.log" 2>&1
echo "== kernels done at $(elapsed) s"; snap
timeout 120 python3 -m calibrate.gpu_job --out "$W75/gpt-oss-20b" --card h200 --engines graph --models gpt-oss-20b \
  --prompts 1024 --gen 16 --batches 1,2,3,4,6,8,12,16 --no-ceilings --budget-s 100 > "$W75/gpt-oss-20b.log" 2>&1
echo "== gpt-oss-20b done at $(elapsed) s"; snap
tail -n 12 "$W75"/*.log
