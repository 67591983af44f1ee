#!/usr/bin/env bash
# Device call 112 (the thirty-fourth session, the device time left: ~300 s). On an H200 (the
# acceptance card; the shipped prefill_kv_repeat_s_per_layer was measured on H100s): the kv-repeat
# probe and the prefill kernel walk on three models, then call 111's stream the H100 could not hold
# (llama-2-7b short at 120 req/s on 128 slots of 1,024 rows; picks.txt). On an H100: the kernel walk
# on the layouts the walk had not seen (pythia-6.9b: a GELU MLP, biases, parallel residual in its
# config; qwen3-8b: q/k norms; llama-2-13b) and the kv-repeat probe on qwen3-8b.
set -u
source calibrate/runs/common.sh
W112="$W/call112"; mkdir -p "$W112"
env_info > "$W112/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W112/env.txt"
if [ "$CARD" = h200 ]; then
  timeout 100 python3 calibrate/runs/kv_repeat_probe.py "$W112/kv-repeat.json" \
    qwen2.5-7b:32:2304 llama-3.1-8b:32:2304 llama-2-7b:32:2304 > "$W112/kv-repeat.log" 2>&1
  grep -v Warning "$W112/kv-repeat.log" | tail -18; snap
  timeout 110 python3 calibrate/runs/prefill_kernel_walk.py "$W112/kernel-walk.json" \
    llama-2-7b:32:2304 qwen2.5-7b:32:2304 phi-3-mini-4k:32:2040 > "$W112/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT|warn" "$W112/kernel-walk.log" | tail -15; snap
  SAMPLER_MAX_S=100 sample_through "$W112" l2s serve_into "$W112" l2s --max-num-seqs 128 --max-model-len 1024 \
    --model llama-2-7b --runs "short@120:500:792"
else
  timeout 150 python3 calibrate/runs/prefill_kernel_walk.py "$W112/kernel-walk.json" \
    pythia-6.9b:32:1792 qwen3-8b:32:2304 llama-2-13b:16:2304 > "$W112/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT|warn" "$W112/kernel-walk.log" | tail -15; snap
  timeout 60 python3 calibrate/runs/kv_repeat_probe.py "$W112/kv-repeat.json" qwen3-8b:32:2304 \
    > "$W112/kv-repeat.log" 2>&1
  grep -v Warning "$W112/kv-repeat.log" | tail -6; snap
fi
echo "== total $(elapsed) s"
for f in "$W112"/*.log; do echo "----- $f"; grep -E "^==|served in|Error|error|Traceback" "$f" | tail -3; done
