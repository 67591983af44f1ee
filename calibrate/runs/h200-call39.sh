#!/usr/bin/env bash
# Device call 39 (nvidia-h200, one GPU): the `layer-features` probe twice, its grid final: call 38's
# variants, gpt-oss's MoE layer now with its config's intermediate_size set to the engine's expert
# width (what roofline's gpt-oss config reader takes it as; the engine ran the same either way), and
# five untimed replays before each timed set (call 37-38's first batch after an engine's build was at
# times 10% slow). Two runs, so that the fit sees each point twice.
set -u
source calibrate/runs/common.sh
W39="$W/call39"; mkdir -p "$W39"
env_info > "$W39/env.txt" 2>&1
for run in 1 2; do
  timeout 300 python3 -m calibrate.probes --out "$W39/probes-$run" --what layer-features --budget-s 260 \
    > "$W39/probe-layer-features-$run.log" 2>&1
  echo "== probe run $run done at $(elapsed) s"; snap
done
tail -n 2 "$W39"/probe-layer-features-*.log
