#!/usr/bin/env bash
# Device call 25 (nvidia-h200, one GPU): a held-out check of this session's changes on points no
# fit, probe or earlier check saw: windowed and sinks models at prompts 2,048 and 8,192 (gemma-2-9b,
# gemma-3-4b, phi-3-mini-4k, mistral-7b-v0.1, gpt-oss-20b), a plain-MLP model (falcon-7b) and a
# qk-norm one (qwen3-8b); gen 16, batches 1-256. Written after the model it checks was committed.
set -u
source calibrate/runs/common.sh
W25="$W/call25"; mkdir -p "$W25"
env_info > "$W25/env.txt" 2>&1
timeout 300 python3 -m calibrate.gpu_job --out "$W25/check" --card h200 --engines graph \
  --models gemma-2-9b,gemma-3-4b,phi-3-mini-4k,mistral-7b-v0.1,gpt-oss-20b,falcon-7b,qwen3-8b \
  --prompts 2048,8192 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 260 > "$W25/check.log" 2>&1
echo "== check done at $(elapsed) s"; snap
tail -3 "$W25/check.log"
