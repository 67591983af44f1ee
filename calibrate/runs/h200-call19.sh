#!/usr/bin/env bash
# Device call 19 (nvidia-h200, one GPU): the MoE probe (`python3 -m calibrate.probes --what moe`):
# each stage of the graph engine's mixture-of-experts layer (routing, sort, gather, the two grouped
# matmuls, activation, weighted combine, shared experts) timed alone and whole, at seven catalog MoE
# models' shapes, 1-32,768 tokens (issue 9: the MoE models' prefills ran ~2x their price). Then the
# three MoE models the calibration did not fit, at prompts it has no MoE measurement of (512, 8,192),
# for a held-out check of whatever the probe leads to.
set -u
source calibrate/runs/common.sh
W19="$W/call19"; mkdir -p "$W19"
env_info > "$W19/env.txt" 2>&1
timeout 260 python3 -m calibrate.probes --out "$W19/probes" --what moe --budget-s 230 > "$W19/probe-moe.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -9 "$W19/probe-moe.log"
timeout 250 python3 -m calibrate.gpu_job --out "$W19/moe-heldout" --card h200 --engines graph \
  --models gpt-oss-20b,deepseek-v2-lite,mixtral-8x7b --prompts 512,8192 --gen 16 \
  --batches 1,4,16,64,256 --no-ceilings --budget-s 220 > "$W19/moe-heldout.log" 2>&1
echo "== MoE held-out done at $(elapsed) s"; snap
tail -5 "$W19/moe-heldout.log"
