#!/usr/bin/env bash
# Device call 60 (nvidia-h200, one GPU), two parts:
# 1. the `attention-lengths` probe: the graph engine's decode attention alone at the attention-contexts
#    probe's four generic shapes, batches 1-256, at 59 cache lengths between that probe's (1,536-2,048
#    every 32, 2,048-4,096 every 128, 4,096-16,384 every 512): the evidence for the windows of cache
#    lengths that probe jumped over (call 59: every model's step slower at 1,952 positions);
# 2. a check, measured before any term reads part 1 and not looked at until the terms from part 1 are
#    committed: five held-out models at 1,760 + 32 and 10,600 + 24 (1,792 and 10,624 positions, lengths
#    no run measured), batches 1-1,024 until out of memory, as `roofline calibrate --no-fit` measures them.
set -u
source calibrate/runs/common.sh
W60="$W/call60"; mkdir -p "$W60"
env_info > "$W60/env.txt" 2>&1
timeout 250 python3 -m calibrate.probes --out "$W60/probes" --what attention-lengths --budget-s 230 \
  > "$W60/probe-attention-lengths.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W60/probe-attention-lengths.log"
run_one() {  # run_one MODEL
  timeout 70 python3 -m calibrate.gpu_job --out "$W60/$1" --card h200 --engines graph --models "$1" \
    --prompts 1760,10600 --gen 32,24 --batches 1,2,4,8,16,32,64,128,256,512,1024 --no-ceilings --budget-s 58 \
    > "$W60/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for m in qwen2.5-0.5b llama-3.2-3b qwen2.5-3b mistral-7b-v0.3 qwen3-8b; do
  run_one "$m"
done
tail -n 4 "$W60"/*.log
