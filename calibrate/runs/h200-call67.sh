#!/usr/bin/env bash
# Device call 67 (nvidia-h200, one GPU): issue 9's held-out check of the kernel table bounded at a
# slower kernel's window at every group of its head width (8b6db57): the 64-wide models of more
# than 8 query heads a KV head (falcon-7b's 71, falcon-40b's 16) at contexts that cross the windows'
# lengths (632-640 and 1,024-1,088 positions), batches 1-2,048 until out of memory, as
# `roofline calibrate --no-fit` measures them. Not used to set any term.
set -u
source calibrate/runs/common.sh
W67="$W/call67"; mkdir -p "$W67"
env_info > "$W67/env.txt" 2>&1
run() {  # MODEL PROMPTS GENS
  timeout 100 python3 -m calibrate.gpu_job --out "$W67/$1" --card h200 --engines graph --models "$1" \
    --prompts "$2" --gen "$3" --batches 1,4,16,64,128,256,512,1024,2048 --no-ceilings --budget-s 85 \
    > "$W67/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run falcon-7b 610,1010 40,48
run falcon-40b 600,1020 48,40
tail -n 2 "$W67"/*.log
