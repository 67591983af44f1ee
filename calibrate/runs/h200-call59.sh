#!/usr/bin/env bash
# Device call 59 (nvidia-h200, one GPU): a check after the fact of the decode attention's score cost by
# the softmax kernel a row's length runs (Calibration.attention_score_row_factors: a warp a row up to
# 2,048 positions, registers up to 9,216, shared memory past it; committed before it ran): nine held-out
# models at 1,920 + 32 (1,952 positions: the warp's kernel, just below the default grid's 2,112) and
# 12,288 + 32 (12,320: shared memory, between the default grid's 8,224 and 16,416), lengths none of them
# was measured at, batches 1-1,024 until out of memory, as `roofline calibrate --no-fit` measures them.
set -u
source calibrate/runs/common.sh
W59="$W/call59"; mkdir -p "$W59"
env_info > "$W59/env.txt" 2>&1
run_one() {  # run_one MODEL
  timeout 80 python3 -m calibrate.gpu_job --out "$W59/$1" --card h200 --engines graph --models "$1" \
    --prompts 1920,12288 --gen 32 --batches 1,2,4,8,16,32,64,128,256,512,1024 --no-ceilings --budget-s 66 \
    > "$W59/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for m in qwen2.5-0.5b llama-3.2-1b llama-3.2-3b qwen2.5-3b mistral-7b-v0.3 qwen3-8b internlm2.5-7b gemma-2-9b \
         qwen2.5-14b; do
  run_one "$m"
done
tail -n 4 "$W59"/*.log
