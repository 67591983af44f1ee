#!/usr/bin/env bash
# Device call 74 (nvidia-h200, one GPU): the graph engine's MoE routing made uniform (router logits
# plus a fixed random offset per routed token and layer: calibrate.graph_engine.ROUTINGS), committed
# before it ran. gpt-oss-20b measured again at the eleven held-out prompts 512-16,384 (batches 1-256,
# gen 16), as `roofline calibrate --engine graph --no-fit` runs it: before, its batch 4-64 steps after
# a timed prefill touched 77-99% of the uniform count of experts, 100% after a skipped one.
# qwen3-30b-a3b (the fitted MoE model), mixtral-8x7b and deepseek-v2-lite at prompts 1,024 and 4,096
# (call 32 measured them there with the routing of the weights): their routing was uniform already,
# so their times should not move. Then the kernels probe on gpt-oss-20b and qwen3-30b-a3b cut to 2
# and 6 layers at batches 1-256 and caches of 520 and 4,104 positions: where gpt-oss's decode step
# goes, kernel by kernel, beside the fitted model's.
set -u
source calibrate/runs/common.sh
W74="$W/call74"; mkdir -p "$W74"
env_info > "$W74/env.txt" 2>&1
run_one() {  # run_one NAME MODEL PROMPTS BATCHES TIMEOUT
  timeout "$5" python3 -m calibrate.gpu_job --out "$W74/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen 16 --batches "$4" --no-ceilings --budget-s $(( $5 - 20 )) > "$W74/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
run_one gpt-oss-20b-short gpt-oss-20b 512,768,1024,1536,2048,3072 1,4,16,64,256 120
run_one gpt-oss-20b-long gpt-oss-20b 4096,6144,8192,12288,16384 1,4,16,64,256 120
run_one qwen3-30b-a3b qwen3-30b-a3b 1024,4096 1,4,16,64,256 80
run_one mixtral-8x7b mixtral-8x7b 1024,4096 1,4,16,64,256 80
run_one deepseek-v2-lite deepseek-v2-lite 1024,4096 1,4,16,64,256 80
P=""
for m in gpt-oss-20b qwen3-30b-a3b; do for l in 2 6; do for b in 1 16 64 256; do for c in 520 4104; do
  P="$P,$m:$l:$b:$c"; done; done; done; done
timeout 100 python3 -m calibrate.probes --out "$W74/kernels" --what kernels --kernels-points "${P#,}" --budget-s 85 \
  > "$W74/kernels.log" 2>&1
echo "== kernels done at $(elapsed) s"; snap
tail -n 3 "$W74"/*.log
