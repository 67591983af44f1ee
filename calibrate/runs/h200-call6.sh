#!/usr/bin/env bash
# Device call 6 (nvidia-h200, one GPU): more held-out serving runs with the graph-prefill loop, on
# configurations and a model the loop's terms never saw: qwen2.5-1.5b with 32 slots, max_model_len
# 2,048 and a 20,000-token pool (a long-prompt stream among them); qwen2.5-7b on new seeds;
# qwen2.5-3b, never served before.
set -u
source calibrate/runs/common.sh
W6="$W/call6"; mkdir -p "$W6"
env_info > "$W6/env.txt" 2>&1
timeout 150 python3 -m calibrate.serving_job --out "$W6/serve" --card h200 --model qwen2.5-1.5b \
  --max-num-seqs 32 --max-model-len 2048 --kv-capacity-tokens 20000 \
  --runs long-prompt@20:200:11,mixed@30:300:12,mixed@50:300:13 --budget-s 130 > "$W6/serve15.log" 2>&1
echo "== 1.5b done at $(elapsed) s"; snap
timeout 150 python3 -m calibrate.serving_job --out "$W6/serve" --card h200 --model qwen2.5-7b \
  --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@20:200:14,short@25:300:15,long-gen@10:200:16 --budget-s 130 > "$W6/serve7.log" 2>&1
echo "== 7b done at $(elapsed) s"; snap
timeout 120 python3 -m calibrate.serving_job --out "$W6/serve" --card h200 --model qwen2.5-3b \
  --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@30:300:17,long-gen@10:200:18 --budget-s 100 > "$W6/serve3.log" 2>&1
echo "== 3b done at $(elapsed) s"; snap
echo "== total $(elapsed) s"
for f in "$W6"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in" "$f" | tail -12; done
