#!/usr/bin/env bash
# Device call 36 (nvidia-h200, one GPU): the `prefill-kernels` probe's generic MLA shapes only
# (`--prefill-kernels-models` with their labels): dense deepseek-v2 layers from 16 heads of 128 + 64
# rope, values of 128, a latent of 512, one width changed at a time, batches 1, 4, 16 of 2,048-token
# prompts. Pooled with call 28's file by the fit: the MLA layers' own elementwise kinds.
set -u
source calibrate/runs/common.sh
W36="$W/call36"; mkdir -p "$W36"
env_info > "$W36/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W36/probes" --what prefill-kernels --budget-s 170 \
  --prefill-kernels-models "mla base,mla more heads,mla narrow rope,mla narrow nope,mla narrow values,mla narrow latent" \
  > "$W36/probe-prefill-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W36/probe-prefill-kernels.log"
