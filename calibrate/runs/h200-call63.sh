#!/usr/bin/env bash
# Device call 63 (nvidia-h200, one GPU): issue 9's 128/128 bar on held-out models no 128/128 run had
# measured (calls 4 and 17 measured qwen2.5-0.5b, llama-3.2-1b, qwen2.5-3b, llama-3.2-3b), after the
# decode attention's ramp was committed (50b9f92) and not used to set any term: gemma-3-4b,
# phi-3-mini-4k, internlm2.5-7b, mistral-7b-v0.3, qwen3-8b, olmo-2-7b at prompt 128 / gen 128,
# batches 1-1,024, as `roofline calibrate --no-fit` measures them.
set -u
source calibrate/runs/common.sh
W63="$W/call63"; mkdir -p "$W63"
env_info > "$W63/env.txt" 2>&1
for m in gemma-3-4b phi-3-mini-4k internlm2.5-7b mistral-7b-v0.3 qwen3-8b olmo-2-7b; do
  timeout 62 python3 -m calibrate.gpu_job --out "$W63/$m" --card h200 --engines graph --models "$m" \
    --prompts 128 --gen 128 --batches 1,2,4,8,16,32,64,128,256,512,1024 --no-ceilings --budget-s 50 \
    > "$W63/$m.log" 2>&1
  echo "== $m done at $(elapsed) s"; snap
done
tail -n 3 "$W63"/*.log
