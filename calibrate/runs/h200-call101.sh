#!/usr/bin/env bash
# Device call 101 (written in the thirty-first session, which had no device; not yet run): what the
# committed data cannot say about the loop's prefill attention (docs/serving.md, "The prefill
# graphs' attention"). One 600 s call: 170 + 340 s at most.
# 1. The loop-attention probe (python3 -m calibrate.probes --what loop-attention): one layer's
#    attention exactly as the loop's prefill graphs call it (max_num_seqs + 1 sequences, the
#    padding and the empty ones included) at 1, 64 and 256 slots, buckets 256-2,048 and four
#    prompt layouts. The price with the attention measured reads the chunk probe's line (one or
#    two sequences, buckets up to 1,024) and the empty tiles' price (whole graphs at two slot
#    counts): both checked at the attention itself.
# 2. With the attention measured, the prefill graphs timed alone still ran 0.91-0.97x their price
#    at 2,048 tokens (prompts of 256) while the same buckets inside runs ran ~1.0x. The prompts'
#    layout (four to eight short prompts against a run's lone long one) or their tokens (the
#    probe's were all id 7; a GPU's power, and so its clock under the cap, depends on the values
#    its matmuls multiply)? calibrate/runs/prefill_config_probe.py at qwen2.5-7b, 64 slots of 2,304
#    rows (buckets 256-2,048 hold a lone prompt of 7/8 the bucket), each layout with each kind of
#    token, and a lone prompt of random tokens on llama-3.2-1b (64-wide heads, whose passes the
#    tiles over-priced); the 5 ms power sampler through it.
# No serving run: pick the rates of held-out streams with both term sets (the shipped
# hardware_profiles/serving/h200-graph-loop.json and
# hardware_profiles/serving/alternatives/h200-graph-loop-measured-attention.json) before the call
# that serves them.
set -u
source calibrate/runs/common.sh
W101="$W/call101"; mkdir -p "$W101"
env_info > "$W101/env.txt" 2>&1
timeout 170 python3 -m calibrate.probes --out "$W101" --what loop-attention --device cuda --budget-s 140 \
  > "$W101/loop-attention.log" 2>&1
echo "== loop-attention at $(elapsed) s"; snap
probe() { timeout 340 python3 calibrate/runs/prefill_config_probe.py "$W101/prefill-config.json" \
  qwen2.5-7b:64:2304:256:const qwen2.5-7b:64:2304:256:random qwen2.5-7b:64:2304:one:const \
  qwen2.5-7b:64:2304:one:random llama-3.2-1b:64:2304:one:random \
  > "$W101/probe.log" 2>&1; }
sample_through "$W101" probe probe
echo "== total $(elapsed) s"
grep -v Warning "$W101/probe.log" | tail -30
