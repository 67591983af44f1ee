#!/usr/bin/env bash
# Device call 68 (nvidia-h200, one GPU): the attention-table probe (`python3 -m calibrate.probes --what
# attention-table`) on its widened grid: batched matrices from 1 (one sequence of as many KV heads as
# there are matrices, where they are fewer than the shape's), not from 64, and lengths every 8 over
# 1,024-1,080. Why: at few matrices and long caches the decode attention runs 5-15 us a layer over the
# price beyond the launch-level time (the attention probes: 64-wide, 7 a KV head, 2 matrices, +5 us at
# 16,384 positions, +14 us at 32,768), which the fit carries in the fixed per-layer time (the fitted
# models priced 2-11% fast at 8,192-16,384 positions, batches 1-4, and the small held-out models 5-8%
# slow at 128 positions); and the kernel at 16 and 71 query heads a KV head just past 1,024 positions
# (docs/method.md section 2.5). Then the kernels probe at one and four sequences over 256, 8,224 and
# 16,416 positions, two fitted models cut to 2 and 4 layers: the real step's kernels and its graph
# time where the fit prices qwen2.5-1.5b and qwen2.5-7b 6-12 us a layer fast (16,416 positions, batches
# 1-4), against the attention alone.
set -u
source calibrate/runs/common.sh
W68="$W/call68"; mkdir -p "$W68"
env_info > "$W68/env.txt" 2>&1
timeout 560 python3 -m calibrate.probes --out "$W68/probes" --what attention-table --budget-s 520 \
  > "$W68/probe-attention-table.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
pts=""
for m in qwen2.5-1.5b qwen2.5-7b; do for c in 256 8224 16416; do for b in 1 4; do for l in 2 4; do
  pts="$pts,$m:$l:$b:$c"; done; done; done; done
timeout 200 python3 -m calibrate.probes --out "$W68/probes" --what kernels --budget-s 180 \
  --kernels-points "${pts#,}" > "$W68/probe-kernels.log" 2>&1
echo "== kernels done at $(elapsed) s"; snap
tail -n 14 "$W68/probe-attention-table.log"; tail -n 4 "$W68/probe-kernels.log"
