#!/usr/bin/env bash
# Device call 40 (nvidia-h200, one GPU): a held-out check of the decode-layer features (q/k norms,
# MLA, shared experts, gpt-oss's MoE layer: the layer-features probe's times, calls 37-39), on
# points no fit, probe or earlier check saw, run after the change was committed: the dense models
# with q/k norms (qwen3-8b, qwen3-32b, olmo-2-7b, gemma-3-4b, gemma-3-12b) at prompts 1,024 and
# 3,072, never measured; then deepseek-v2-lite (MLA, shared experts), gpt-oss-20b and mixtral-8x7b
# (neither) at prompt 3,072. gen 16, batches 1-256.
set -u
source calibrate/runs/common.sh
W40="$W/call40"; mkdir -p "$W40"
env_info > "$W40/env.txt" 2>&1
timeout 310 python3 -m calibrate.gpu_job --out "$W40/dense" --card h200 --engines graph \
  --models qwen3-8b,olmo-2-7b,gemma-3-4b,gemma-3-12b,qwen3-32b \
  --prompts 1024,3072 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 280 > "$W40/dense.log" 2>&1
echo "== dense done at $(elapsed) s"; snap
timeout 250 python3 -m calibrate.gpu_job --out "$W40/moe" --card h200 --engines graph \
  --models deepseek-v2-lite,gpt-oss-20b,mixtral-8x7b --prompts 3072 --gen 16 --batches 1,4,16,64,256 \
  --no-ceilings --budget-s 220 > "$W40/moe.log" 2>&1
echo "== moe done at $(elapsed) s"; snap
tail -n 3 "$W40/dense.log" "$W40/moe.log"
