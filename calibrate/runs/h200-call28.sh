#!/usr/bin/env bash
# Device call 28 (nvidia-h200, one GPU): the `prefill-kernels` probe again, each point at batches 1,
# 4 and 16 of 2,048-token prompts (2,048-32,768 tokens a forward: does an elementwise kernel's cost
# per element depend on whether its tensors fit the 50 MB L2?), with two narrow generic shapes
# (hidden 1,536) and four more catalog models' layers as evidence (call 27 ran batch 4 only).
set -u
source calibrate/runs/common.sh
W28="$W/call28"; mkdir -p "$W28"
env_info > "$W28/env.txt" 2>&1
timeout 400 python3 -m calibrate.probes --out "$W28/probes" --what prefill-kernels --budget-s 360 > "$W28/probe-prefill-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -8 "$W28/probe-prefill-kernels.log"
