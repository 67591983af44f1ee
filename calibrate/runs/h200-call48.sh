#!/usr/bin/env bash
# Device call 48 (nvidia-h200, one GPU): the `sustained-matmul` probe, evidence for the matmul rate
# under load lasting seconds (call 47's large prefills, 2-5 s, ran 9-11% slower than priced; across
# every held-out file TTFT's error grows with the prefill's length): one 8192^3 bf16 GEMM back to back
# for 12 s, then 3 s bursts after 1, 4 and 10 s idle; nvidia-smi samples the SM clock, power and
# temperature every 50 ms alongside.
set -u
source calibrate/runs/common.sh
W48="$W/call48"; mkdir -p "$W48"
env_info > "$W48/env.txt" 2>&1
timeout 120 python3 -m calibrate.probes --out "$W48/probes" --what sustained-matmul --budget-s 100 \
  > "$W48/probe-sustained-matmul.log" 2>&1
echo "== probe done at $(elapsed) s"; snap
tail -n 3 "$W48/probe-sustained-matmul.log"
