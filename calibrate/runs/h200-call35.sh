#!/usr/bin/env bash
# Device call 35 (nvidia-h200, one GPU): deepseek-v2-lite's prefill is priced 9-12% slow; its MLA
# layers' elementwise work is counted as an MHA layer of 192-wide heads, never probed. The
# prefill-kernels probe at deepseek-v2-lite's own layers (cut to 2 and 6, batches 1, 4, 16 of
# 2,048-token prompts), kernel by kernel, as evidence; mixtral-8x7b (GQA, MoE) beside it.
set -u
source calibrate/runs/common.sh
W35="$W/call35"; mkdir -p "$W35"
env_info > "$W35/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W35/probes" --what prefill-kernels --budget-s 170 \
  --prefill-kernels-models deepseek-v2-lite,mixtral-8x7b > "$W35/probe-prefill-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W35/probe-prefill-kernels.log"
