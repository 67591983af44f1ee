#!/usr/bin/env bash
# Device call 116 (the thirty-fourth session's last ~180 s): on an H200 only, the kv-repeat probe on
# qwen2.5-7b and llama-3.1-8b -- the shipped prefill_kv_repeat_s_per_layer was measured on H100s
# (calls 109-110) and is used on the H200. On any other card it stops at once.
set -u
source calibrate/runs/common.sh
W116="$W/call116"; mkdir -p "$W116"
env_info > "$W116/env.txt" 2>&1
CARD=$(detect_card) || exit 1
echo "card $CARD" | tee -a "$W116/env.txt"
if [ "$CARD" = h200 ]; then
  timeout 75 python3 calibrate/runs/kv_repeat_probe.py "$W116/kv-repeat.json" \
    qwen2.5-7b:32:2304 llama-3.1-8b:32:2304 > "$W116/kv-repeat.log" 2>&1
  grep -v Warning "$W116/kv-repeat.log" | tail -12
fi
snap; echo "== total $(elapsed) s"
