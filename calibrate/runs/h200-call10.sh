#!/usr/bin/env bash
# Device call 10 (nvidia-h200, one GPU): the serving loop now measures its machine's host speed
# before each run (calibrate.serving_loop.host_probe, in the run's config): the two fit streams
# again (qwen2.5-1.5b mixed@40, qwen2.5-7b mixed@25, same seeds), the held-out streams whose
# replay missed a bound before (near saturation: 1.5B mixed@60/@80/@50, 7B long-gen@6, 1.5B
# long-prompt), and new ones on qwen2.5-3b, llama-3.2-1b and llama-3.2-3b.
set -u
source calibrate/runs/common.sh
W10="$W/call10"; mkdir -p "$W10"
env_info > "$W10/env.txt" 2>&1
snap_loop & LOOP=$!
serve() { serve_into "$W10" "$@"; }
serve q15 --model qwen2.5-1.5b --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@40:400:1,mixed@60:300:8,mixed@80:400:1,short@60:400:3
serve q15b --model qwen2.5-1.5b --max-num-seqs 32 --max-model-len 2048 --kv-capacity-tokens 20000 \
  --runs long-prompt@20:200:11,mixed@50:300:13
serve q7 --model qwen2.5-7b --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@25:300:1,long-gen@6:200:2,mixed@20:200:14
serve q3 --model qwen2.5-3b --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@40:300:43
serve l1 --model llama-3.2-1b --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@70:400:42
serve l3 --model llama-3.2-3b --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 \
  --runs mixed@35:300:41
kill $LOOP; snap
echo "== total $(elapsed) s"
for f in "$W10"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY|served in" "$f" | tail -12; done
