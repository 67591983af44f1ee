#!/usr/bin/env bash
# Device call 21 (nvidia-h200, one GPU): the `kernels` probe (`python3 -m calibrate.probes --what
# kernels`): the graph engine's decode step profiled kernel by kernel where the step model misses
# held-out models at long context -- phi-3-mini-4k (MHA, 96-wide heads, a 2,047-token window:
# -15 to -46% at prompt 4,096), gpt-oss-20b (attention sinks: -35% at prompt 8,192, batch 1),
# gemma-3-4b (1,024-token windows) -- beside controls the model prices well (llama-2-7b, MHA;
# qwen2.5-7b and mistral-7b-v0.3 at 8,192).
set -u
source calibrate/runs/common.sh
W21="$W/call21"; mkdir -p "$W21"
env_info > "$W21/env.txt" 2>&1
timeout 200 python3 -m calibrate.probes --out "$W21/probes" --what kernels --budget-s 170 > "$W21/probe-kernels.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -10 "$W21/probe-kernels.log"
