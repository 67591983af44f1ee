#!/usr/bin/env bash
# Device call 12 (nvidia-h200, one GPU): the host probe now repeats three times and keeps the
# median (call 11 saw 3 of 12 probes at 2.2-2.8x their machine's figure). No snapshot loop
# during the runs (results are archived after each model). The two fit streams again; call 11's
# prefill-first streams again; new streams on qwen2.5-0.5b, mistral-7b-v0.3, llama-3.2-3b.
set -u
source calibrate/runs/common.sh
W12="$W/call12"; mkdir -p "$W12"
env_info > "$W12/env.txt" 2>&1
serve() { serve_into "$W12" "$@"; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve q15 --model qwen2.5-1.5b $P --runs mixed@40:400:1,mixed@55:300:51,long-gen@20:300:52,short@90:400:53
serve q7 --model qwen2.5-7b $P --runs mixed@25:300:1,mixed@22:250:54,short@35:300:55
serve q05 --model qwen2.5-0.5b $P --runs mixed@60:400:60,short@100:400:63
serve m7 --model mistral-7b-v0.3 $P --runs mixed@20:200:61,long-gen@7:150:64
serve l3 --model llama-3.2-3b $P --runs short@50:300:57,mixed@28:300:65
serve q3 --model qwen2.5-3b $P --runs long-gen@14:200:56
echo "== total $(elapsed) s"
for f in "$W12"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in" "$f" | tail -12; done
