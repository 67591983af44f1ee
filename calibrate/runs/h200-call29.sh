#!/usr/bin/env bash
# Device call 29 (nvidia-h200, one GPU): a held-out check of the prefill's elementwise kinds on points
# no fit, probe or earlier check saw, written after the model it checks was committed: dense models
# of every elementwise kind (olmo-2-7b: MHA, whole-projection q/k norms; qwen3-32b: per-head norms;
# llama-2-7b: MHA; gemma-3-12b: windows, q/k norms; qwen2.5-0.5b and llama-3.2-1b: small) at prompts
# 2,048 and 8,192; then MoE models at prompts 512 and 4,096 (qwen3-30b-a3b: wide queries, q/k norms;
# deepseek-v2-lite: MLA). gen 16, batches 1-256.
set -u
source calibrate/runs/common.sh
W29="$W/call29"; mkdir -p "$W29"
env_info > "$W29/env.txt" 2>&1
timeout 300 python3 -m calibrate.gpu_job --out "$W29/dense" --card h200 --engines graph \
  --models olmo-2-7b,qwen3-32b,llama-2-7b,gemma-3-12b,qwen2.5-0.5b,llama-3.2-1b \
  --prompts 2048,8192 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 270 > "$W29/dense.log" 2>&1
echo "== dense done at $(elapsed) s"; snap
timeout 250 python3 -m calibrate.gpu_job --out "$W29/moe" --card h200 --engines graph \
  --models qwen3-30b-a3b,deepseek-v2-lite --prompts 512,4096 --gen 16 --batches 1,4,16,64,256 \
  --no-ceilings --budget-s 220 > "$W29/moe.log" 2>&1
echo "== moe done at $(elapsed) s"; snap
tail -n 3 "$W29/dense.log" "$W29/moe.log"
