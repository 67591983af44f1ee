#!/usr/bin/env bash
# Device call 13 (nvidia-h200, one GPU): does the host's share of a decode step grow with the
# step's length because the host sleeps while it waits? The same streams twice on one machine:
# the token sync blocking (the loop's default) and the host polling the pass's end event
# (--spin-wait), on three models whose steps last 2.5-8 ms.
set -u
source calibrate/runs/common.sh
W13="$W/call13"; mkdir -p "$W13"
env_info > "$W13/env.txt" 2>&1
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
for model in mistral-7b-v0.3:mixed@20:200:61 qwen2.5-7b:mixed@22:250:54 qwen2.5-1.5b:mixed@55:300:51; do
  m=${model%%:*}; r=${model#*:}
  for wait in sync spin; do
    flag=""; [ "$wait" = spin ] && flag="--spin-wait"
    timeout 100 python3 -m calibrate.serving_job --out "$W13/serve-$wait" --card h200 --model "$m" $P --runs "$r" \
      $flag --budget-s 80 > "$W13/$m-$wait.log" 2>&1
    echo "== $m $wait done at $(elapsed) s"; snap
  done
done
echo "== total $(elapsed) s"
for f in "$W13"/*.log; do echo "----- $f"; grep -E "Error|error|Traceback|served in" "$f" | tail -4; done
