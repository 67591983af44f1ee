#!/usr/bin/env bash
# Device call 50 (nvidia-h200, one GPU): a check after the fact of the load curve (committed before it
# ran): five dense models at prompt lengths none was measured at, their prefills from ms to seconds:
# qwen2.5-32b at 4,096 and 8,192; internlm2.5-7b at 2,048 and 8,192; llama-2-13b and gemma-3-12b at
# 6,144; gpt-j-6b at 2,048; gen 16, batches 1-256 until out of memory.
set -u
source calibrate/runs/common.sh
W50="$W/call50"; mkdir -p "$W50"
env_info > "$W50/env.txt" 2>&1
run_one() {  # run_one NAME MODEL PROMPTS
  timeout 150 python3 -m calibrate.gpu_job --out "$W50/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 130 > "$W50/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one q32 qwen2.5-32b 4096,8192
run_one internlm internlm2.5-7b 2048,8192
run_one llama13 llama-2-13b 6144
run_one gemma12 gemma-3-12b 6144
run_one gptj gpt-j-6b 2048
tail -n 2 "$W50"/*.log
