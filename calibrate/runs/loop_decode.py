"""Device call 86's probe: the serving loop's decode graph against the graph engine's, at the same
model, batch and cache length (evidence for the loop's decode extra: the committed runs' decode
steps ran 0.94-0.98x their price at buckets 1-2 and 1.01-1.04x at 24-32, on every model).

    python3 calibrate/runs/loop_decode.py OUT.json MODEL[,MODEL...] [--len 1280]
        [--buckets 1,2,4,8,16,24,32,48,64] [--profile MODEL:BUCKET,...] [--device cuda] [--budget-s 400]

Per model: the loop's executor (calibrate.serving_loop.ModelExecutor, 64 slots of LEN cache rows,
decode graphs only, every slot at position LEN - 280) and the graph engine
(calibrate.graph_engine.GraphEngine, a fresh static cache of LEN positions per batch, position
LEN - 280): each decode graph replayed REPS times, each replay between two CUDA events, the median.
Each --profile point: both decode steps run eagerly (the graphs' kernels, launched from Python) under
torch.profiler, REPS_PROFILE times: every kernel's name (shortened), launches and device time per
step. OUT.json is rewritten after every model.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

REPS, REPS_PROFILE, WARM = 60, 10, 5


def short(name: str) -> str:
    name = name.replace("void ", "").replace("at::native::", "").replace("(anonymous namespace)::", "")
    return re.sub(r"<.*", "", name)[:80]


def timed(fn, dev, reps: int) -> float:
    """Median seconds of ``fn`` (a graph replay, or an eager step on the CPU) over ``reps`` calls."""
    import torch

    for _ in range(WARM):
        fn()
    if dev.type != "cuda":
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)
    torch.cuda.synchronize(dev)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in pairs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize(dev)
    return statistics.median(a.elapsed_time(b) * 1e-3 for a, b in pairs)


def kernels_of(fn, dev, reps: int) -> list:
    """[name, launches a step, device seconds a step] of ``fn``'s kernels, longest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize(dev)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize(dev)
    cells: dict = {}
    for ev in prof.events():
        if ev.device_type.name != "CUDA":
            continue
        cell = cells.setdefault(short(ev.name), [0, 0.0])
        cell[0] += 1
        cell[1] += ev.device_time * 1e-6
    return sorted(([k, n / reps, round(s / reps, 9)] for k, (n, s) in cells.items()), key=lambda x: -x[2])


def main() -> None:
    import torch

    from calibrate.configs import load_model_config
    from calibrate.graph_engine import GraphEngine, decode_step
    from calibrate.serving_loop import ModelExecutor, decode_slots
    from calibrate.timing import environment, free_memory, torch_device

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("models")
    ap.add_argument("--len", type=int, default=1280)
    ap.add_argument("--buckets", default="1,2,4,8,16,24,32,48,64")
    ap.add_argument("--profile", default="")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=400.0)
    a = ap.parse_args()
    out = Path(a.out)
    dev = torch_device(a.device)
    buckets = [int(x) for x in a.buckets.split(",")]
    profile_at = {(p.split(":")[0], int(p.split(":")[1])) for p in a.profile.split(",") if p}
    result = {"probe": "loop-decode", "environment": environment(dev), "method": __doc__, "len": a.len,
              "points": [], "profiles": [], "errors": []}
    t0 = time.perf_counter()
    position = a.len - 280
    for model in a.models.split(","):
        if time.perf_counter() - t0 > a.budget_s:
            result["errors"].append({"model": model, "error": "skipped: out of budget"})
            continue
        try:
            free_memory()
            config = load_model_config(model)
            ex = ModelExecutor(config, device=str(dev), max_num_seqs=max(buckets), max_model_len=a.len,
                               prefill_graphs=False, chunk_graphs=False)
            b = ex.bufs
            b.inp[0].fill_(1)
            b.inp[1].fill_(position)
            ex.capture()
            loop = {}
            with torch.inference_mode():
                for bucket in buckets:
                    fn = ex.graphs[bucket].replay if bucket in ex.graphs else (
                        lambda k=bucket: decode_slots(ex.weights, ex.shapes, b, k))
                    loop[bucket] = timed(fn, dev, REPS)
                    if (model, bucket) in profile_at and dev.type == "cuda":
                        result["profiles"].append({"model": model, "bucket": bucket, "which": "loop",
                                                   "kernels": kernels_of(lambda k=bucket: decode_slots(
                                                       ex.weights, ex.shapes, b, k), dev, REPS_PROFILE)})
            del ex, b
            free_memory()
            eng = GraphEngine(config, device=str(dev))
            for bucket in buckets:
                st = eng.new_state(bucket, a.len)
                st.pos.fill_(position)
                with torch.inference_mode():
                    replay = eng._capture(st, position)
                    st.pos.fill_(position)
                    engine_s = timed(replay, dev, REPS)
                    if (model, bucket) in profile_at and dev.type == "cuda":
                        result["profiles"].append({"model": model, "bucket": bucket, "which": "engine",
                                                   "kernels": kernels_of(lambda s=st: decode_step(
                                                       eng.weights, eng.shapes, s), dev, REPS_PROFILE)})
                result["points"].append({"model": model, "bucket": bucket, "len": a.len,
                                         "loop_s": loop[bucket], "engine_s": engine_s})
                eng._graph = None
                del st, replay
            del eng
        except Exception as exc:  # noqa: BLE001 - record and go on
            result["errors"].append({"model": model, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        result["wall_s"] = round(time.perf_counter() - t0, 1)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, separators=(",", ":")))
        tmp.replace(out)
        print(f"{model} done at {result['wall_s']} s", flush=True)


if __name__ == "__main__":
    main()
