#!/usr/bin/env bash
# Device call 4 (nvidia-h200, one GPU, third session): nothing else runs on the machine while a
# server loop serves (calls 1-3 ran two processes side by side on the x2 host, with a results
# snapshot every 40 s).
#   1. the serving loop, one process at a time: three runs of call 2 repeated on their own
#      (qwen2.5-1.5b mixed@10 and long-gen@15, qwen2.5-7b long-gen@6), and new streams the
#      simulator's terms never saw (other seeds and rates);
#   2. the graph engine at prompt 128 / gen 128 with the current harness on models the
#      calibration was not fitted on (and qwen2.5-1.5b as a control against call 3's grid), and
#      llama-3.2-1b / llama-3.2-3b over prompts 512-16384.
set -u
source calibrate/runs/common.sh
W4="$W/call4"; mkdir -p "$W4"
env_info > "$W4/env.txt" 2>&1
SERVE="--card h200 --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
timeout 170 python3 -m calibrate.serving_job --out "$W4/serve" $SERVE --model qwen2.5-1.5b \
  --runs mixed@10:300:1,long-gen@15:300:2,mixed@20:300:5,long-gen@12:300:6,short@30:300:7,mixed@60:300:8 \
  --budget-s 150 > "$W4/serve15.log" 2>&1
echo "== 1.5b serving done at $(elapsed) s"; snap
timeout 130 python3 -m calibrate.serving_job --out "$W4/serve" $SERVE --model qwen2.5-7b \
  --runs long-gen@6:200:2,mixed@15:200:9,long-gen@8:200:10 --budget-s 110 > "$W4/serve7.log" 2>&1
echo "== 7b serving done at $(elapsed) s"; snap
timeout 110 python3 -m calibrate.gpu_job --out "$W4/dense128" --card h200 --engines graph \
  --models qwen2.5-0.5b,llama-3.2-1b,qwen2.5-3b,llama-3.2-3b,qwen2.5-1.5b --prompt 128 --gen 128 \
  --budget-s 95 > "$W4/dense128.log" 2>&1
echo "== dense 128/128 done at $(elapsed) s"; snap
timeout 80 python3 -m calibrate.gpu_job --out "$W4/dense-long" --card h200 --engines graph --no-ceilings \
  --models llama-3.2-1b,llama-3.2-3b --prompts 512,4096,16384 --gen 32 --batches 1,4,16,64,256,1024 \
  --budget-s 65 > "$W4/dense-long.log" 2>&1
echo "== dense long done at $(elapsed) s"; snap
echo "== total $(elapsed) s"
for f in "$W4"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|preempt|summary" "$f" | tail -12; done
