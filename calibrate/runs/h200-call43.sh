#!/usr/bin/env bash
# Device call 43 (nvidia-h200, one GPU): a check after the fact of the attention-contexts windows
# (committed before it ran), on models never measured at these lengths: prompt 512 + gen 128 (a
# 640-position cache: the (632, 640] window) and prompt 1,024 + gen 32 (1,056: the (1,024, 1,088]
# window) for internlm2.5-7b, gemma-2-9b, llama-2-13b (MHA) and pythia-6.9b (MHA, plain MLP);
# batches 1-256.
set -u
source calibrate/runs/common.sh
W43="$W/call43"; mkdir -p "$W43"
env_info > "$W43/env.txt" 2>&1
timeout 330 python3 -m calibrate.gpu_job --out "$W43/dense" --card h200 --engines graph \
  --models internlm2.5-7b,gemma-2-9b,llama-2-13b,pythia-6.9b \
  --prompts 512,1024 --gen 128,32 --batches 1,4,16,64,256 --no-ceilings --budget-s 300 > "$W43/dense.log" 2>&1
echo "== dense done at $(elapsed) s"; snap
tail -n 3 "$W43/dense.log"
