#!/usr/bin/env bash
# Device call 76 (nvidia-h200, one GPU): PyTorch's small-index gather and scatter kernels measured
# alone at generic shapes (the new `index` probe: calibrate/index_probe.py), the evidence for a
# term that prices an MoE decode step of at most 16 routed rows; and, measured in the same call
# but not looked at until that term is written and committed, held-out rows to check it: three MoE
# models at three prompts no run has measured (640, 2,560, 10,240 + 16), at the batches where a
# step routes 2-64 rows (gpt-oss-20b k=4, mixtral-8x7b k=2, deepseek-v2-lite k=6), qwen3-30b-a3b
# (the MoE fit model: evidence only, not fitted on) likewise, and the kernels probe on
# deepseek-v2-lite and mixtral-8x7b cut to 2 and 6 layers at batches around 16 routed rows.
set -u
source calibrate/runs/common.sh
W76="$W/call76"; mkdir -p "$W76"
env_info > "$W76/env.txt" 2>&1
snap_loop & SNAP=$!
timeout 190 python3 -m calibrate.probes --out "$W76/index" --what index --budget-s 170 > "$W76/index.log" 2>&1
echo "== index done at $(elapsed) s"; snap
run_one() {  # run_one NAME MODEL PROMPTS BATCHES TIMEOUT
  timeout "$5" python3 -m calibrate.gpu_job --out "$W76/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches "$4" --no-ceilings --budget-s $(( $5 - 20 )) > "$W76/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one gpt-oss-20b gpt-oss-20b 640,2560,10240 1,2,3,4,5,6,8,16 90
run_one mixtral-8x7b mixtral-8x7b 640,2560,10240 1,2,4,6,8,10,12,16 90
run_one deepseek-v2-lite deepseek-v2-lite 640,2560,10240 1,2,3,4,8,16 70
run_one qwen3-30b-a3b qwen3-30b-a3b 640,2560 1,2,3,4,8 60
P=""
for m in deepseek-v2-lite mixtral-8x7b; do for l in 2 6; do
  for b in 1 2 4 8; do P="$P,$m:$l:$b:520"; done; done; done
timeout 80 python3 -m calibrate.probes --out "$W76/kernels" --what kernels --kernels-points "${P#,}" --budget-s 65 \
  > "$W76/kernels.log" 2>&1
echo "== kernels done at $(elapsed) s"; kill $SNAP; snap
tail -n 4 "$W76"/*.log
