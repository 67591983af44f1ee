"""How the GPU's power cap slows compute-bound work, on fixed workloads (device call 95,
calibrate/runs/h200-call95.sh; run beside calibrate/runs/power_sampler.py, which samples the clock
and power every 5 ms):

    python3 calibrate/runs/power_probe.py --out FILE.json

Phases, each after 2 s idle so that one does not inherit the last one's power state:

- ``idle``: 2 s of nothing (the card's idle power with a CUDA context).
- ``gemm``: 8192 x 8192 x 8192 bf16 matrix products on random data, back to back, 8 s.
- ``gemm-duty-X``: bursts of 7 such products (about 10 ms at the boost clock), each followed by
  an idle gap of 30, 10 or 3.3 ms (duty 0.25, 0.5, 0.75), 4 s each.
- ``copy``: device-to-device copies of 2 GiB, back to back, 5 s (memory-bound).
- ``mix``: bursts of 7 products, then 10 copies of 2 GiB, alternating with no gap, 5 s.
- ``mlp``: a prefill's feed-forward, llama-3.1-8b's shapes at 768 tokens ((768 x 4096) @ (4096 x
  28672), then (768 x 14336) @ (14336 x 4096)), 32 layers a unit (about one prefill pass), back to
  back, 6 s; then ``mlp-duty-0.5``: each unit followed by an idle gap as long as it, 4 s.

Every unit is timed with CUDA events; the JSON holds, per phase, its start as a Unix time
(``t_origin_unix_s``, taken after a synchronize with the GPU idle) and each unit's start (seconds
after it, on the GPU's clock) and its duration in ms, to line up with the sampler's file.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    bf16 = torch.bfloat16
    big_a, big_b = (torch.randn(8192, 8192, device=dev, dtype=bf16) for _ in range(2))
    big_c = torch.empty(8192, 8192, device=dev, dtype=bf16)
    src = torch.randn(2 ** 30, device=dev, dtype=bf16)  # 2 GiB
    dst = torch.empty_like(src)
    x = torch.randn(768, 4096, device=dev, dtype=bf16)
    w_up = torch.randn(4096, 28672, device=dev, dtype=bf16) / 64
    w_down = torch.randn(14336, 4096, device=dev, dtype=bf16) / 128
    up = torch.empty(768, 28672, device=dev, dtype=bf16)
    down = torch.empty(768, 4096, device=dev, dtype=bf16)

    def gemms(n):
        for _ in range(n):
            torch.matmul(big_a, big_b, out=big_c)

    def copies(n):
        for _ in range(n):
            dst.copy_(src)

    def mlp_pass():
        for _ in range(32):
            torch.matmul(x, w_up, out=up)
            gate, val = up.chunk(2, dim=-1)
            torch.matmul(torch.nn.functional.silu(gate) * val, w_down, out=down)

    for work in (lambda: gemms(3), lambda: copies(3), mlp_pass):  # warm-up: handles, kernels picked
        work()
    torch.cuda.synchronize()

    phases = []

    def phase(name, seconds, units, gap_s=None):
        """Run ``units`` (a list of (label, work)) round-robin for ``seconds``; ``gap_s``: after each
        unit, synchronize and stay idle that long (None: back to back, the host kept at most ~64
        units ahead)."""
        time.sleep(2.0)
        torch.cuda.synchronize()
        origin = torch.cuda.Event(enable_timing=True)
        origin.record()
        origin.synchronize()
        t_origin = time.time()
        events, i = [], 0
        while time.time() - t_origin < seconds:
            label, work = units[i % len(units)]
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            work()
            e1.record()
            events.append((label, e0, e1))
            i += 1
            if gap_s is not None:
                e1.synchronize()
                time.sleep(gap_s)
            elif len(events) > 64:
                events[-64][2].synchronize()
        torch.cuda.synchronize()
        rows = [(label, origin.elapsed_time(e0) / 1e3, e0.elapsed_time(e1)) for label, e0, e1 in events]
        phases.append({"name": name, "t_origin_unix_s": t_origin, "gap_s": gap_s,
                       "units": [[label, round(s, 6), round(ms, 5)] for label, s, ms in rows]})
        print(f"{name}: {len(rows)} units in {time.time() - t_origin:.1f} s", flush=True)

    time.sleep(0.5)
    t0 = time.time()
    time.sleep(2.0)
    phases.append({"name": "idle", "t_origin_unix_s": t0, "gap_s": None, "units": []})
    phase("gemm", 8.0, [("gemm7", lambda: gemms(7))])
    for gap_ms, duty in ((30.0, 0.25), (10.0, 0.5), (3.3, 0.75)):
        phase(f"gemm-duty-{duty}", 4.0, [("gemm7", lambda: gemms(7))], gap_s=gap_ms / 1e3)
    phase("copy", 5.0, [("copy10", lambda: copies(10))])
    phase("mix", 5.0, [("gemm7", lambda: gemms(7)), ("copy10", lambda: copies(10))])
    phase("mlp", 6.0, [("mlp32", mlp_pass)])
    unit_s = 0.0
    last = phases[-1]["units"]
    if last:
        unit_s = sorted(u[2] for u in last[:20])[len(last[:20]) // 2] / 1e3
    phase("mlp-duty-0.5", 4.0, [("mlp32", mlp_pass)], gap_s=unit_s)
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "phases": phases,
           "bytes_per_copy": 2 * src.numel() * src.element_size(), "flop_per_gemm": 2 * 8192 ** 3,
           "flop_per_mlp32": 32 * 2 * 768 * 4096 * (28672 + 14336)}
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
