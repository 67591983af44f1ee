#!/usr/bin/env bash
# Device call 52 (nvidia-h200, one GPU): a check after the fact of the grouped GEMM's tile regimes in
# decode (committed before it ran): four mixtures of experts at prompt 256 + gen 16 (a context none was
# measured at), at batches whose routed rows per expert (batch x k / experts) fall in each regime: up to
# 64 (one small tile), 65-128 (two), above 128 (the large tile). The rule failed this check
# (mixtral-8x7b at batch 384, 96 rows an expert: +41%) and was reverted; the rows stay as a held-out
# check of large-batch MoE decode (docs/calibration.md, the MoE section).
set -u
source calibrate/runs/common.sh
W52="$W/call52"; mkdir -p "$W52"
env_info > "$W52/env.txt" 2>&1
run_one() {  # run_one MODEL BATCHES
  timeout 140 python3 -m calibrate.gpu_job --out "$W52/$1" --card h200 --engines graph --models "$1" \
    --prompts 256 --gen 16 --batches "$2" --no-ceilings --budget-s 120 > "$W52/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one qwen3-30b-a3b 512,768,1536,2048,3072      # 32, 48, 96, 128, 192 rows an expert
run_one deepseek-v2-lite 512,1024,1536            # 48, 96, 144
run_one mixtral-8x7b 128,256,384,768              # 32, 64, 96, 192
run_one gpt-oss-20b 256,768,1536                  # 32, 96, 192
tail -n 3 "$W52"/*.log
