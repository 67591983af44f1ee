#!/usr/bin/env bash
# Device call 90 (nvidia-h200, one GPU): the first serving runs on the dense layouts no committed
# run had used (session 25 taught the loop them, checked token for token on the CPU only):
# Qwen3's per-head q/k norms (qwen3-8b, prefill-first under load and chunked at 512 tokens) and a
# plain GELU MLP with attention biases (pythia-6.9b, GPT-NeoX, 32 full heads: 4x an 8B GQA model's
# KV per token, under load and overloaded). Held out: the loop's prefill elementwise bytes for
# these layouts are counted from the code, not fitted; none of these streams was replayed before
# it ran. Rates picked with `roofline simulate --pass-cost serving-loop` (none vs some preemptions).
# Each run carries the device probe. GPU clocks logged around each job.
# And the loop at a 4,096-row cache (every committed run had 1,280): the chunk probe at 4,096 rows
# (`--chunk-rows`; the committed table was measured at 1,280, and a chunk graph copies all T rows
# of its slot out, a cost that grows with T), and a chunked qwen2.5-7b stream served at
# --max-model-len 4096 (its decode steps read bucket x 4,096 cached rows).
set -u
source calibrate/runs/common.sh
W90="$W/call90"; mkdir -p "$W90"
env_info > "$W90/env.txt" 2>&1
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$W90/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >> "$W90/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$W90/clocks.txt"; clocks; serve_into "$W90" "$@"; clocks; }
timeout 120 python3 -m calibrate.probes --out "$W90/probes-rows4096" --what chunk --chunk-rows 4096 --budget-s 90 \
  > "$W90/probe-chunk-rows4096.log" 2>&1; echo "== chunk probe done at $(elapsed) s"; snap
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve q3a $P --model qwen3-8b --runs mixed@20:250:601
serve q3c $P --policy chunked --max-num-batched-tokens 512 --model qwen3-8b --runs mixed@18:250:603
serve pya $P --policy chunked --max-num-batched-tokens 512 --model pythia-6.9b --runs mixed@12:200:604
serve pyb $P --model pythia-6.9b --runs mixed@20:200:605
serve q7L --max-num-seqs 64 --max-model-len 4096 --kv-capacity-tokens 12000 --policy chunked --max-num-batched-tokens 512 \
  --model qwen2.5-7b --runs mixed@18:250:606
echo "== total $(elapsed) s"
for f in "$W90"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -5; done
