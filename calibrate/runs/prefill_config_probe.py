"""Do the serving loop's prefill graphs run slower with more slots, or only under load? (device
call 96, calibrate/runs/h200-call96.sh)

llama-3.1-8b's prefill graphs ran 4-6% slower per token bucket with 256 slots of 512 rows than with
64 slots of 1,280 rows (calls 91-95, on H200s and H100s: bucket 1,024 29.7 ms vs 28.3 on call 95's
H100), and 1-2% slower again at 250 req/s than at 150; the clock the 5 ms sampler read during the
passes did not follow (call 95). This times the same graphs outside a run, per configuration:

    python3 calibrate/runs/prefill_config_probe.py OUT.json MODEL:SLOTS:ROWS ...

For each configuration (a fresh ServingSession: weights, cache, graphs captured as a run's) and
each prefill bucket of 256, 512, 1,024 and 2,048 tokens (filled exactly by prompts of 256 tokens
in slots 0, 1, ...: every configuration holds them), three timings, as a run times its passes (device_s):

- ``cool``: 12 passes, each after 60 ms idle;
- ``hot``: 30 passes back to back, the last 20;
- ``loaded``: 30 times a decode step of every slot (positions spread over the cache as the device
  probe's), then the pass, the last 20: the loop's iterations under load.

The medians go into OUT.json (rewritten after every configuration), with each phase's start and
end as Unix times to line up with calibrate/runs/power_sampler.py's file.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BUCKETS = (256, 512, 1024, 2048)


def main() -> None:
    import torch

    from calibrate.serving_job import ServingSession
    from calibrate.serving_loop import probe_positions

    out = Path(sys.argv[1])
    results = {"gpu": torch.cuda.get_device_name(0), "configs": []}
    for spec in sys.argv[2:]:
        model, slots, rows = spec.split(":")
        slots, rows = int(slots), int(rows)
        session = ServingSession(model, "cuda", max_num_seqs=slots, max_model_len=rows, progress=lambda m: None)
        ex = session.executor
        decode_tokens, decode_positions = [1] * slots, probe_positions(slots, rows)
        entry = {"model": model, "slots": slots, "rows": rows, "times": session.times, "buckets": {}}
        for bucket in BUCKETS:
            if bucket > session.max_num_batched_tokens:
                continue
            items = [(slot, [7] * 256, 0) for slot in range(bucket // 256)]  # prompts of 256 tokens
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
        torch.cuda.empty_cache()
        time.sleep(1.0)


if __name__ == "__main__":
    main()
