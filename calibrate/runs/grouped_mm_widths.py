"""Device call 70's probe: torch._grouped_mm (the graph engine's expert matmuls,
calibrate.graph_engine.expert_mm) at one expert shape family with the inner width K and the output
width N stepped around gpt-oss's 2,880, which is not a multiple of the small-tile path's 128-wide
K tile (PyTorch's GroupMM.cu: tiles 64 x 128 x 128 below 129 rows an expert). Question: does a K or
N that is not a multiple of 128 cost more than its padding to the next multiple (2,880 -> 2,944:
2.2%)? 32 experts, top 4, routed rows from random logits; the calls over copies of the weights
(beyond the 50 MB L2) in one CUDA graph, as calibrate.probes times every probe.

    python3 calibrate/runs/grouped_mm_widths.py OUT.json [budget seconds]

Writes OUT.json after every point: {"points": [{"experts", "top_k", "n", "k", "tokens", "rows",
"touched", "seconds", "weight_bytes_touched"}], ...}. Not used by the model.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EXPERTS, TOP_K = 32, 4
#: (N, K) of one grouped matmul: K stepped at N = 5,760 (gpt-oss's gate_up), N stepped at K = 2,816
#: and 2,880 (its down: N = K = 2,880), and two multiples of 128 either side
SHAPES = ([(5760, k) for k in (2560, 2688, 2752, 2816, 2880, 2944, 3008, 3072)]
          + [(n, 2816) for n in (2816, 2880, 2944)] + [(n, 2880) for n in (2816, 2880, 2944)]
          + [(n, 2048) for n in (1536, 2048)] + [(5760, 2048), (5760, 4096)])
TOKENS = (1, 4, 16, 64, 256)
MIN_COPY_BYTES = 600 * 2**20  # copies of the weights until a pass reads this many bytes (L2: 50 MB)


def main() -> None:
    import torch

    from calibrate.probes import _time_calls
    from calibrate.timing import environment

    out = Path(sys.argv[1])
    budget_s = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    dev = torch.device("cuda")
    result = {"probe": "grouped-mm-widths", "environment": environment(dev), "experts": EXPERTS, "top_k": TOP_K,
              "method": __doc__.split("\n\n")[0], "points": [], "stopped": None}
    t0 = time.monotonic()
    gen = torch.Generator(device=dev).manual_seed(0)
    for n, k in SHAPES:
        one = EXPERTS * n * k * 2
        copies = max(2, -(-MIN_COPY_BYTES // one))
        ws = [torch.randn(EXPERTS, n, k, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(copies)]
        for tokens in TOKENS:
            if time.monotonic() - t0 > budget_s:
                result["stopped"] = f"budget at N {n} K {k} T {tokens}"
                out.write_text(json.dumps(result, indent=1))
                return
            logits = torch.randn(tokens, EXPERTS, device=dev, generator=gen)
            idx = torch.topk(logits, TOP_K, dim=-1)[1].reshape(-1)
            counts = torch.bincount(idx, minlength=EXPERTS)
            offs = torch.cumsum(counts, 0).to(torch.int32)
            x = torch.randn(tokens * TOP_K, k, device=dev, dtype=torch.bfloat16, generator=gen)
            with torch.inference_mode():
                fns = [lambda w=w: torch._grouped_mm(x, w.transpose(1, 2), offs=offs) for w in ws]
                seconds, info = _time_calls(fns, dev, 20)
            touched = int((counts > 0).sum())
            result["points"].append({"experts": EXPERTS, "top_k": TOP_K, "n": n, "k": k, "tokens": tokens,
                                     "rows": tokens * TOP_K, "touched": touched, "seconds": seconds,
                                     "weight_bytes_touched": touched * n * k * 2, "graph": info["graph"]})
            print(f"N {n:5d} K {k:5d} T {tokens:4d} touched {touched:3d} {seconds * 1e6:8.1f} us "
                  f"{touched * n * k * 2 / seconds / 1e12:5.2f} TB/s", flush=True)
        del ws
        torch.cuda.empty_cache()
        out.write_text(json.dumps(result, indent=1))
    result["wall_s"] = time.monotonic() - t0
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
