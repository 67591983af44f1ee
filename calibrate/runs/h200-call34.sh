#!/usr/bin/env bash
# Device call 34 (nvidia-h200, one GPU): a last held-out check after the fact, on contexts never
# measured, of the changes the earlier checks had seen (gpt-oss's expert biases priced, MLA's prompt
# pairs decompressed): gpt-oss-20b and deepseek-v2-lite at prompts 6,144 and 16,384, mixtral-8x7b
# at 6,144; gen 16, batches 1-256.
set -u
source calibrate/runs/common.sh
W34="$W/call34"; mkdir -p "$W34"
env_info > "$W34/env.txt" 2>&1
timeout 250 python3 -m calibrate.gpu_job --out "$W34/moe" --card h200 --engines graph \
  --models gpt-oss-20b,deepseek-v2-lite --prompts 6144,16384 --gen 16 --batches 1,4,16,64,256 \
  --no-ceilings --budget-s 220 > "$W34/moe.log" 2>&1
echo "== moe done at $(elapsed) s"; snap
timeout 120 python3 -m calibrate.gpu_job --out "$W34/mixtral" --card h200 --engines graph \
  --models mixtral-8x7b --prompts 6144 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 100 \
  > "$W34/mixtral.log" 2>&1
echo "== mixtral done at $(elapsed) s"; snap
tail -n 3 "$W34/moe.log" "$W34/mixtral.log"
