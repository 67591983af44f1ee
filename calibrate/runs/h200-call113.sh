#!/usr/bin/env bash
# Device call 113 (the thirty-fourth session, the last ~450 s of device time). On an H200: call 112's
# H200 part (the kv-repeat probe and the kernel walk on the acceptance card, llama-2-7b's stream
# call 111's H100 could not hold), then the H200 table's slow points re-timed. On an H100: its gemm
# table's 40 slowest-for-their-size points re-timed (calibrate/runs/gemm_recheck.py): the table's
# or the card's?
set -u
source calibrate/runs/common.sh
W113="$W/call113"; mkdir -p "$W113"
env_info > "$W113/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W113/env.txt"
if [ "$CARD" = h200 ]; then
  timeout 100 python3 calibrate/runs/kv_repeat_probe.py "$W113/kv-repeat.json" \
    qwen2.5-7b:32:2304 llama-3.1-8b:32:2304 llama-2-7b:32:2304 > "$W113/kv-repeat.log" 2>&1
  grep -v Warning "$W113/kv-repeat.log" | tail -18; snap
  timeout 110 python3 calibrate/runs/prefill_kernel_walk.py "$W113/kernel-walk.json" \
    llama-2-7b:32:2304 qwen2.5-7b:32:2304 phi-3-mini-4k:32:2040 > "$W113/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT|warn" "$W113/kernel-walk.log" | tail -15; snap
  SAMPLER_MAX_S=100 sample_through "$W113" l2s serve_into "$W113" l2s --max-num-seqs 128 --max-model-len 1024 \
    --model llama-2-7b --runs "short@120:500:792"
  timeout 60 python3 calibrate/runs/gemm_recheck.py "$W113/gemm-recheck.json" 24 > "$W113/gemm-recheck.log" 2>&1
else
  timeout 150 python3 calibrate/runs/gemm_recheck.py "$W113/gemm-recheck.json" 40 > "$W113/gemm-recheck.log" 2>&1
fi
grep -v Warning "$W113/gemm-recheck.log" | tail -40; snap
echo "== total $(elapsed) s"
