#!/usr/bin/env bash
# Device call 65 (nvidia-h200, one GPU): issue 9's held-out check after the attention-kernel table
# (Calibration.attention_kernel_table, from call 64's attention-table probe) was committed and shipped:
# models of the table's shapes at cache lengths no run had measured (832, 1,472, 3,072 positions and
# more), batches 1-2,048 until out of memory, as `roofline calibrate --no-fit` measures them.
set -u
source calibrate/runs/common.sh
W65="$W/call65"; mkdir -p "$W65"
env_info > "$W65/env.txt" 2>&1
run() {  # MODEL PROMPTS GENS
  timeout 75 python3 -m calibrate.gpu_job --out "$W65/$1" --card h200 --engines graph --models "$1" \
    --prompts "$2" --gen "$3" --batches 1,4,16,64,128,256,512,1024,2048 --no-ceilings --budget-s 62 \
    > "$W65/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run llama-3.2-1b 800,1400 32,72
run qwen2.5-0.5b 800,3000 32,72
run falcon-7b 1200 64
run phi-3-mini-4k 3000 72
run mistral-7b-v0.3 1400 72
run gemma-3-4b 1400 72
tail -n 2 "$W65"/*.log
