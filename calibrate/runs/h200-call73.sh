#!/usr/bin/env bash
# Device call 73 (nvidia-h200, one GPU): the experts one decode step touches in the graph engine's
# random-weight gpt-oss-20b, as built and with its attention, router and expert biases zeroed
# (calibrate/runs/moe_routing_biases.py), qwen3-30b-a3b beside it. Evidence for why the harness's
# gpt-oss routing touches fewer experts than uniform at batches 4-16; not used by the model.
set -u
source calibrate/runs/common.sh
W73="$W/call73"; mkdir -p "$W73"
env_info > "$W73/env.txt" 2>&1
timeout 400 python3 calibrate/runs/moe_routing_biases.py "$W73/h200-probe-moe-routing-biases.json" > "$W73/routing.log" 2>&1
echo "== routing done at $(elapsed) s (rc $?)"; snap
tail -n 40 "$W73/routing.log"
