#!/usr/bin/env bash
# Device call 89 (nvidia-h200, one GPU): the first serving runs that carry the device probe
# (calibrate/serving_loop.device_probe: each capture size's decode step timed in the run's own
# process before its clock and after it). Does the probe foretell the speed the run's decode steps
# then ran at (the GPU / price column of `roofline compare-serving`, decode vs (probe)), and does
# `compare-serving --at-probed-speed` bring the tails that missed back within their bounds? Five
# streams that missed their TTFT p99 on earlier machines (calls 11, 12, 17, 85), served again, and
# two new held-out streams, none looked at before its replay. GPU clocks logged around each job.
# Not yet run: written and committed in session 24, when no device was lent.
set -u
source calibrate/runs/common.sh
W89="$W/call89"; mkdir -p "$W89"
env_info > "$W89/env.txt" 2>&1
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$W89/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >> "$W89/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$W89/clocks.txt"; clocks; serve_into "$W89" "$@"; clocks; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve q05 $P --model qwen2.5-0.5b --runs mixed@60:400:60
serve l1 $P --model llama-3.2-1b --runs mixed@65:400:302
serve l3 $P --model llama-3.2-3b --runs mixed@32:300:92
serve q7a $P --model qwen2.5-7b --runs mixed@22:250:54
serve q7b $P --model qwen2.5-7b --runs mixed@25:300:1
serve m7 $P --model mistral-7b-v0.3 --runs mixed@19:200:501
serve q3 $P --model qwen2.5-3b --runs mixed@38:300:502
echo "== total $(elapsed) s"
for f in "$W89"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -5; done
