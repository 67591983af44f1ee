#!/usr/bin/env bash
# Device call 83 (nvidia-h200, one GPU): where qwen2.5-0.5b's prefill at 3,000-token prompts goes.
# Call 82 measured its TTFT at 3,000 + 72, batch 16, at 0.186 and 0.184 s (call 65: 0.160), more than
# at 4,096 + 32 (0.166) with a third fewer tokens; the model prices 0.125. calibrate/runs/prefill_profile.py:
# each chunk's wall time (three warm runs after the measure's warm-up) and the kernels of one prefill,
# at 3,000 (batches 16, 10 and 6: the two chunks alone), 2,944, 3,072, 4,096, 2,048 and 1,920 (batch
# 16), and qwen2.5-1.5b (a fitted model) at 3,000 and 4,096. Evidence only.
set -u
source calibrate/runs/common.sh
W83="$W/call83"; mkdir -p "$W83"
env_info > "$W83/env.txt" 2>&1
timeout 200 python3 calibrate/runs/prefill_profile.py "$W83/h200-probe-prefill-profile-call83.json" \
  qwen2.5-0.5b:3000:16:3072 qwen2.5-0.5b:3000:10:3072 qwen2.5-0.5b:3000:6:3072 qwen2.5-0.5b:2944:16:3008 \
  qwen2.5-0.5b:3072:16:3136 qwen2.5-0.5b:4096:16:4128 qwen2.5-0.5b:2048:16:2064 qwen2.5-0.5b:1920:16:1952 \
  qwen2.5-1.5b:3000:16:3072 qwen2.5-1.5b:4096:16:4128 > "$W83/prefill-profile.log" 2>&1
echo "== profile done at $(elapsed) s"; snap
tail -n 12 "$W83"/*.log
