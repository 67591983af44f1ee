#!/usr/bin/env bash
# Device call 51 (nvidia-h200, one GPU): a check after the fact on the mixtures of experts (the load
# curve and the refitted prefill efficiency committed before it ran): deepseek-v2-lite, mixtral-8x7b,
# gpt-oss-20b and qwen3-30b-a3b at prompts 1,536 and 12,288, lengths none was measured at; gen 16,
# batches 1-256 until out of memory.
set -u
source calibrate/runs/common.sh
W51="$W/call51"; mkdir -p "$W51"
env_info > "$W51/env.txt" 2>&1
for m in deepseek-v2-lite mixtral-8x7b gpt-oss-20b qwen3-30b-a3b; do
  timeout 130 python3 -m calibrate.gpu_job --out "$W51/$m" --card h200 --engines graph --models "$m" \
    --prompts 1536,12288 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 110 > "$W51/$m.log" 2>&1
  echo "== $m done at $(elapsed) s"; snap
done
tail -n 2 "$W51"/*.log
