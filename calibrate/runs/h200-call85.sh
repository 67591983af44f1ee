#!/usr/bin/env bash
# Device call 85 (nvidia-h200, one GPU): a held-out check of the serving simulator after the fact --
# ten runs of the real loop (calibrate/serving_loop.py via calibrate.serving_job) on streams, seeds,
# rates and server settings no earlier run had, none of them looked at before its replay was
# computed with the shipped calibration and loop terms (roofline compare-serving):
#   - a bursty stream (45 requests in ~0.2 s every 1.5 s, calibrate/runs/make_bursty_stream.py;
#     every earlier stream was Poisson or all at t = 0) on qwen2.5-1.5b;
#   - near the preemption onset (1-9 preemptions simulated): qwen2.5-7b mixed @23, llama-3.2-1b
#     mixed @65, qwen2.5-0.5b mixed @66, qwen2.5-3b chunked (1,024-token budget, 32 sequences) @36;
#   - other settings: mistral-7b-v0.3 long prompts chunked (512) with a 2,048-token slot @12,
#     llama-3.2-3b short @90 with a 2,048-token slot and a 20,000-token pool, qwen2.5-1.5b long
#     generations all at t = 0 (overloaded);
#   - call 14's qwen2.5-0.5b chunked stream again (r55 s77: its decode graph ran 1.03x its price on
#     call 14's machine, 0.97-0.98x on calls 11, 12 and 17's): the machine or the stream?
# The GPU's clocks, power and temperature are logged around each job (nvidia-smi).
set -u
source calibrate/runs/common.sh
W85="$W/call85"; mkdir -p "$W85"
env_info > "$W85/env.txt" 2>&1
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$W85/clocks.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active \
  --format=csv,noheader >> "$W85/clocks.txt" 2>&1; }
serve() { echo "$1 before: $(date -u +%T)" >> "$W85/clocks.txt"; clocks; serve_into "$W85" "$@"; clocks; }
P="--max-num-seqs 64 --max-model-len 1280 --kv-capacity-tokens 12000"
serve q15b $P --model qwen2.5-1.5b --requests calibrate/runs/streams/bursty-mixed-s300.csv
serve q7 $P --model qwen2.5-7b --runs mixed@23:250:301
serve l1 $P --model llama-3.2-1b --runs mixed@65:400:302
serve q05 $P --model qwen2.5-0.5b --runs mixed@66:400:305
serve q3c --max-num-seqs 32 --max-model-len 1280 --kv-capacity-tokens 12000 --policy chunked \
  --max-num-batched-tokens 1024 --model qwen2.5-3b --runs mixed@36:300:303
serve q05c $P --policy chunked --max-num-batched-tokens 512 --model qwen2.5-0.5b --runs mixed@55:400:77
serve m7c --max-num-seqs 64 --max-model-len 2048 --kv-capacity-tokens 24000 --policy chunked \
  --max-num-batched-tokens 512 --model mistral-7b-v0.3 --runs long-prompt@12:200:304
serve l3 --max-num-seqs 64 --max-model-len 2048 --kv-capacity-tokens 20000 --model llama-3.2-3b --runs short@90:400:306
serve q15o $P --model qwen2.5-1.5b --runs long-gen@0:300:307
echo "== total $(elapsed) s"
for f in "$W85"/*.log; do echo "----- $f"; grep -E "^==|Error|error|Traceback|OUT OF MEMORY" "$f" | tail -5; done
cat "$W85/clocks.txt"
