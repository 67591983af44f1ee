#!/usr/bin/env bash
# Device call 17 (nvidia-h200, one GPU):
#   1. the graph engine at prompt 128 / gen 128 on models the calibration was not fitted on
#      (qwen2.5-0.5b, qwen2.5-3b, llama-3.2-1b) and two fitted ones as the day's control, after the
#      refit with the layers probe: machine-to-machine spread of the 128/128 figures;
#   2. the layers probe again (its repeatability on another machine);
#   3. held-out serving runs on new seeds, the host probed before AND after each run's clock
#      (host_probe_after), prefill-first and chunked.
set -u
source calibrate/runs/common.sh
W17="$W/call17"; mkdir -p "$W17"
env_info > "$W17/env.txt" 2>&1
timeout 120 python3 -m calibrate.gpu_job --out "$W17/dense128" --card h200 --engines graph \
  --models qwen2.5-0.5b,qwen2.5-3b,llama-3.2-1b,qwen2.5-1.5b,qwen2.5-7b --prompt 128 --gen 128 \
  --budget-s 105 > "$W17/dense128.log" 2>&1
echo "== dense 128/128 done at $(elapsed) s"; snap
timeout 90 python3 -m calibrate.probes --out "$W17/probes" --what layers --budget-s 70 > "$W17/probe-layers.log" 2>&1
echo "== layers probe done at $(elapsed) s"; snap
serve() { serve_into "$W17" "$@"; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve q15 $P --model qwen2.5-1.5b --runs mixed@50:300:90
serve q7 $P --model qwen2.5-7b --runs mixed@22:250:91
serve l3 $P --model llama-3.2-3b --runs mixed@32:300:92
serve q05 $P --model qwen2.5-0.5b --runs mixed@55:400:93
serve m7 $P --model mistral-7b-v0.3 --runs mixed@18:200:94
serve q3c $P --policy chunked --max-num-batched-tokens 512 --model qwen2.5-3b --runs mixed@30:300:95
serve q15c $P --policy chunked --max-num-batched-tokens 256 --model qwen2.5-1.5b --runs mixed@40:300:96
echo "== total $(elapsed) s"
for f in "$W17"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -5; done
