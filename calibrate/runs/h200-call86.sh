#!/usr/bin/env bash
# Device call 86 (nvidia-h200, one GPU): the serving loop's decode graph against the graph engine's
# at the same model, batch and cache length (calibrate/runs/loop_decode.py): the committed serving
# runs' decode steps ran 0.94-0.98x their price at buckets 1-2 and 1.01-1.04x at 24-32 on every model
# (benchmarks/serving_tail_sensitivity.py, roofline.serving_replay.pass_ratios), the price being the
# engine's step model plus one fitted time a layer. Seven served models at 1,280 cache rows, buckets
# 1-64, with kernel profiles of both steps at buckets 1 and 32 (qwen2.5-1.5b, qwen2.5-7b) and 16
# (qwen2.5-0.5b, llama-3.2-1b); then qwen2.5-1.5b and qwen2.5-7b at 2,048 rows.
set -u
source calibrate/runs/common.sh
W86="$W/call86"; mkdir -p "$W86"
env_info > "$W86/env.txt" 2>&1
timeout 360 python3 calibrate/runs/loop_decode.py "$W86/h200-probe-loop-decode-call86-1280.json" \
  qwen2.5-1.5b,qwen2.5-7b,qwen2.5-0.5b,llama-3.2-1b,qwen2.5-3b,llama-3.2-3b,mistral-7b-v0.3 --len 1280 \
  --profile qwen2.5-1.5b:1,qwen2.5-1.5b:32,qwen2.5-7b:1,qwen2.5-7b:32,qwen2.5-0.5b:16,llama-3.2-1b:16 \
  --budget-s 300 > "$W86/loop-decode-1280.log" 2>&1
echo "== 1280 done at $(elapsed) s"; snap
timeout 120 python3 calibrate/runs/loop_decode.py "$W86/h200-probe-loop-decode-call86-2048.json" \
  qwen2.5-1.5b,qwen2.5-7b --len 2048 --budget-s 90 > "$W86/loop-decode-2048.log" 2>&1
echo "== 2048 done at $(elapsed) s"; snap
tail -n 12 "$W86"/*.log
