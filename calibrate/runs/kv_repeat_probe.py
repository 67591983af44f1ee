"""What do the K/V repeats cost inside the loop's prefill graph? (device call 107,
calibrate/runs/h200-call107.sh)

The loop's whole-prompt prefill (``ModelExecutor._forward``) repeats K and V to every query head
before its varlen attention when the model has grouped queries: two copy kernels a layer that a
full multi-head model does not run. The price counts their bytes (``roofline.pass_costs.
loop_elementwise_elements``) but its fixed time a layer (``prefill_floor_s_per_layer``) was fitted
on two grouped-query models, so it carries the repeats' launches into full-attention models too;
those ran 0.92-0.95x their price at 128-256-token buckets (benchmarks/prefill_ratio_by_bucket.py).
This times the same prefill graph with and without the two kernels, in the same process, the
passes interleaved (A, B, B, A, ...) so that clock drift falls on both:

    python3 calibrate/runs/kv_repeat_probe.py OUT.json MODEL:SLOTS:ROWS ...

- a grouped-query model: ``repeated`` (the graph a run replays) against ``native`` (K/V heads as
  stored, the varlen kernel's own grouped-query support, with ``enable_gqa`` where its signature
  has one: what the chunk graphs already use, ``chunk_graph_kv_heads: native`` in every run);
- a full multi-head model: ``plain`` (the graph a run replays: no repeats) against ``copies`` (K
  and V each copied once before the attention, where the repeats would be: the same kind of
  kernel at the model's own K/V width).

Every pass is a lone prompt of 7/8 of its token bucket (a run's most common prefill), random token
ids, seeded; both variants' next tokens are checked equal. Per bucket the medians of each variant
and of the paired differences go into OUT.json (rewritten after every model), with the extra
kernels' elements a token a layer (``extra_elements_per_token_layer``) so that
benchmarks/kv_repeat_fixed_time.py can take their bytes off and leave their fixed time.

PROBE_DEVICE=cpu runs every variant's body eagerly on a tiny model (a smoke run; no timing worth
reading): ``PROBE_DEVICE=cpu python3 calibrate/runs/kv_repeat_probe.py /tmp/k.json tiny-qwen2:4:96``.
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

BUCKETS = (64, 128, 256, 512, 1024, 2048)
WARM, ROUNDS = 8, 24


def cpu_varlen(q, k, v, cu_q, cu_k, max_q: int, max_k: int, enable_gqa: bool = False):
    """The varlen kernel's whole-prompt case on the CPU (cu_q == cu_k): one causal SDPA call a
    sequence, K/V heads fewer than Q's with ``enable_gqa``."""
    import torch
    import torch.nn.functional as F

    out = torch.zeros_like(q)
    bounds = [int(x) for x in cu_q]
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            qi, ki, vi = (t[a:b].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
            out[a:b] = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True,
                                                      enable_gqa=enable_gqa)[0].transpose(0, 1)
    return out


def variants(ex) -> tuple[str, str]:
    """(the graph a run replays, the other) for ``ex``'s model (module docstring)."""
    grouped = ex.shapes.heads > ex.shapes.kv_heads
    return ("repeated", "native") if grouped else ("plain", "copies")


def extra_elements(ex) -> float:
    """Elements the two extra kernels read and write a token a layer (the variant with them minus
    the one without): repeats read the K/V width and write the query width, each of K and V
    (2 x (kv + q)), and the attention then reads the repeated width instead (+ 2 x (q - kv));
    copies read and write the K/V width, each of K and V (4 kv)."""
    s = ex.shapes
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    return 2.0 * (kv + q) + 2.0 * (q - kv) if s.heads > s.kv_heads else 4.0 * kv


def body_of(ex, variant: str):
    """The prefill graph body (``ModelExecutor._prefill_graph_body``'s) of ``variant``."""
    if variant in ("repeated", "plain"):
        return type(ex)._prefill_graph_body.__get__(ex)
    import torch

    top, _ = ex._pf_layout

    def body(bucket: int) -> None:
        f, row = ex._pf_fields(), ex._pf_dev
        cu = row[f["cu"]].to(torch.int32)
        if variant == "native":
            def attend(q, k, v, layer):
                return ex._varlen(q, k, v, cu, cu, bucket, bucket, **ex._varlen_kw, **ex._gqa_kw)
            expand = False
        else:  # copies
            def attend(q, k, v, layer):
                return ex._varlen_attention(q, k.clone(), v.clone(), cu, bucket)
            expand = True
        out = ex._forward(row[:bucket], row[top:top + bucket], row[2 * top:2 * top + bucket], row[f["last"]],
                          attend, expand_gqa=expand)
        ex._pf_out.copy_(out)
    return body


def graphs_of(ex, variant: str) -> dict:
    """``variant``'s prefill graphs, one per bucket (on the CPU: the body itself, called eagerly)."""
    body = body_of(ex, variant)
    if ex.device.type != "cuda":
        return {b: (lambda b=b: body(b)) for b in ex.prefill_buckets}
    import torch

    ex.prefill_graph_of = {}
    ex._prefill_graph_body = body
    try:
        with torch.inference_mode():
            ex._capture_prefill(torch.cuda.graph_pool_handle())
    finally:
        del ex._prefill_graph_body
    return ex.prefill_graph_of


def open_session(spec: str, device: str):
    """(model, slots, rows, a ServingSession) for ``MODEL:SLOTS:ROWS``, its prefill graphs captured
    as a run's; on the CPU (whose executor prefills eagerly) given the graph path's buffers and
    ``cpu_varlen`` in place of the varlen kernel."""
    from calibrate.serving_job import ServingSession

    model, slots, rows = spec.rsplit(":", 2)
    slots, rows = int(slots), int(rows)
    session = ServingSession(model, device, max_num_seqs=slots, max_model_len=rows, progress=lambda m: None,
                             prefill_graphs=True)
    ex = session.executor
    if ex.device.type != "cuda":
        ex._prefill_buffers()
        ex._varlen, ex._varlen_kw, ex._gqa_kw = cpu_varlen, {}, {"enable_gqa": True}
        ex._varlen_attention = lambda q, k, v, cu, max_len: cpu_varlen(q, k, v, cu, cu, max_len, max_len)
    return model, slots, rows, session


def probe_model(spec: str, device: str) -> dict:
    model, slots, rows, session = open_session(spec, device)
    ex = session.executor
    names = variants(ex)
    try:  # the varlen kernel takes fewer K/V heads as they are (the chunk graphs' "native"), or says why not
        graphs = {v: graphs_of(ex, v) for v in names}
    except Exception as exc:  # noqa: BLE001 - recorded, and the next model goes on
        return {"model": model, "skipped": f"{type(exc).__name__}: {str(exc)[:300]}"}
    entry = {"model": model, "slots": slots, "rows": rows, "layers": ex.shapes.layers, "variants": list(names),
             "extra_elements_per_token_layer": extra_elements(ex), "times": session.times,
             "buckets": time_buckets(session, model, names, graphs, rows)}
    session.executor = None
    return entry


def time_buckets(session, model: str, names, graphs: dict, rows: int, same_math: bool = True) -> dict:
    """{bucket: medians of each variant's pass and of the paired differences} for the two
    ``names`` whose prefill graphs are ``graphs`` (module docstring: a lone prompt of 7/8 of each
    bucket, interleaved A, B, B, A); ``same_math``: the variants compute the same pass, so their
    next tokens are checked equal (else recorded as None). Clears the executor's graphs after."""
    ex = session.executor
    vocab = int(session.model_config["vocab_size"])
    gen = random.Random(model)
    out = {}

    def run(variant, items):
        ex.prefill_graph_of = graphs[variant]
        return ex.prefill(items)

    for bucket in BUCKETS:
        n = bucket * 7 // 8
        if bucket not in ex.prefill_buckets or n >= rows:
            continue
        items = [(0, [gen.randrange(vocab) for _ in range(n)], 0)]
        toks = {v: run(v, items)[0] for v in names}
        for _ in range(WARM):
            for v in names:
                run(v, items)
        times = {v: [] for v in names}
        t0 = time.time()
        for i in range(ROUNDS):
            for v in (names if i % 2 == 0 else names[::-1]):
                times[v].append(run(v, items)[1])
        diffs = [b - a for a, b in zip(times[names[0]], times[names[1]])]
        by = {"prompt": n, "same_tokens": toks[names[0]] == toks[names[1]] if same_math else None,
              **{f"{v}_s": statistics.median(times[v]) for v in names},
              "diff_s": statistics.median(diffs), "unix_s": [t0, time.time()]}
        out[str(bucket)] = by
        print(f"{model} bucket {bucket}: {names[0]} {by[names[0] + '_s'] * 1e3:.3f} ms, {names[1]} "
              f"{by[names[1] + '_s'] * 1e3:.3f} ms, paired diff {by['diff_s'] * 1e6:+.1f} us "
              f"({by['diff_s'] / ex.shapes.layers * 1e6:+.2f} us a layer), same tokens {by['same_tokens']}",
              flush=True)
    ex.prefill_graph_of = {}
    graphs.clear()
    return out


def run_models(probe, argv: list[str]) -> None:
    """``probe(spec, device)`` for each MODEL:SLOTS:ROWS of ``argv[1:]`` into OUT = ``argv[0]``,
    rewritten after every model; a model that fails is recorded (``skipped``) and the next goes on.
    PROBE_DEVICE=cpu: the CPU smoke run."""
    import torch

    out = Path(argv[0])
    device = os.environ.get("PROBE_DEVICE", "cuda")
    results = {"gpu": torch.cuda.get_device_name(0) if device == "cuda" else device, "models": []}
    for spec in argv[1:]:
        try:
            results["models"].append(probe(spec, device))
        except Exception as exc:  # noqa: BLE001 - recorded, and the next model goes on
            results["models"].append({"model": spec, "skipped": f"{type(exc).__name__}: {str(exc)[:300]}"})
            print(f"{spec}: {type(exc).__name__}: {exc}", flush=True)
        gc.collect()
        tmp = str(out) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, out)
        if device == "cuda":
            torch.cuda.empty_cache()
        time.sleep(1.0)


def main() -> None:
    run_models(probe_model, sys.argv[1:])


if __name__ == "__main__":
    main()
