#!/usr/bin/env bash
# Device call 81 (nvidia-h200, one GPU): a check after the fact of the twenty-second session's two
# changes (committed before this call ran): the layer-features fit's six runs (gpt-oss's MoE layer
# 2.0 -> 8.1 us, q/k norms 6.1 -> 5.8, MLA 10.4 -> 8.6, shared experts 12.1 -> 13.3) and the sink in
# the softmax's row. Held-out rows at prompts none of these models has been measured at (896, 3,584
# and 14,336 + 16), as `roofline calibrate --no-fit` measures them: gpt-oss-20b, deepseek-v2-lite
# (MLA, shared experts), qwen3-8b and olmo-2-7b (q/k norms), mixtral-8x7b (none of the features).
set -u
source calibrate/runs/common.sh
W81="$W/call81"; mkdir -p "$W81"
env_info > "$W81/env.txt" 2>&1
snap_loop & SNAP=$!
run_one() {  # run_one NAME MODEL PROMPTS BATCHES TIMEOUT
  timeout "$5" python3 -m calibrate.gpu_job --out "$W81/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches "$4" --no-ceilings --budget-s $(( $5 - 20 )) > "$W81/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one gpt-oss-20b gpt-oss-20b 896,3584 1,2,4,8,16,64,256 110
run_one gpt-oss-20b-long gpt-oss-20b 14336 1,2,4,8,16,64 90
run_one deepseek-v2-lite deepseek-v2-lite 896,3584 1,4,16,64,256 80
run_one qwen3-8b qwen3-8b 896,3584 1,4,16,64 60
run_one olmo-2-7b olmo-2-7b 896,3584 1,4,16,64 60
run_one mixtral-8x7b mixtral-8x7b 896 1,4,16 60
kill $SNAP; snap
tail -n 3 "$W81"/*.log
