#!/usr/bin/env bash
# Device call 62 (nvidia-h200, one GPU): a check of the decode attention's ramp term
# (Calibration.attention_ramp_s, written from the attention probes before this call), measured as
# `roofline calibrate --no-fit` measures and not used to set any term:
# A. four small held-out models at 256 + 128 (384 positions, a length no run measured), the steps
#    most fixed overhead, batches 1-1,024;
# B. six held-out models at 2,560 + 64 and 6,000 + 40 (2,624 and 6,040 positions, lengths no run
#    measured), batches 1-1,024 until out of memory: two MHA models (llama-2-7b, olmo-2-7b), q/k
#    norms (qwen3-8b), windowed layers (gemma-3-4b), and two GQA models (internlm2.5-7b, qwen2.5-14b).
set -u
source calibrate/runs/common.sh
W62="$W/call62"; mkdir -p "$W62"
env_info > "$W62/env.txt" 2>&1
run_one() {  # run_one MODEL PROMPTS GENS BUDGET_S
  timeout $(( $4 + 12 )) python3 -m calibrate.gpu_job --out "$W62/$1" --card h200 --engines graph --models "$1" \
    --prompts "$2" --gen "$3" --batches 1,2,4,8,16,32,64,128,256,512,1024 --no-ceilings --budget-s "$4" \
    > "$W62/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for m in qwen2.5-0.5b llama-3.2-1b qwen2.5-3b llama-3.2-3b; do
  run_one "$m" 256 128 38
done
for m in llama-2-7b olmo-2-7b qwen3-8b gemma-3-4b internlm2.5-7b qwen2.5-14b; do
  run_one "$m" 2560,6000 64,40 52
done
tail -n 3 "$W62"/*.log
