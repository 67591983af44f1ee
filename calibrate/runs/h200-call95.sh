#!/usr/bin/env bash
# Device call 95 (nvidia-h200 asked for; an H100 runs it the same way, recorded as h100-sxm): how the
# power cap slows the loop's compute-bound passes, at the time scale of a pass. Calls 93-94 sampled
# nvidia-smi every 100 ms, whose power.draw is a one-second average: the card drew a median 629-671
# W of its 700 W limit, yet carried the SW power-cap reason in most samples and ran llama-3.1-8b's
# prefill graphs 1.04-1.06x their price at 150 and 250 req/s. Here calibrate/runs/power_sampler.py
# reads NVML's instantaneous power, the SM clock and the reasons every 5 ms through:
#   1. calibrate/runs/power_probe.py: fixed workloads (idle; 8k matrix products back to back and at
#      duty 0.25 / 0.5 / 0.75; 2 GiB copies; the two alternating; llama-3.1-8b's feed-forward at 768
#      tokens back to back and at duty 0.5);
#   2. call 91's two llama-3.1-8b streams again (256 slots of 512 rows, short requests at 150 and
#      250 req/s), call 88's llama-3.1-8b stream (64 slots, mixed at 24 req/s: its prefill ran 0.98x
#      its price), and a new one, qwen2.5-14b with 128 slots of 512 rows, short requests at 120 req/s
#      (held out).
set -u
source calibrate/runs/common.sh
W95="$W/call95"; mkdir -p "$W95"
env_info > "$W95/env.txt" 2>&1
nvidia-smi -q -d POWER,CLOCK >> "$W95/env.txt" 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then export CARD=h200; else export CARD=h100-sxm; fi
sampled() {  # sampled NAME COMMAND...: the command with the 5 ms sampler running through it
  local name=$1; shift
  python3 calibrate/runs/power_sampler.py --out "$W95/power-$name.csv" --max-s 200 > "$W95/sampler-$name.log" 2>&1 &
  local smp=$!
  sleep 1
  "$@"
  sleep 1; kill -TERM $smp 2>/dev/null; wait $smp 2>/dev/null
  echo "== $name sampled at $(elapsed) s, $(wc -l < "$W95/power-$name.csv") samples"; snap
}
probe() { timeout 120 python3 calibrate/runs/power_probe.py --out "$W95/power-probe.json" > "$W95/probe.log" 2>&1; }
sampled probe probe
sampled l8b serve_into "$W95" l8b --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@250:600:703
sampled l8a serve_into "$W95" l8a --max-num-seqs 256 --max-model-len 512 --model llama-3.1-8b --runs short@150:600:703
sampled l8m serve_into "$W95" l8m --max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000 --model llama-3.1-8b --runs mixed@24:250:401
sampled q14 serve_into "$W95" q14 --max-num-seqs 128 --max-model-len 512 --model qwen2.5-14b --runs short@120:500:751
echo "== total $(elapsed) s"
for f in "$W95"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback" "$f" | tail -3; done
tail -12 "$W95/probe.log"
