"""Do the serving loop's prefill graphs run slower with more slots, or only under load? (device
call 96, calibrate/runs/h200-call96.sh)

llama-3.1-8b's prefill graphs ran 4-6% slower per token bucket with 256 slots of 512 rows than with
64 slots of 1,280 rows (calls 91-95, on H200s and H100s: bucket 1,024 29.7 ms vs 28.3 on call 95's
H100), and 1-2% slower again at 250 req/s than at 150; the clock the 5 ms sampler read during the
passes did not follow (call 95). This times the same graphs outside a run, per configuration:

    python3 calibrate/runs/prefill_config_probe.py OUT.json MODEL:SLOTS:ROWS[:LAYOUT[:TOKENS]] ...

For each configuration (a fresh ServingSession: weights, cache, graphs captured as a run's) and
each prefill bucket of 256, 512, 1,024 and 2,048 tokens, a pass laid out as LAYOUT says (``prompts``
records each bucket's prompt lengths):

- ``256`` (the default, and calls 96-99's): prompts of 256 tokens in slots 0, 1, ... filling the
  bucket exactly (little attention: every configuration holds them);
- ``one``: one prompt of 7/8 of the bucket (a run's lone prompt, the padding an eighth: the most
  attention a pass of the bucket has); a bucket whose prompt does not fit the rows is skipped;

of TOKENS ``const`` (the default, and calls 96-99's: every token id 7) or ``random`` (ids drawn
uniformly from the vocabulary, seeded: a run's prompts; a GPU's power, and so its clock under the
cap, depends on the values its matmuls multiply). Three timings, as a run times its passes (device_s):

- ``cool``: 12 passes, each after 60 ms idle;
- ``hot``: 30 passes back to back, the last 20;
- ``loaded``: 30 times a decode step of every slot (positions spread over the cache as the device
  probe's), then the pass, the last 20: the loop's iterations under load.

PROBE_DEVICE=cpu runs it on the CPU (a smoke run: ``PROBE_DEVICE=cpu python3
calibrate/runs/prefill_config_probe.py /tmp/p.json tiny-qwen2:8:2304:one:random``). The medians go into OUT.json (rewritten after every configuration), with each phase's start and
end as Unix times to line up with calibrate/runs/power_sampler.py's file.
"""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BUCKETS = (256, 512, 1024, 2048)
LAYOUTS = ("256", "one")
TOKENS = ("const", "random")


def prompt_lengths(layout: str, bucket: int, rows: int, slots: int) -> list[int]:
    """The prompts of a ``bucket``-token pass laid out as ``layout`` (module docstring), or [] where
    they do not fit ``rows`` cache rows a slot or ``slots`` slots."""
    if layout == "256":
        lengths = [256] * (bucket // 256)
    else:
        lengths = [bucket * 7 // 8]
    return lengths if len(lengths) <= slots and max(lengths) < rows else []


def main() -> None:
    import torch

    from calibrate.serving_job import ServingSession
    from calibrate.serving_loop import probe_positions

    out = Path(sys.argv[1])
    device = os.environ.get("PROBE_DEVICE", "cuda")  # "cpu": a smoke run with a tiny model
    results = {"gpu": torch.cuda.get_device_name(0) if device == "cuda" else device, "configs": []}
    for spec in sys.argv[2:]:
        model, slots, rows, *rest = spec.split(":")
        layout, tokens = (rest + ["256", "const"][len(rest):])[:2]
        if layout not in LAYOUTS or tokens not in TOKENS:
            raise SystemExit(f"{spec}: LAYOUT is one of {', '.join(LAYOUTS)}, TOKENS one of {', '.join(TOKENS)}")
        slots, rows = int(slots), int(rows)
        session = ServingSession(model, device, max_num_seqs=slots, max_model_len=rows, progress=lambda m: None)
        ex = session.executor
        vocab = int(session.model_config["vocab_size"])
        gen = random.Random(f"{model}:{layout}")  # the same prompts at every slot count
        decode_tokens, decode_positions = [1] * slots, probe_positions(slots, rows)
        entry = {"model": model, "slots": slots, "rows": rows, "layout": layout, "tokens": tokens,
                 "times": session.times, "prompts": {}, "buckets": {}}
        for bucket in BUCKETS:
            lengths = prompt_lengths(layout, bucket, rows, slots)
            if bucket > session.max_num_batched_tokens or not lengths:
                continue
            items = [(slot, [gen.randrange(vocab) for _ in range(n)] if tokens == "random" else [7] * n, 0)
                     for slot, n in enumerate(lengths)]
            entry["prompts"][str(bucket)] = lengths
            t0 = time.time()
            cool = []
            for _ in range(12):
                time.sleep(0.06)
                cool.append(ex.prefill(items)[1])
            t1 = time.time()
            hot = [ex.prefill(items)[1] for _ in range(30)][10:]
            t2 = time.time()
            loaded, decode = [], []
            for _ in range(30):
                decode.append(ex.decode(decode_tokens, decode_positions)[1])
                loaded.append(ex.prefill(items)[1])
            t3 = time.time()
            by = {"cool_s": statistics.median(cool), "hot_s": statistics.median(hot),
                  "loaded_s": statistics.median(loaded[10:]), "decode_s": statistics.median(decode[10:]),
                  "unix_s": [t0, t1, t2, t3]}
            entry["buckets"][str(bucket)] = by
            print(f"{model} {slots}x{rows} bucket {bucket}: cool {by['cool_s'] * 1e3:.2f} ms, hot "
                  f"{by['hot_s'] * 1e3:.2f}, loaded {by['loaded_s'] * 1e3:.2f} (decode {by['decode_s'] * 1e3:.2f})",
                  flush=True)
        results["configs"].append(entry)
        tmp = str(out) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, out)
        del ex, session
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        time.sleep(1.0)


if __name__ == "__main__":
    main()
