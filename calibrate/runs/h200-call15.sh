#!/usr/bin/env bash
# Device call 15 (nvidia-h200, one GPU): the chunk probe (`python3 -m calibrate.probes --what
# chunk`: one layer of the loop's chunk-graph attention against its prefill-graph attention over
# buckets x chunk tokens x cached tokens, at the served models' head shapes), then six more
# held-out serving runs of policy chunked at other budgets and rates, measured before the chunk
# graph's price was settled and not looked at until it was.
set -u
source calibrate/runs/common.sh
W15="$W/call15"; mkdir -p "$W15"
env_info > "$W15/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W15/probes" --what chunk --budget-s 170 > "$W15/probe-chunk.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
serve() { serve_into "$W15" "$@"; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
C="--policy chunked"
serve q15c $P $C --model qwen2.5-1.5b --max-num-batched-tokens 1024 --runs mixed@50:300:80
serve q7c $P $C --model qwen2.5-7b --max-num-batched-tokens 256 --runs mixed@18:250:81
serve l3c $P $C --model llama-3.2-3b --max-num-batched-tokens 512 --runs mixed@30:300:82
serve q3c $P $C --model qwen2.5-3b --max-num-batched-tokens 512 --runs long-gen@14:200:83
serve m7c $P $C --model mistral-7b-v0.3 --max-num-batched-tokens 1024 --runs short@25:300:84
serve l1c $P $C --model llama-3.2-1b --max-num-batched-tokens 512 --runs mixed@45:300:85
echo "== total $(elapsed) s"
tail -3 "$W15/probe-chunk.log"
for f in "$W15"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|chunk graphs" "$f" | tail -6; done
