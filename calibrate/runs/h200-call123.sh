#!/usr/bin/env bash
# Device call 123 and after (the thirty-fifth session's last ~450 s, tried while they last). On an
# H200 only: the q/k-norm probe on qwen3-8b and the kernel walk on llama-2-7b, qwen2.5-7b, qwen3-8b
# and pythia-6.9b (calibrate/runs/h200-call120.sh's H200 part without the repeats and the gemm
# recheck, to fit the time left): does the acceptance card show the launches and the q/k norms the
# H100s priced? On any other card it stops at once.
set -u
source calibrate/runs/common.sh
W123="$W/call123"; mkdir -p "$W123"
env_info > "$W123/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W123/env.txt"
if [ "$CARD" = h200 ]; then
  timeout 70 python3 calibrate/runs/qk_norm_probe.py "$W123/qk-norm.json" qwen3-8b:32:2304 > "$W123/qk-norm.log" 2>&1
  grep -v Warning "$W123/qk-norm.log" | tail -8; snap
  timeout 150 python3 calibrate/runs/prefill_kernel_walk.py "$W123/kernel-walk.json" qwen3-8b:32:2304 \
    llama-2-7b:32:2304 qwen2.5-7b:32:2304 pythia-6.9b:32:1792 > "$W123/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT|warn" "$W123/kernel-walk.log" | tail -20
fi
snap; echo "== total $(elapsed) s"
