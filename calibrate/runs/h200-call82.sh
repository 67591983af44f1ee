#!/usr/bin/env bash
# Device call 82 (nvidia-h200, one GPU): do the held-out TTFT misses at batch 16 and up repeat?
# qwen2.5-0.5b at 3,000 + 72, batch 16 (-22% in call 65: measured 0.160 s, priced 0.125) and 1,760 +
# 32, batch 32 (-11%, call 60), falcon-7b at 1,200 + 64, batch 16 (-10%), each measured again twice
# (two separate jobs, as `roofline calibrate --no-fit` measures them), beside their neighbours that
# were within 6% (qwen2.5-0.5b 4,096 + 32 and 1,920 + 32, falcon-7b 1,000 + 88). Evidence only.
set -u
source calibrate/runs/common.sh
W82="$W/call82"; mkdir -p "$W82"
env_info > "$W82/env.txt" 2>&1
run_one() {  # run_one NAME MODEL PROMPTS GENS BATCHES TIMEOUT
  timeout "$6" python3 -m calibrate.gpu_job --out "$W82/$1" --card h200 --engines graph --models "$2" \
    --prompts "$3" --gen "$4" --batches "$5" --no-ceilings --budget-s $(( $6 - 15 )) > "$W82/$1.log" 2>&1
  echo "== $1 done at $(elapsed) s"; snap
}
for rep in a b; do
  run_one "q05-$rep" qwen2.5-0.5b 3000,4096,1760,1920 72,32,32,32 16,32 60
  run_one "falcon-$rep" falcon-7b 1200,1000 64,88 16 50
done
tail -n 6 "$W82"/*.log
