#!/usr/bin/env bash
# Device call 87 (nvidia-h200, one GPU): what the serving runs' decode steps pay that call 86's
# back-to-back replay of the same graph does not (calibrate/runs/loop_decode_variants.py): the loop's
# decode graph at 1,280 cache rows, buckets 1, 4, 16, 32, replayed with every slot at one position
# and a zero cache (call 86's way), with its own position per slot, with a random cache, with both,
# and one step at a time as the server runs it (inputs staged from the host, the token sync, 100 us
# of host time between steps) -- qwen2.5-1.5b and -7b (no extra in call 86), qwen2.5-3b and
# llama-3.2-1b (an extra of 4-7 us a layer there).
set -u
source calibrate/runs/common.sh
W87="$W/call87"; mkdir -p "$W87"
env_info > "$W87/env.txt" 2>&1
timeout 300 python3 calibrate/runs/loop_decode_variants.py "$W87/h200-probe-loop-decode-variants-call87.json" \
  qwen2.5-1.5b,qwen2.5-7b,qwen2.5-3b,llama-3.2-1b --len 1280 > "$W87/variants.log" 2>&1
echo "== variants done at $(elapsed) s"; snap
tail -n 8 "$W87"/*.log
