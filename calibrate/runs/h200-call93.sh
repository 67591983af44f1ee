#!/usr/bin/env bash
# Device call 93 (nvidia-h200 asked for; an H100 runs it the same way, recorded as h100-sxm): does
# the GPU's clock fall while the loop is overloaded? llama-3.1-8b's prefill graphs ran 1.02-1.05x
# their price at 150 req/s and 1.07-1.08x at 250 req/s (overloaded, 256 running) in calls 91-92
# (1.06x on the H100), whatever the pass's size, while the same model with 64 slots ran 0.98x; the
# matmul table and the device probe time short bursts. nvidia-smi samples the SM clock, power and
# the throttle reasons every 100 ms through each run (`clocks-NAME.csv`). The same two streams as
# call 91's l8a and l8b (held out, served again), each with its own sampler.
set -u
source calibrate/runs/common.sh
W93="$W/call93"; mkdir -p "$W93"
env_info > "$W93/env.txt" 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then export CARD=h200; else export CARD=h100-sxm; fi
sampled() {  # sampled NAME ARGS...: one serving job with the clock sampler running through it
  local name=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 100 > "$W93/clocks-$name.csv" 2>&1 & local smi=$!
  serve_into "$W93" "$name" "$@"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null; snap
}
sampled l8b --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@250:600:703
sampled l8a --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@150:600:703
echo "== total $(elapsed) s"
for f in "$W93"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback" "$f" | tail -3; done
for f in "$W93"/clocks-*.csv; do echo "----- $f $(wc -l < "$f") samples"; sort -t, -k2 "$f" | awk -F, '{print $2}' | uniq -c | sort -rn | head -4; done
