#!/usr/bin/env bash
# Device call 96 (nvidia-h200 asked for; an H100 runs it the same way): do the serving loop's
# prefill graphs run slower with more slots, or only under load? calibrate/runs/prefill_config_probe.py
# times llama-3.1-8b's prefill graphs (buckets 256-2,048) outside a run, cool, back to back and
# after a decode step of every slot, with 64 or 256 slots of 512 or 1,280 rows; and qwen2.5-1.5b's
# with 64 and 128 slots of 1,280 rows. The 5 ms power sampler runs through it.
set -u
source calibrate/runs/common.sh
W96="$W/call96"; mkdir -p "$W96"
env_info > "$W96/env.txt" 2>&1
python3 calibrate/runs/power_sampler.py --out "$W96/power-probe.csv" --max-s 500 > "$W96/sampler.log" 2>&1 &
smp=$!
sleep 1
timeout 450 python3 calibrate/runs/prefill_config_probe.py "$W96/prefill-config.json" \
  llama-3.1-8b:64:1280 llama-3.1-8b:256:512 llama-3.1-8b:64:512 llama-3.1-8b:256:1280 \
  qwen2.5-1.5b:64:1280 qwen2.5-1.5b:128:1280 > "$W96/probe.log" 2>&1
sleep 1; kill -TERM $smp 2>/dev/null; wait $smp 2>/dev/null
snap
echo "== total $(elapsed) s"
cat "$W96/probe.log" | grep -v Warning | tail -40
