#!/usr/bin/env bash
# Device call 97 (nvidia-h200 asked for; an H100 runs it the same way, recorded as h100-sxm): the
# prefill graphs' empty attention tiles (priced since device call 96 at 1.32 ns a tile, timed on
# llama-3.1-8b and qwen2.5-1.5b) checked on models and slot counts the fit never saw, and four
# held-out serving runs at slot counts no run had, rates picked before the call with the shipped
# terms on the H200 (roofline simulate --pass-cost serving-loop, the pool from memory):
#   qwen2.5-7b, 192 slots of 1,024 rows, short requests at 120 req/s (simulated: up to 144 running,
#     TTFT p50 15 ms) and 150 (192 running: the slots full);
#   llama-3.2-3b, 256 slots of 512 rows, short requests at 250 req/s (236 running) and 400
#     (overloaded: TTFT p50 71 ms).
# 1. calibrate/runs/prefill_config_probe.py at qwen2.5-7b 32 and 192 slots of 1,024 rows and
#    llama-3.2-3b 64 and 256 slots of 512 rows (the tile's price foretells 192-32 and 256-64 slots'
#    extra time at each bucket);
# 2. the four runs, the 5 ms power sampler through each.
set -u
source calibrate/runs/common.sh
W97="$W/call97"; mkdir -p "$W97"
env_info > "$W97/env.txt" 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then export CARD=h200; else export CARD=h100-sxm; fi
# sampled NAME COMMAND...: the command with the 5 ms sampler running through it, 300 s at most
# (common.sh's sample_through: calls 97 and 99 ran this script with the same steps written out here)
sampled() { SAMPLER_MAX_S=300 sample_through "$W97" "$@"; }
probe() { timeout 300 python3 calibrate/runs/prefill_config_probe.py "$W97/prefill-config.json" \
  qwen2.5-7b:32:1024 qwen2.5-7b:192:1024 llama-3.2-3b:64:512 llama-3.2-3b:256:512 > "$W97/probe.log" 2>&1; }
sampled probe probe
sampled q7a serve_into "$W97" q7a --max-num-seqs 192 --max-model-len 1024 --model qwen2.5-7b --runs short@120:500:761
sampled q7b serve_into "$W97" q7b --max-num-seqs 192 --max-model-len 1024 --model qwen2.5-7b --runs short@150:500:761
sampled l3a serve_into "$W97" l3a --max-num-seqs 256 --max-model-len 512 --model llama-3.2-3b --runs short@250:600:762
sampled l3b serve_into "$W97" l3b --max-num-seqs 256 --max-model-len 512 --model llama-3.2-3b --runs short@400:600:762
echo "== total $(elapsed) s"
for f in "$W97"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback" "$f" | tail -3; done
grep -v Warning "$W97/probe.log" | tail -20
