#!/usr/bin/env bash
# Device call 98 (nvidia-h200 asked for; an H100 runs it the same way): the empty-tile price (1.32 ns a
# tile, device call 96 on an H100) on the card it is shipped for, if the device lends an H200 (on
# another H100, a second machine's reading of it): calibrate/runs/prefill_config_probe.py at
# llama-3.1-8b 64 x 1,280 and 256 x 512 (call 96's) and qwen2.5-7b 32 and 192 x 1,024 (call 97's);
# then call 97's llama-3.2-3b stream at 250 req/s again (256 slots of 512 rows; it missed its TTFTs
# on call 97's machine), the 5 ms power sampler through it.
set -u
source calibrate/runs/common.sh
W98="$W/call98"; mkdir -p "$W98"
env_info > "$W98/env.txt" 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then export CARD=h200; else export CARD=h100-sxm; fi
timeout 300 python3 calibrate/runs/prefill_config_probe.py "$W98/prefill-config.json" \
  llama-3.1-8b:64:1280 llama-3.1-8b:256:512 qwen2.5-7b:32:1024 qwen2.5-7b:192:1024 > "$W98/probe.log" 2>&1
echo "== probe at $(elapsed) s"; snap
python3 calibrate/runs/power_sampler.py --out "$W98/power-l3a.csv" --max-s 200 > "$W98/sampler-l3a.log" 2>&1 &
smp=$!
sleep 1
serve_into "$W98" l3a --max-num-seqs 256 --max-model-len 512 --model llama-3.2-3b --runs short@250:600:762
sleep 1; kill -TERM $smp 2>/dev/null; wait $smp 2>/dev/null; gzip -f "$W98/power-l3a.csv"; snap
echo "== total $(elapsed) s"
grep -v Warning "$W98/probe.log" | tail -10
grep -E "^==|Error|Traceback" "$W98/l3a.log" | tail -3
