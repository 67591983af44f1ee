#!/usr/bin/env bash
# Device call 117 (the thirty-fifth session). Does the prefill graph's fixed time follow its launch
# count? The H100 kernel walk (calls 110, 112) counted ~18 elementwise launches a layer on a plain
# GELU MLP (pythia-6.9b), ~19 on SwiGLU with full attention, ~21 with grouped queries (the two K/V
# repeats), ~25 with q/k norms (qwen3-8b), at ~3 us each at 64 tokens; pythia priced slow and
# qwen3 fast there, while qwen3's H200 runs price at 0.99-1.01x. On an H200 (the acceptance card):
# the kv-repeat probe (the shipped term is the H100's), the walk on four layouts (llama-2-7b,
# qwen2.5-7b, qwen3-8b, pythia-6.9b), the H200 gemm table's slow points re-timed, and llama-2-7b's
# stream call 111's H100 could not hold (short at 120 req/s, 128 slots of 1,024 rows; call 111's
# picks.txt). On an H100: the walk on call 115's four models (gpt-j-6b: 256-wide heads, priced 0.936x
# in its run; falcon-7b: one K/V head; olmo-2-7b: q/k norms with full attention; internlm2.5-7b)
# and the kv-repeat probe on falcon-7b (K/V repeated 71x).
set -u
source calibrate/runs/common.sh
W117="$W/call117"; mkdir -p "$W117"
env_info > "$W117/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W117/env.txt"
walk() { timeout "$1" python3 calibrate/runs/prefill_kernel_walk.py "$W117/kernel-walk.json" "${@:2}" \
  > "$W117/kernel-walk.log" 2>&1; grep -v -E "Warning|USDT|warn" "$W117/kernel-walk.log" | tail -25; snap; }
repeats() { timeout "$1" python3 calibrate/runs/kv_repeat_probe.py "$W117/kv-repeat.json" "${@:2}" \
  > "$W117/kv-repeat.log" 2>&1; grep -v Warning "$W117/kv-repeat.log" | tail -18; snap; }
if [ "$CARD" = h200 ]; then
  repeats 100 qwen2.5-7b:32:2304 llama-3.1-8b:32:2304 llama-2-7b:32:2304
  walk 150 llama-2-7b:32:2304 qwen2.5-7b:32:2304 qwen3-8b:32:2304 pythia-6.9b:32:1792
  timeout 60 python3 calibrate/runs/gemm_recheck.py "$W117/gemm-recheck.json" 24 > "$W117/gemm-recheck.log" 2>&1
  grep -v Warning "$W117/gemm-recheck.log" | tail -30; snap
  SAMPLER_MAX_S=100 sample_through "$W117" l2s serve_into "$W117" l2s --max-num-seqs 128 --max-model-len 1024 \
    --model llama-2-7b --runs "short@120:500:792"
else
  walk 150 gpt-j-6b:32:1792 falcon-7b:32:1792 olmo-2-7b:32:2304 internlm2.5-7b:32:2304
  repeats 60 falcon-7b:32:1792
fi
echo "== total $(elapsed) s"
for f in "$W117"/*.log; do echo "----- $f"; grep -E "^==|served in|Error|error|Traceback" "$f" | tail -3; done
