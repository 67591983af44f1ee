"""Device call 87's probe: what the serving runs' decode steps pay that call 86's back-to-back replay
of the same decode graph does not (qwen2.5-1.5b and -7b at 1,280 cache rows: the runs' steps cost
7.5-15.6 us a layer more than the engine's price from four sequences on, call 86's replay within
0.8 us of the engine's graph).

    python3 calibrate/runs/loop_decode_variants.py OUT.json MODEL[,MODEL...] [--len 1280]
        [--buckets 1,4,16,32] [--device cuda]

Per model, the loop's executor (calibrate.serving_loop.ModelExecutor, 64 slots, decode graphs only)
and each bucket, the median device time of one decode step, five ways:

* ``replay``: the graph replayed back to back, every slot at position LEN - 280, the cache as
  allocated (zeros) -- call 86's figure;
* ``positions``: the same with each slot at its own position (uniform in 1 .. LEN - 1, seeded);
* ``cache``: every slot at LEN - 280, the cache filled with random values (as a server's holds K/V);
* ``both``: own positions and a random cache;
* ``served``: own positions, random cache, one step at a time as the server runs it
  (ModelExecutor.decode: the inputs staged from the host, the replay between two CUDA events, the
  host waiting for the tokens), with GAP_S of host sleep between steps -- the device time the
  serving runs record.

OUT.json is rewritten after every model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "calibrate" / "runs"))

from loop_decode import REPS, timed  # noqa: E402

GAP_S = 100e-6


def main() -> None:
    import torch

    from calibrate.configs import load_model_config
    from calibrate.serving_loop import ModelExecutor, decode_slots
    from calibrate.timing import environment, free_memory, torch_device

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("models")
    ap.add_argument("--len", type=int, default=1280)
    ap.add_argument("--buckets", default="1,4,16,32")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    out = Path(a.out)
    dev = torch_device(a.device)
    buckets = [int(x) for x in a.buckets.split(",")]
    result = {"probe": "loop-decode-variants", "environment": environment(dev), "method": __doc__, "len": a.len,
              "gap_s": GAP_S, "points": [], "errors": []}
    t0 = time.perf_counter()
    same = a.len - 280
    for model in a.models.split(","):
        try:
            free_memory()
            ex = ModelExecutor(load_model_config(model), device=str(dev), max_num_seqs=64, max_model_len=a.len,
                               prefill_graphs=False, chunk_graphs=False)
            b = ex.bufs
            b.inp[0].fill_(1)
            b.inp[1].fill_(same)
            ex.capture()
            gen = torch.Generator(device=dev).manual_seed(7)
            own = torch.randint(1, a.len, (64,), device=dev, generator=gen)
            rows = {}  # the cache starts as zeros (ModelExecutor allocates it so)

            def step(bucket: int):
                graph = ex.graphs.get(bucket)
                return graph.replay if graph is not None else (lambda: decode_slots(ex.weights, ex.shapes, b, bucket))

            def set_positions(varied: bool) -> None:
                if varied:
                    b.inp[1].copy_(own)
                else:
                    b.inp[1].fill_(same)

            with torch.inference_mode():
                for bucket in buckets:
                    rows.setdefault(bucket, {})
                    set_positions(False)
                    rows[bucket]["replay"] = timed(step(bucket), dev, REPS)
                    set_positions(True)
                    rows[bucket]["positions"] = timed(step(bucket), dev, REPS)
                b.cache_k.normal_(generator=gen)
                b.cache_v.normal_(generator=gen)
                for bucket in buckets:
                    set_positions(False)
                    rows[bucket]["cache"] = timed(step(bucket), dev, REPS)
                    set_positions(True)
                    rows[bucket]["both"] = timed(step(bucket), dev, REPS)
            for bucket in buckets:
                tokens = [1] * bucket
                positions = own[:bucket].tolist()
                seconds = []
                for _ in range(REPS + 5):
                    _, s = ex.decode(tokens, positions)
                    seconds.append(s)
                    end = time.perf_counter() + GAP_S
                    while time.perf_counter() < end:
                        pass
                rows[bucket]["served"] = statistics.median(seconds[5:])
            for bucket, r in rows.items():
                result["points"].append({"model": model, "bucket": bucket, "len": a.len, **r})
            del ex, b
        except Exception as exc:  # noqa: BLE001 - record and go on
            result["errors"].append({"model": model, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        result["wall_s"] = round(time.perf_counter() - t0, 1)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, separators=(",", ":")))
        tmp.replace(out)
        print(f"{model} done at {result['wall_s']} s", flush=True)


if __name__ == "__main__":
    main()
