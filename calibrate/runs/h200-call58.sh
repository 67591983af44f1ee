#!/usr/bin/env bash
# Device call 58 (nvidia-h200, one GPU): a check after the fact of the decode attention's stream terms
# fitted on the five attention probes (roofline.probes.attention_stream_terms; committed before it
# ran): eight catalog models at long contexts none of them was measured at (8,192 + 32 and
# 16,384 + 32), batches 1-1,024 until out of memory, as `roofline calibrate --no-fit` measures them:
# qwen2.5-3b (16 query heads on 2 KV heads), qwen2.5-14b, llama-3.2-3b, gpt-j-6b and pythia-6.9b
# (MHA), falcon-7b (71 query heads on one KV head), olmo-2-7b (MHA, q/k norms), gemma-3-4b (sliding
# window, 8 on 4 heads of 256).
set -u
source calibrate/runs/common.sh
W58="$W/call58"; mkdir -p "$W58"
env_info > "$W58/env.txt" 2>&1
run_one() {  # run_one MODEL PROMPTS
  timeout 80 python3 -m calibrate.gpu_job --out "$W58/$1" --card h200 --engines graph --models "$1" \
    --prompts "$2" --gen 32 --batches 1,2,4,8,16,32,64,128,256,512,1024 --no-ceilings --budget-s 66 \
    > "$W58/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one qwen2.5-3b 8192
run_one qwen2.5-14b 8192
run_one llama-3.2-3b 8192
run_one gpt-j-6b 8192,16384
run_one pythia-6.9b 8192,16384
run_one falcon-7b 16384
run_one olmo-2-7b 16384
run_one gemma-3-4b 16384
tail -n 4 "$W58"/*.log
