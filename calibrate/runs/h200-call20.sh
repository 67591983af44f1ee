#!/usr/bin/env bash
# Device call 20 (nvidia-h200, one GPU): the catalog's other dense architectures, none of them ever
# measured or fitted, now that the graph engine builds each as roofline prices it (its structure
# from roofline.model_spec: plain MLPs, per-layer windows, tied heads, nested gemma-3 configs):
# qk-norm (qwen3-8b, qwen3-32b, olmo-2-7b, gemma-3), windows (gemma-2-9b, gemma-3, phi-3-mini),
# plain GELU MLPs (pythia-6.9b, gpt-j-6b, falcon-7b), MHA (llama-2-7b), internlm2.5-7b; prompts
# 512 and 4,096, gen 16, batches 1-256 (issue 9's held-out check on models the calibration never saw).
set -u
source calibrate/runs/common.sh
W20="$W/call20"; mkdir -p "$W20"
env_info > "$W20/env.txt" 2>&1
timeout 420 python3 -m calibrate.gpu_job --out "$W20/dense-heldout" --card h200 --engines graph \
  --models qwen3-8b,gemma-2-9b,phi-3-mini-4k,pythia-6.9b,falcon-7b,gemma-3-4b,olmo-2-7b,gpt-j-6b,internlm2.5-7b,llama-2-7b,gemma-3-12b,qwen3-32b \
  --prompts 512,4096 --gen 16 --batches 1,4,16,64,256 --no-ceilings --budget-s 390 > "$W20/dense-heldout.log" 2>&1
echo "== dense held-out done at $(elapsed) s"; snap
grep -c " ok\|ttft" "$W20/dense-heldout.log"; tail -4 "$W20/dense-heldout.log"
