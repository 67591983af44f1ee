#!/usr/bin/env bash
# Device call 56 (nvidia-h200, one GPU): more of call 54's check of large dense decode batches
# (committed before it ran, nothing in the model changed since call 54): the default grid's prompts
# 512 + 64 and 2,048 + 64 at batches 64-2,048 until out of memory, eight more catalog models none of
# which the dense terms were fitted on (MHA, 256-wide heads, q/k norms, a 32B model, a 0.5B one).
set -u
source calibrate/runs/common.sh
W56="$W/call56"; mkdir -p "$W56"
env_info > "$W56/env.txt" 2>&1
run_one() {  # run_one MODEL
  timeout 100 python3 -m calibrate.gpu_job --out "$W56/$1" --card h200 --engines graph --models "$1" \
    --prompts 512,2048 --gen 64 --batches 64,128,256,512,1024,2048 --no-ceilings --budget-s 85 > "$W56/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for m in qwen2.5-0.5b llama-2-7b olmo-2-7b gemma-2-9b gpt-j-6b pythia-6.9b llama-2-13b qwen3-32b; do
  run_one "$m"
done
tail -n 4 "$W56"/*.log
