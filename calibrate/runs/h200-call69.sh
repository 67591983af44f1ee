#!/usr/bin/env bash
# Device call 69 (nvidia-h200, one GPU): issue 9's held-out check of the kernel table read from 1
# batched matrix up (device call 68's probe, factors read from a 10 us price): four models not fitted
# on, at cache lengths no run had measured (5,032 and 14,032 positions), one to 1,024 sequences until
# out of memory, as `roofline calibrate --no-fit` measures them: falcon-7b (one KV head: at one
# sequence cuBLAS runs another kernel, the table's 0.4-0.6), qwen2.5-3b (2 KV heads, 128-wide),
# mistral-7b-v0.3 (8 KV heads, 128-wide), llama-3.2-1b (8 KV heads, 64-wide). Not used to set any term.
set -u
source calibrate/runs/common.sh
W69="$W/call69"; mkdir -p "$W69"
env_info > "$W69/env.txt" 2>&1
run() {  # MODEL PROMPTS GENS
  timeout 95 python3 -m calibrate.gpu_job --out "$W69/$1" --card h200 --engines graph --models "$1" \
    --prompts "$2" --gen "$3" --batches 1,2,4,8,16,64,256,1024 --no-ceilings --budget-s 80 \
    > "$W69/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run falcon-7b 5000,14000 32,32
run qwen2.5-3b 5000,14000 32,32
run mistral-7b-v0.3 5000,14000 32,32
run llama-3.2-1b 5000,14000 32,32
tail -n 2 "$W69"/*.log
