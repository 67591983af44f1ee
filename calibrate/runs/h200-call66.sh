#!/usr/bin/env bash
# Device call 66 (nvidia-h200, one GPU): issue 9's held-out check after a plain (GELU) MLP's
# intermediate was weighted in decode's elementwise traffic by the prefill-kernels probe's plain /
# gated element costs (roofline.step.plain_mlp_activation_weight): the catalog's plain-MLP models at
# contexts no run had measured, and two gated models beside them, batches 1-2,048 until out of
# memory, as `roofline calibrate --no-fit` measures them. Not used to set any term.
set -u
source calibrate/runs/common.sh
W66="$W/call66"; mkdir -p "$W66"
env_info > "$W66/env.txt" 2>&1
run() {  # MODEL PROMPTS GENS
  timeout 75 python3 -m calibrate.gpu_job --out "$W66/$1" --card h200 --engines graph --models "$1" \
    --prompts "$2" --gen "$3" --batches 1,4,16,64,128,256,512,1024,2048 --no-ceilings --budget-s 62 \
    > "$W66/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run falcon-7b 700,3000 48,64
run gpt-j-6b 1000,6000 48,32
run pythia-6.9b 700,3000 48,32
run gpt-neox-20b 1200 48
run falcon-40b 1000 32
run qwen2.5-14b 3000 48
run qwen2.5-32b 1000 48
tail -n 2 "$W66"/*.log
