#!/usr/bin/env bash
# Device call 32 (nvidia-h200, one GPU): a held-out check after the fact of the MoE prefill's grouped
# GEMM rate and MLA's decompressed prompt pairs (committed before this ran): mixtral-8x7b,
# gpt-oss-20b, deepseek-v2-lite and qwen3-30b-a3b at prompts 1,024 and 4,096 / 8,192 (contexts
# their rows never had), and two dense models at a context never measured (phi-3-mini-4k at 1,024,
# qwen2.5-14b at 2,048); gen 16, batches 1-256.
set -u
source calibrate/runs/common.sh
W32="$W/call32"; mkdir -p "$W32"
env_info > "$W32/env.txt" 2>&1
timeout 260 python3 -m calibrate.gpu_job --out "$W32/moe" --card h200 --engines graph \
  --models mixtral-8x7b,gpt-oss-20b,deepseek-v2-lite,qwen3-30b-a3b --prompts 1024,4096 --gen 16 \
  --batches 1,4,16,64,256 --no-ceilings --budget-s 230 > "$W32/moe.log" 2>&1
echo "== moe done at $(elapsed) s"; snap
timeout 150 python3 -m calibrate.gpu_job --out "$W32/dense" --card h200 --engines graph \
  --models phi-3-mini-4k --prompts 1024 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 60 > "$W32/dense-phi3.log" 2>&1
timeout 150 python3 -m calibrate.gpu_job --out "$W32/dense14" --card h200 --engines graph \
  --models qwen2.5-14b --prompts 2048 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 60 > "$W32/dense-14b.log" 2>&1
echo "== dense done at $(elapsed) s"; snap
tail -n 2 "$W32/moe.log" "$W32/dense-phi3.log" "$W32/dense-14b.log"
