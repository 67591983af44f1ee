#!/usr/bin/env bash
# Device call 53 (nvidia-h200, one GPU): a check after the fact of pricing MoE decode by the grouped
# GEMM's tiles (roofline.step.tile_rows_table; committed before it ran): four mixtures of experts at
# two contexts none was measured at. Prompt 192 + gen 16 at batches whose routed rows per expert
# (batch x k / experts) fall across the tile regimes, none of these batches measured before: 64-160
# rows an expert (two and three small tiles, the switch to the large tile at 129). Prompt 768 + gen 16
# at batches 1-256, where the tiles change the price of every MoE step a little (the experts' bytes
# and their tiles now combine by max beside the dense matmuls).
set -u
source calibrate/runs/common.sh
W53="$W/call53"; mkdir -p "$W53"
env_info > "$W53/env.txt" 2>&1
run_one() {  # run_one NAME MODEL PROMPT BATCHES
  timeout 170 python3 -m calibrate.gpu_job --out "$W53/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches "$4" --no-ceilings --budget-s 150 > "$W53/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one qwen3-30b-a3b-192 qwen3-30b-a3b 192 1024,1280,1792,2560      # 64, 80, 112, 160 rows an expert
run_one mixtral-8x7b-192 mixtral-8x7b 192 320,448,640,1024            # 80, 112, 160, 256
run_one deepseek-v2-lite-192 deepseek-v2-lite 192 768,1280,2048       # 72, 120, 192
run_one gpt-oss-20b-192 gpt-oss-20b 192 512,1024,2048                 # 64, 128, 256
run_one qwen3-30b-a3b-768 qwen3-30b-a3b 768 1,4,16,64,256
run_one mixtral-8x7b-768 mixtral-8x7b 768 1,4,16,64,256
run_one deepseek-v2-lite-768 deepseek-v2-lite 768 1,4,16,64,256
run_one gpt-oss-20b-768 gpt-oss-20b 768 1,4,16,64,256
tail -n 3 "$W53"/*.log
