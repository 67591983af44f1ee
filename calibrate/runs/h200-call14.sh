#!/usr/bin/env bash
# Device call 14 (nvidia-h200, one GPU): policy chunked with the loop's chunk graphs (a prefill
# whose first chunk continues after cached tokens replays a graph, as whole prompts do; before,
# those ran eagerly). Held-out chunked runs on six models at several budgets and rates, and call
# 11's two chunked streams again (eager then, graphs now); the fit stream of qwen2.5-1.5b under
# prefill-first as the machine's control.
set -u
source calibrate/runs/common.sh
W14="$W/call14"; mkdir -p "$W14"
env_info > "$W14/env.txt" 2>&1
serve() { serve_into "$W14" "$@"; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
C="--policy chunked"
serve q15c $P $C --model qwen2.5-1.5b --max-num-batched-tokens 512 --runs mixed@30:300:59,mixed@45:300:62,mixed@50:300:70
serve q15 $P --model qwen2.5-1.5b --runs mixed@40:400:1
serve q7c $P $C --model qwen2.5-7b --max-num-batched-tokens 512 --runs mixed@20:250:71,short@30:300:72
serve q3c $P $C --model qwen2.5-3b --max-num-batched-tokens 1024 --runs mixed@28:300:74
serve l1c $P $C --model llama-3.2-1b --max-num-batched-tokens 256 --runs mixed@40:300:75
serve m7c $P $C --model mistral-7b-v0.3 --max-num-batched-tokens 512 --runs mixed@18:200:76
serve q05c $P $C --model qwen2.5-0.5b --max-num-batched-tokens 512 --runs mixed@55:400:77
echo "== total $(elapsed) s"
for f in "$W14"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in|chunk graphs" "$f" | tail -12; done
