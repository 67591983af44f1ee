#!/usr/bin/env bash
# Device call 121 (the thirty-fifth session). On an H200 (the acceptance card): calibrate/runs/
# h200-call120.sh's H200 part (the q/k-norm probe on qwen3-8b, the kernel walk on four layouts, the
# kv-repeat probe, the H200 gemm table's slow points re-timed; into $W/call120). On an H100: the
# kernel walk on one machine over qwen3-8b and llama-3.1-8b (q/k norms against none, same widths),
# gemma-2-9b (256-wide grouped heads, 42 layers) and gpt-neox-20b (a plain GELU MLP, 96-wide full
# heads; 4 slots, its KV is 1.1 MB a token): do two models no walk had launch what the code counts?
set -u
source calibrate/runs/common.sh
W121="$W/call121"; mkdir -p "$W121"
env_info > "$W121/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W121/env.txt"
if [ "$CARD" = h200 ]; then
  bash calibrate/runs/h200-call120.sh  # its H200 part, into $W/call120
else
  timeout 200 python3 calibrate/runs/prefill_kernel_walk.py "$W121/kernel-walk.json" qwen3-8b:32:2304 \
    llama-3.1-8b:32:2304 gemma-2-9b:16:2304 gpt-neox-20b:4:2048 > "$W121/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT|warn" "$W121/kernel-walk.log" | tail -22; snap
fi
echo "== total $(elapsed) s"
