"""Device call 78's probe: the decode step's dense matmul (F.linear, with and without a bias, as the
graph engine's linears run) at few rows, with the inner width K or the output width N stepped by 64
around generic multiples of 128. Question: does a width that is an odd multiple of 64 (not of 128)
cost more than its bytes say, at decode's 1-64 rows? gpt-oss-20b (hidden 2,880 = 45 x 64) is priced
7-9% fast at batch 1 at every length, its attention GEMMs measuring 27 us a layer against about 15
priced (the kernels probe, device call 74); falcon-7b (hidden 4,544 = 71 x 64) is the only other
catalog model with such a width. The widths here are no catalog model's. Calls over copies of W (beyond
the 50 MB L2) in one CUDA graph, as calibrate.probes times the gemm probe.

    python3 calibrate/runs/linear_alignment.py OUT.json [budget seconds]

Writes OUT.json after every shape: {"points": [{"m", "n", "k", "bias", "seconds", "weight_bytes"}], ...}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

#: widths around generic bases: B - 128, B - 64, B, B + 64, B + 128 (B - 64 and B + 64 odd multiples of 64)
WIDTHS = tuple(b + d for b in (2048, 3072, 4608, 6144) for d in (-128, -64, 0, 64, 128))
#: (N, K) pairs: K stepped at N = 4,096 and N stepped at K = 4,096, both with and without a bias
SHAPES = tuple((4096, k) for k in WIDTHS) + tuple((n, 4096) for n in WIDTHS if n != 4096)
MS = (1, 2, 4, 8, 16, 64)
MIN_COPY_BYTES = 400 * 2**20  # copies of W until a replay reads this many bytes (L2: 50 MB)


def main() -> None:
    import torch
    import torch.nn.functional as F

    from calibrate.probes import _time_calls
    from calibrate.timing import environment

    out = Path(sys.argv[1])
    budget_s = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    dev = torch.device("cuda")
    result = {"probe": "linear-alignment", "environment": environment(dev), "method": __doc__.split("\n\n")[0],
              "points": [], "stopped": None}
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    bf16 = torch.bfloat16
    with torch.inference_mode():
        for n, k in SHAPES:
            copies = max(2, -(-MIN_COPY_BYTES // (n * k * 2)))
            ws = [torch.randn(n, k, device=dev, dtype=bf16, generator=gen) for _ in range(copies)]
            bs = [torch.randn(n, device=dev, dtype=bf16, generator=gen) for _ in range(copies)]
            for m in MS:
                if time.monotonic() - t0 > budget_s:
                    result["stopped"] = f"budget at N {n} K {k} M {m}"
                    out.write_text(json.dumps(result))
                    return
                x = torch.randn(m, k, device=dev, dtype=bf16, generator=gen)
                for bias in (False, True):
                    fns = ([lambda w=w, b=b: F.linear(x, w, b) for w, b in zip(ws, bs)] if bias
                           else [lambda w=w: F.linear(x, w) for w in ws])
                    seconds, info = _time_calls(fns, dev, 20)
                    result["points"].append({"m": m, "n": n, "k": k, "bias": bias, "seconds": seconds,
                                             "weight_bytes": n * k * 2, "graph": info["graph"]})
                    print(f"N {n:5d} K {k:5d} M {m:3d} bias {int(bias)} {seconds * 1e6:7.2f} us "
                          f"{n * k * 2 / seconds / 1e12:5.2f} TB/s", flush=True)
            del ws, bs
            torch.cuda.empty_cache()
            out.write_text(json.dumps(result))
    result["wall_s"] = time.monotonic() - t0
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
