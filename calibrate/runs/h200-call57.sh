#!/usr/bin/env bash
# Device call 57 (nvidia-h200, one GPU): a check after the fact of the graph engine's two decode logits
# buffers (committed before it ran; roofline.memory, the engine fact decode_logits_buffers) and more of
# calls 54 and 56's large dense decode batches: five catalog models not measured at these contexts
# (gemma-3-12b's 262k-token vocabulary, gpt-neox-20b's 64 MHA heads), prompts 512 + 64 and 2,048 + 64,
# batches 64-2,048 until out of memory (from batch 256 no prefill is timed: the end of the decode is the
# memory peak).
set -u
source calibrate/runs/common.sh
W57="$W/call57"; mkdir -p "$W57"
env_info > "$W57/env.txt" 2>&1
run_one() {  # run_one MODEL
  timeout 110 python3 -m calibrate.gpu_job --out "$W57/$1" --card h200 --engines graph --models "$1" \
    --prompts 512,2048 --gen 64 --batches 64,128,256,512,1024,2048 --no-ceilings --budget-s 95 > "$W57/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for m in gemma-3-12b mistral-7b-v0.1 gpt-neox-20b qwen2.5-32b falcon-40b; do
  run_one "$m"
done
tail -n 4 "$W57"/*.log
