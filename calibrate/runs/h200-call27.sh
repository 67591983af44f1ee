#!/usr/bin/env bash
# Device call 27 (nvidia-h200, one GPU): the `prefill-kernels` probe (`python3 -m calibrate.probes
# --what prefill-kernels`): the graph engine's eager prefill cut to 2 and 6 layers, profiled kernel
# by kernel, at generic shapes (llama, qwen3 with q/k norms, gpt-neox's plain MLP; one width varied
# at a time) and at eight catalog models' layers (evidence only): what each element of a prefill
# layer's non-matmul work costs (qk-norm and wide-query models' prefills came out 9-24% fast).
set -u
source calibrate/runs/common.sh
W27="$W/call27"; mkdir -p "$W27"
env_info > "$W27/env.txt" 2>&1
timeout 280 python3 -m calibrate.probes --out "$W27/probes" --what prefill-kernels --budget-s 250 > "$W27/probe-prefill-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -8 "$W27/probe-prefill-kernels.log"
