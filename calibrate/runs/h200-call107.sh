#!/usr/bin/env bash
# Device call 107 (the thirty-fourth session). One 600 s call, in order of what a cut-short call
# should still bring back:
# 1. The K/V repeats' cost inside the loop's prefill graph (calibrate/runs/kv_repeat_probe.py): the
#    same graph with and without the two kernels a layer, interleaved, on two full-attention models
#    (llama-2-7b, phi-3-mini-4k: copies added where the repeats would be) and three grouped-query
#    ones (qwen2.5-7b, qwen2.5-1.5b, llama-3.1-8b: repeats against the kernel's own GQA). Full
#    attention's prefill ran 0.92-0.95x its price at 128-256-token buckets, grouped-query 0.98-1.01
#    (benchmarks/prefill_ratio_by_bucket.py); is it the repeats' fixed time in the fitted floor?
# 2. Call 106's two streams its time cut (docs/data/h100-2026-12-06/call105/picks.txt, rates per
#    card as picked before call 105): qwen3-8b long-gen on 96 slots, llama-3.1-8b mixed overloaded.
# 3. If time is left, the loop-attention probe of calibrate/runs/h200-call101.sh (part 1).
set -u
source calibrate/runs/common.sh
W107="$W/call107"; mkdir -p "$W107"
env_info > "$W107/env.txt" 2>&1
CARD=$(detect_card) || exit 1; export CARD
echo "card $CARD" | tee -a "$W107/env.txt"
if [ "${PART:-}" = repeats-rest ]; then
  W107="$W/${CALL:-call108}"; mkdir -p "$W107"; env_info > "$W107/env.txt" 2>&1; echo "card $CARD" >> "$W107/env.txt"
  timeout 300 python3 calibrate/runs/kv_repeat_probe.py "$W107/kv-repeat.json" \
    ${MODELS:-qwen2.5-7b:32:2304 phi-3-mini-4k:32:2040 qwen2.5-1.5b:32:2304 llama-3.1-8b:32:2304 llama-2-13b:16:2304} \
    > "$W107/kv-repeat.log" 2>&1
  grep -v Warning "$W107/kv-repeat.log" | tail -32; snap; exit 0
fi
if [ "${PART:-}" = walk ]; then  # call 110: calibrate/runs/prefill_kernel_walk.py, then the kv-repeat probe again
  W107="$W/${CALL:-call110}"; mkdir -p "$W107"; env_info > "$W107/env.txt" 2>&1; echo "card $CARD" >> "$W107/env.txt"
  timeout 330 python3 calibrate/runs/prefill_kernel_walk.py "$W107/kernel-walk.json" \
    llama-2-7b:32:2304 qwen2.5-7b:32:2304 phi-3-mini-4k:32:2040 llama-3.1-8b:32:2304 qwen2.5-1.5b:32:2304 \
    > "$W107/kernel-walk.log" 2>&1
  grep -v -E "Warning|USDT" "$W107/kernel-walk.log" | tail -30; snap
  if [ "$(elapsed)" -lt 420 ]; then
    timeout $(( 560 - $(elapsed) )) python3 calibrate/runs/kv_repeat_probe.py "$W107/kv-repeat.json" \
      qwen2.5-7b:32:2304 llama-2-7b:32:2304 llama-3.1-8b:32:2304 phi-3-mini-4k:32:2040 > "$W107/kv-repeat.log" 2>&1
    grep -v Warning "$W107/kv-repeat.log" | tail -24; snap
  fi
  echo "== total $(elapsed) s"; exit 0
fi
repeats() { timeout 230 python3 calibrate/runs/kv_repeat_probe.py "$W107/kv-repeat.json" \
  llama-2-7b:32:2304 qwen2.5-7b:32:2304 phi-3-mini-4k:32:2040 qwen2.5-1.5b:32:2304 llama-3.1-8b:32:2304 \
  > "$W107/kv-repeat.log" 2>&1; }
SAMPLER_MAX_S=240 sample_through "$W107" repeats repeats
grep -v Warning "$W107/kv-repeat.log" | tail -32
sampled() { SAMPLER_MAX_S=150 sample_through "$W107" "$@"; }
sampled q8g serve_into "$W107" q8g --max-num-seqs 96 --max-model-len 1024 --model qwen3-8b --runs "long-gen@$(rate 20 15):300:786"
sampled l8m serve_into "$W107" l8m --max-num-seqs 128 --max-model-len 1280 --model llama-3.1-8b --runs "mixed@60:400:788"
if [ "$(elapsed)" -lt 390 ]; then
  timeout $(( 560 - $(elapsed) )) python3 -m calibrate.probes --out "$W107" --what loop-attention --device cuda \
    --budget-s $(( 520 - $(elapsed) )) > "$W107/loop-attention.log" 2>&1
  echo "== loop-attention at $(elapsed) s"; snap
fi
echo "== total $(elapsed) s"
for f in "$W107"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback" "$f" | tail -3; done
# Call 108 (the same session, the probe's models after llama-2-7b: phi-3-mini-4k's 2,047-token
# window refused 2,304 rows in call 107):
#   PART=repeats-rest bash calibrate/runs/h200-call107.sh
# Call 109 (the grouped-query models again: call 108's probe skipped them on a wrong test for the
# kernel's GQA support):
#   PART=repeats-rest CALL=call109 MODELS="qwen2.5-7b:32:2304 qwen2.5-1.5b:32:2304 llama-3.1-8b:32:2304 llama-3.2-1b:32:2304" bash calibrate/runs/h200-call107.sh
