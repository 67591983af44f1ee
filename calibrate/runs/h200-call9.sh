#!/usr/bin/env bash
# Device call 9 (nvidia-h200, one GPU): held-out serving runs after the loop's prefill price moved
# to the card's matmul table (call 8) and a finishing sequence got its own host cost: two models
# the loop never served (llama-3.2-3b: hidden 3,072, 8 KV heads; llama-3.2-1b: 16 layers of
# 64-wide heads), and qwen2.5-1.5b / qwen2.5-7b on new seeds and rates.
set -u
source calibrate/runs/common.sh
W9="$W/call9"; mkdir -p "$W9"
env_info > "$W9/env.txt" 2>&1
snap_loop & LOOP=$!
timeout 130 python3 -m calibrate.serving_job --out "$W9/serve" --card h200 --model llama-3.2-3b \
  --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@30:300:31,long-gen@12:200:32 --budget-s 110 > "$W9/serve-l3b.log" 2>&1
echo "== llama-3.2-3b done at $(elapsed) s"; snap
timeout 130 python3 -m calibrate.serving_job --out "$W9/serve" --card h200 --model llama-3.2-1b \
  --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@50:400:33,short@60:400:34 --budget-s 110 > "$W9/serve-l1b.log" 2>&1
echo "== llama-3.2-1b done at $(elapsed) s"; snap
timeout 130 python3 -m calibrate.serving_job --out "$W9/serve" --card h200 --model qwen2.5-1.5b \
  --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@45:300:35,long-prompt@15:200:36 --budget-s 110 > "$W9/serve15.log" 2>&1
echo "== qwen2.5-1.5b done at $(elapsed) s"; snap
timeout 110 python3 -m calibrate.serving_job --out "$W9/serve" --card h200 --model qwen2.5-7b \
  --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@18:200:37 --budget-s 90 > "$W9/serve7.log" 2>&1
echo "== qwen2.5-7b done at $(elapsed) s"
kill $LOOP; snap
echo "== total $(elapsed) s"
for f in "$W9"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in" "$f" | tail -12; done
