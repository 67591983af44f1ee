#!/usr/bin/env bash
# Device call 54 (nvidia-h200, one GPU): a held-out check of large decode batches on dense models
# (committed before it ran, the model as of the MoE tiles): the default grid's prompts 512 + 64 and
# 2,048 + 64 at batches 64-2,048 until out of memory, where the validation set had six points from
# batch 512 up. Ten catalog models none of which the dense terms were fitted on.
set -u
source calibrate/runs/common.sh
W54="$W/call54"; mkdir -p "$W54"
env_info > "$W54/env.txt" 2>&1
run_one() {  # run_one MODEL
  timeout 100 python3 -m calibrate.gpu_job --out "$W54/$1" --card h200 --engines graph --models "$1" \
    --prompts 512,2048 --gen 64 --batches 64,128,256,512,1024,2048 --no-ceilings --budget-s 85 > "$W54/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for m in llama-3.2-1b qwen2.5-3b llama-3.2-3b gemma-3-4b phi-3-mini-4k falcon-7b mistral-7b-v0.3 qwen3-8b \
         internlm2.5-7b qwen2.5-14b; do
  run_one "$m"
done
tail -n 4 "$W54"/*.log
