#!/usr/bin/env bash
# H100 device call 2 (nvidia-h200 asked for, an NVIDIA H100 80GB HBM3 lent; run on the machine call 1
# left warm): the `gemm` probe, the card's matmul table the serving loop's prefill price reads
# (bf16 F.linear over 7,901 shapes, as device call 8 measured the H200's):
# hardware_profiles/measurements/h100-sxm-probe-gemm.json. The command as it ran (inline):
set -u
source calibrate/runs/common.sh
mkdir -p "$W/h100-call2"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$W/h100-call2/env.txt"
timeout 330 python3 -m calibrate.probes --out "$W/h100-call2" --what gemm --budget-s 310 > "$W/h100-call2/gemm.log" 2>&1
echo "== gemm done at $(elapsed) s"; snap; tail -3 "$W/h100-call2/gemm.log"
