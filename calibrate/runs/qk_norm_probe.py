"""What do q/k norms cost inside the loop's prefill graph? (device call 120, the thirty-fifth session)

The price counts the kernels a layer of the loop's prefill launches (roofline.pass_costs.
loop_elementwise_launches) at a fixed time each measured from kernel sums (``prefill_launch_s``,
~2.1 us on the H100: calibrate/runs/prefill_kernel_walk.py, calls 110, 112, 117); q/k norms are
four of them a layer (q and k each copied to contiguous rows, then normed). This times the graph
itself with and without them: a q/k-norm model's prefill graph as a run replays it (``qk-norm``)
against the same graph captured with its q/k norms left out (``no-qk-norm``), in one process, the
passes interleaved A, B, B, A (calibrate/runs/kv_repeat_probe.py's timing, ``time_buckets``):

    python3 calibrate/runs/qk_norm_probe.py OUT.json MODEL:SLOTS:ROWS ...

The two compute different passes, so their tokens are not compared. Per bucket the medians and the
paired difference go into OUT.json with the norms' elements a token a layer
(``extra_elements_per_token_layer``: the copies and the norms each read and write q and k, 4 x (q +
kv)), so that roofline.pass_costs.kv_repeat_line gives the line's intercept: the four kernels'
fixed time in the graph, launches and the gaps between them. A model without q/k norms is
recorded as skipped. PROBE_DEVICE=cpu is a smoke run on a tiny model:
``PROBE_DEVICE=cpu python3 calibrate/runs/qk_norm_probe.py /tmp/q.json tiny-qwen3:4:160`` (a
model whose config has q/k norms).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "calibrate" / "runs"))

from kv_repeat_probe import graphs_of, open_session, run_models, time_buckets, variants  # noqa: E402

NAMES = ("qk-norm", "no-qk-norm")


def norm_elements(ex) -> float:
    """Elements the q/k norms' kernels read and write a token a layer: two copies and two norms,
    each reading and writing q and k (4 x (q + kv))."""
    s = ex.shapes
    return 4.0 * (s.heads + s.kv_heads) * s.head_dim


def without_norms(ex, fn, bare):
    """``fn`` (an eager body) run with ``ex.shapes`` = ``bare`` (no q/k norms), then restored."""
    def call():
        kept = ex.shapes
        ex.shapes = bare
        try:
            return fn()
        finally:
            ex.shapes = kept
    return call


def probe_model(spec: str, device: str) -> dict:
    model, slots, rows, session = open_session(spec, device)
    ex = session.executor
    if not ex.shapes.qk_norm:
        session.executor = None
        return {"model": model, "skipped": "no q/k norms"}
    shipped = variants(ex)[0]  # the body a run replays
    graphs = {NAMES[0]: graphs_of(ex, shipped)}
    kept, bare = ex.shapes, dataclasses.replace(ex.shapes, qk_norm=False)
    ex.shapes = bare  # a CUDA graph keeps the kernels its capture launched
    try:
        graphs[NAMES[1]] = graphs_of(ex, shipped)
    finally:
        ex.shapes = kept
    if ex.device.type != "cuda":  # the CPU's "graphs" run the body when called: without the norms then too
        graphs[NAMES[1]] = {b: without_norms(ex, fn, bare) for b, fn in graphs[NAMES[1]].items()}
    entry = {"model": model, "slots": slots, "rows": rows, "layers": ex.shapes.layers, "variants": list(NAMES),
             "extra_elements_per_token_layer": norm_elements(ex), "times": session.times,
             "buckets": time_buckets(session, model, NAMES, graphs, rows, same_math=False)}
    session.executor = None
    return entry


def main() -> None:
    run_models(probe_model, sys.argv[1:])


if __name__ == "__main__":
    main()
