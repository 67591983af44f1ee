#!/usr/bin/env bash
# Device call 80 (nvidia-h200, one GPU): the layer-features probe (its shipped grid,
# calibrate.probes.FULL_LAYER_FEATURES) again, at its own cache of 2,048 positions and at 520 and
# 4,104. Why: device call 79's walk measured qwen3-30b-a3b's layer with gpt-oss's MoE layer 16.6 us
# (520 positions) and 19.7 us (4,104) over qwen3-30b-a3b's own at batch 1, where the two runs of
# 2026-12-01 that the shipped `biased_experts` (2.0 us) was fitted from found 7.4 us at 2,048. Each
# grid is the same harness (calibrate.probes.layers_probe, probe="layer-features"), only the cache
# length differs; 520 twice (first and last) for the run-to-run spread.
set -u
source calibrate/runs/common.sh
W80="$W/call80"; mkdir -p "$W80"
env_info > "$W80/env.txt" 2>&1
snap_loop & SNAP=$!
for spec in 520:a 2048:b 4104:c 520:d; do
  ctx=${spec%%:*}; tag=${spec##*:}
  timeout 100 python3 - "$ctx" "$W80/h200-probe-layer-features-$ctx$tag.json" > "$W80/layer-features-$ctx$tag.log" 2>&1 <<'PY'
import dataclasses, sys, time
from pathlib import Path
from calibrate.probes import FULL_LAYER_FEATURES, layers_probe
grid = dataclasses.replace(FULL_LAYER_FEATURES, context=int(sys.argv[1]))
layers_probe("cuda", grid, Path(sys.argv[2]), time.monotonic() + 85, lambda m: print(m, flush=True),
             probe="layer-features", count_kernels=True)
PY
  echo "== layer-features $ctx$tag done at $(elapsed) s"; snap
done
kill $SNAP; snap
tail -n 2 "$W80"/*.log
