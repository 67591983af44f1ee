#!/usr/bin/env bash
# Device call 11 (nvidia-h200, one GPU): fresh held-out serving runs with the host probe, on
# streams, seeds and rates the loop's terms never saw: qwen2.5-0.5b and mistral-7b-v0.3 (never
# served), the five served models at new rates; two runs of policy chunked (its offset chunks run
# eagerly: how far the graph-priced simulation is from them, for the record).
set -u
source calibrate/runs/common.sh
W11="$W/call11"; mkdir -p "$W11"
env_info > "$W11/env.txt" 2>&1
snap_loop & LOOP=$!
serve() { serve_into "$W11" "$@"; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve q15 --model qwen2.5-1.5b $P --runs mixed@55:300:51,long-gen@20:300:52,short@90:400:53
serve q7 --model qwen2.5-7b $P --runs mixed@22:250:54,short@35:300:55
serve q3 --model qwen2.5-3b $P --runs long-gen@14:200:56
serve l3 --model llama-3.2-3b $P --runs short@50:300:57
serve l1 --model llama-3.2-1b $P --runs long-gen@25:300:58
serve q05 --model qwen2.5-0.5b $P --runs mixed@60:400:60
serve m7 --model mistral-7b-v0.3 $P --runs mixed@20:200:61
serve q15c --model qwen2.5-1.5b $P --max-num-batched-tokens 512 --policy chunked --runs mixed@30:300:59,mixed@45:300:62
kill $LOOP; snap
echo "== total $(elapsed) s"
for f in "$W11"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in" "$f" | tail -12; done
