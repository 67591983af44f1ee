#!/usr/bin/env bash
# Device call 120 (the thirty-fifth session). The q/k norms' four launches a layer, timed in the
# graph itself (calibrate/runs/qk_norm_probe.py: the prefill graph with and without them,
# interleaved), against the 4 x 2.15 us the shipped prefill_launch_s prices from kernel sums. On an
# H200 (the acceptance card) also the kv-repeat probe, the kernel walk on four layouts and the
# H200 gemm table's slow points re-timed (call 117's H200 part without its stream).
set -u
source calibrate/runs/common.sh
W120="$W/call120"; mkdir -p "$W120"
env_info > "$W120/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W120/env.txt"
qk() { timeout "$1" python3 calibrate/runs/qk_norm_probe.py "$W120/qk-norm.json" "${@:2}" \
  > "$W120/qk-norm.log" 2>&1; grep -v Warning "$W120/qk-norm.log" | tail -18; snap; }
if [ "$CARD" = h200 ]; then
  qk 70 qwen3-8b:32:2304
  timeout 150 python3 calibrate/runs/prefill_kernel_walk.py "$W120/kernel-walk.json" llama-2-7b:32:2304 \
    qwen2.5-7b:32:2304 qwen3-8b:32:2304 pythia-6.9b:32:1792 > "$W120/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT|warn" "$W120/kernel-walk.log" | tail -20; snap
  timeout 100 python3 calibrate/runs/kv_repeat_probe.py "$W120/kv-repeat.json" qwen2.5-7b:32:2304 \
    llama-3.1-8b:32:2304 llama-2-7b:32:2304 > "$W120/kv-repeat.log" 2>&1
  grep -v Warning "$W120/kv-repeat.log" | tail -18; snap
  timeout 60 python3 calibrate/runs/gemm_recheck.py "$W120/gemm-recheck.json" 24 > "$W120/gemm-recheck.log" 2>&1
  grep -v Warning "$W120/gemm-recheck.log" | tail -10; snap
else
  qk 170 qwen3-8b:32:2304 olmo-2-7b:32:2304 qwen3-32b:4:2304
fi
echo "== total $(elapsed) s"
