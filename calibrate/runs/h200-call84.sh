#!/usr/bin/env bash
# Device call 84 (nvidia-h200, one GPU): the graph engine's warm-up prefill now runs each chunk shape
# the timed prefill runs (committed before this call). Call 82's points again with it: qwen2.5-0.5b at
# 3,000 + 72 (batch 16: 10 + 6 sequences, measured 0.185 s cold in its last chunk, priced 0.125),
# 4,096, 1,760 and 1,920 + 32, batches 16 and 32, and falcon-7b at 1,200 + 64 and 1,000 + 88, batch 16;
# and qwen2.5-1.5b (a fitted model) at 3,000 + 72, batches 16 and 32 (unequal chunks), as
# `roofline calibrate --no-fit` measures them.
set -u
source calibrate/runs/common.sh
W84="$W/call84"; mkdir -p "$W84"
env_info > "$W84/env.txt" 2>&1
run_one() {  # run_one NAME MODEL PROMPTS GENS BATCHES TIMEOUT
  timeout "$6" python3 -m calibrate.gpu_job --out "$W84/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen "$4" --batches "$5" --no-ceilings --budget-s $(( $6 - 15 )) > "$W84/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one q05 qwen2.5-0.5b 3000,4096,1760,1920 72,32,32,32 16,32 60
run_one falcon falcon-7b 1200,1000 64,88 16 50
run_one q15 qwen2.5-1.5b 3000 72 16,32 50
tail -n 8 "$W84"/*.log
