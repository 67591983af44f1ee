#!/usr/bin/env bash
# Device call 2 (nvidia-h200-x2): tensor parallelism over both GPUs (issue 12): the collectives
# probe, a TP2-vs-one-process check, TP2 decode sweeps; then the continuous-batching server loop
# (issue 14), qwen2.5-1.5b on GPU 0 and qwen2.5-7b on GPU 1 side by side.
set -u
source calibrate/runs/common.sh
env_info > "$W/env2.txt" 2>&1
snap_loop & SNAP=$!
timeout 330 python3 -m calibrate.tp_job --tp 2 --out "$W/tp" --card h200 --probe --check \
  --models llama-3.1-8b,qwen2.5-32b,llama-3.1-70b,qwen2.5-14b --prompts 128,2048 \
  --batches 1,2,4,8,16,32,64,128,256,512,1024 --gen 32 --no-warm-prefill --budget-s 290 --timeout-s 320 \
  > "$W/tp.log" 2>&1
echo "== TP done at $(elapsed) s"; tail -5 "$W/tp.log"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 170 python3 -m calibrate.serving_job --out "$W/serve15" --card h200 --model qwen2.5-1.5b \
    --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
    --runs mixed@10:300:1,mixed@40:400:1,mixed@80:400:1,mixed@0:400:1,long-gen@15:300:2,short@60:400:3 --budget-s 150
) > "$W/serve15.log" 2>&1 &
S0=$!
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 170 python3 -m calibrate.serving_job --out "$W/serve7" --card h200 --model qwen2.5-7b \
    --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
    --runs mixed@25:300:1,mixed@0:300:1,long-gen@6:200:2,long-prompt@8:200:4 --budget-s 150
) > "$W/serve7.log" 2>&1 &
S1=$!
wait $S0 $S1
kill $SNAP 2>/dev/null
snap
echo "== total $(elapsed) s"
for f in "$W/tp.log" "$W/serve15.log" "$W/serve7.log"; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|oom|preempt" "$f" | tail -20; done
