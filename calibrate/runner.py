"""Decode sweeps: run one engine over models x batches, one CSV row per point, written atomically.

``run_calibration`` sweeps each model's batches in ascending order. After EVERY point the whole
CSV (``out_dir/measurements-<card>-<engine>.csv``) is rewritten atomically, so an interrupted run
keeps what it measured and ``resume=True`` continues where it stopped. Every decode step's time
goes to ``out_dir/steps-<card>-<engine>.jsonl`` (one JSON line per point, appended). The first
out-of-memory point of a model is recorded as a ``status=oom`` row; larger batches of that model
are skipped (they would run out of memory too) and the sweep goes on with the next model.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from roofline.errors import RooflineError
from roofline.measurements import MeasurementRow, read_measurements, write_measurements

ENGINES: dict[str, tuple[str, str]] = {
    "hf-eager": ("calibrate.hf_eager", "HFEagerEngine"),
    "graph": ("calibrate.graph_engine", "GraphEngine"),
}
DEFAULT_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
NO_GPU_MESSAGE = "no CUDA GPU found; use --device cpu with a tiny model to test the path"


def print_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measurements_path(out_dir: Path, card: str, engine: str) -> Path:
    return Path(out_dir) / f"measurements-{card}-{engine}.csv"


def steps_path(out_dir: Path, card: str, engine: str) -> Path:
    return Path(out_dir) / f"steps-{card}-{engine}.jsonl"


def append_steps(path: Path, row: MeasurementRow, result: dict) -> None:
    """One JSON line per point with every decode step's time (raw data behind the CSV's stats)."""
    record = {
        "card": row.card, "model": row.model, "engine": row.engine, "batch": row.batch,
        "prompt_tokens": row.prompt_tokens, "gen_tokens": row.gen_tokens, "timestamp": row.timestamp,
        "ttft_s": row.ttft_s,
        "step_s": [float(f"{t:.7g}") for t in result["step_s"]],
    }
    if result.get("host_step_s"):
        record["host_step_s"] = [float(f"{t:.7g}") for t in result["host_step_s"]]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def ceilings_path(out_dir: Path, card: str) -> Path:
    return Path(out_dir) / f"ceilings-{card}.json"


def write_json_atomic(path: Path, data: dict) -> Path:
    """JSON to ``path`` through a temp file in the same folder and os.replace."""
    import json

    from roofline.atomic import write_text_atomic

    return write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def load_engine(engine: str, config: dict, device: str, seed: int = 0):
    """Build the engine object (loads the model's random weights onto ``device``)."""
    import importlib

    module_name, class_name = ENGINES[engine]
    return getattr(importlib.import_module(module_name), class_name)(config, device=device, seed=seed)


def measure_point(engine_obj, batch: int, prompt_tokens: int, gen_tokens: int) -> dict:
    """One sweep point: {ttft_s, step_s: [...], e2e_s, peak_mem_gib, peak_reserved_gib}.

    The single seam the sweep goes through (tests replace it to simulate an OOM).
    """
    return engine_obj.measure(batch, prompt_tokens, gen_tokens)


def _check_args(models, engine, batches, prompt_tokens, gen_tokens) -> list[int]:
    if engine not in ENGINES:
        raise RooflineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if not models:
        raise RooflineError("no model given")
    if not batches:
        raise RooflineError("no batch size given")
    bad = [b for b in batches if int(b) != b or b <= 0]
    if bad:
        raise RooflineError(f"batch sizes must be positive integers, got {bad}")
    if prompt_tokens <= 0:
        raise RooflineError(f"prompt tokens must be > 0, got {prompt_tokens}")
    if gen_tokens < 2:
        raise RooflineError(f"gen tokens must be >= 2 (at least one decode step), got {gen_tokens}")
    return sorted({int(b) for b in batches})


def _point_row(card, model, engine_obj, prompt_tokens, gen_tokens, batch, result, env, extra) -> MeasurementRow:
    from calibrate.timing import step_stats, utc_now

    stats = step_stats(result["step_s"])
    reserved = result.get("peak_reserved_gib")
    return MeasurementRow(
        card=card, model=model, engine=engine_obj.name, kv_cache=engine_obj.kv_cache,
        prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, batch=batch,
        ttft_s=result["ttft_s"], peak_mem_gib=result.get("peak_mem_gib"), status="ok",
        e2e_s=result.get("e2e_s"), timestamp=utc_now(),
        gpu=env["gpu"], driver=env["driver"] or None, torch=env["torch"], transformers=env["transformers"],
        extra={**extra, "peak_reserved_gib": "" if reserved is None else repr(float(reserved)),
               "point_wall_s": repr(round(result["point_wall_s"], 3))},
        **stats,
    )


def _oom_row(card, model, engine, prompt_tokens, gen_tokens, batch, env, message) -> MeasurementRow:
    from calibrate.timing import utc_now

    kv_cache = {"hf-eager": "dynamic", "graph": "static"}[engine]
    return MeasurementRow(
        card=card, model=model, engine=engine, kv_cache=kv_cache,
        prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, batch=batch,
        ttft_s=None, tpot_s=None, peak_mem_gib=None, status="oom", timestamp=utc_now(),
        gpu=env["gpu"], driver=env["driver"] or None, torch=env["torch"], transformers=env["transformers"],
        extra={"oom_message": message.splitlines()[0][:200] if message else ""},
    )


def disable_cudnn_attention() -> None:
    """Turn off PyTorch's cuDNN SDPA backend. On Hopper with torch 2.11 it is chosen by default
    and builds a new plan for every KV length, which makes HF eager decode 3-5x slower than the
    lesson's engine (docs/calibration-runs.md); flash/memory-efficient SDPA is used instead."""
    import torch

    torch.backends.cuda.enable_cudnn_sdp(False)


def run_calibration(
    card: str,
    models: list[str],
    engine: str,
    batches: list[int],
    prompt_tokens: int,
    gen_tokens: int,
    out_dir: Path,
    device: str = "cuda",
    resume: bool = False,
    measure_ceilings: bool = True,
    progress: Callable[[str], None] = print_to_stderr,
    deadline: float | None = None,
    seed: int = 0,
) -> Path:
    """Measure ``engine`` on ``models`` x ``batches``; returns the measurements CSV path.

    ``deadline`` (a ``time.monotonic()`` value) stops the sweep cleanly before a point that would
    start after it; the CSV then holds every finished point and ``resume=True`` continues.
    """
    batches = _check_args(models, engine, batches, prompt_tokens, gen_tokens)
    try:
        import torch
    except ImportError:
        raise RooflineError("calibration needs torch and transformers (pip install torch transformers)") from None
    from calibrate.configs import load_model_config
    from calibrate.timing import environment, free_memory, is_oom, torch_device

    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise RooflineError(NO_GPU_MESSAGE)
    configs = {name: load_model_config(name) for name in models}  # fail fast on unknown names
    dev = torch_device(device)
    env = environment(dev)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = measurements_path(out_dir, card, engine)
    raw_path = steps_path(out_dir, card, engine)

    rows: list[MeasurementRow] = []
    if csv_path.exists():
        if resume:
            rows = read_measurements(csv_path)
            progress(f"resume: {len(rows)} row(s) already in {csv_path}")
        else:
            progress(f"{csv_path} exists; starting afresh (use resume to continue it)")
    if not resume and raw_path.exists():
        raw_path.unlink()

    if measure_ceilings:
        cpath = ceilings_path(out_dir, card)
        if resume and cpath.exists():
            progress(f"resume: ceilings already in {cpath}")
        else:
            from calibrate.ceilings import measure_ceilings as _measure

            t0 = time.monotonic()
            data = _measure(device, configs, batches, progress=progress)
            data["card"] = card
            data["wall_s"] = round(time.monotonic() - t0, 2)
            write_json_atomic(cpath, data)
            progress(f"ceilings written to {cpath} ({data['wall_s']:.1f} s)")
            free_memory()

    for model in models:
        same = [r for r in rows if r.key[:5] == (card, model, engine, prompt_tokens, gen_tokens)]
        done = {r.batch for r in same}
        oom_at = min((r.batch for r in same if not r.ok), default=None)
        pending = [b for b in batches if b not in done and (oom_at is None or b < oom_at)]
        if not pending:
            progress(f"{model}: nothing to do ({len(done)} point(s) done"
                     f"{f', OOM at batch {oom_at}' if oom_at else ''})")
            continue
        if deadline is not None and time.monotonic() > deadline:
            progress(f"{model}: deadline reached before start; {len(pending)} point(s) left (resume later)")
            break
        model_t0 = time.monotonic()
        progress(f"{model}: {engine} on {dev}, batches {pending}, prompt {prompt_tokens}, gen {gen_tokens}")
        engine_obj, oom_message = None, None
        try:
            engine_obj = load_engine(engine, configs[model], device, seed)
        except Exception as exc:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom(exc):
                raise
            oom_message = f"loading the model: {exc}"
        if engine_obj is None:
            rows.append(_oom_row(card, model, engine, prompt_tokens, gen_tokens, pending[0], env, oom_message))
            write_measurements(csv_path, rows)
            progress(f"{model}: OOM while loading weights; recorded oom at batch {pending[0]}")
            free_memory()
            continue
        extra = engine_obj.extra_columns()
        stopped = False
        for batch in pending:
            if deadline is not None and time.monotonic() > deadline:
                progress(f"{model}: deadline reached; stopping before batch {batch} (resume later)")
                stopped = True
                break
            t0 = time.monotonic()
            oom_message = None
            try:
                result = measure_point(engine_obj, batch, prompt_tokens, gen_tokens)
            except Exception as exc:  # noqa: BLE001
                if not is_oom(exc):
                    raise
                oom_message = str(exc) or type(exc).__name__
            if oom_message is not None:
                free_memory()  # the exception and its frames are gone by now
                rows.append(_oom_row(card, model, engine, prompt_tokens, gen_tokens, batch, env, oom_message))
                write_measurements(csv_path, rows)
                progress(f"{model}: batch {batch}: OUT OF MEMORY; recorded, not climbing further")
                break
            result["point_wall_s"] = time.monotonic() - t0
            row = _point_row(card, model, engine_obj, prompt_tokens, gen_tokens, batch, result, env, extra)
            rows.append(row)
            write_measurements(csv_path, rows)
            append_steps(raw_path, row, result)
            progress(_point_line(model, row, result["point_wall_s"]))
        engine_obj.close()
        del engine_obj
        free_memory()
        progress(f"{model}: done in {time.monotonic() - model_t0:.1f} s")
        if stopped:
            break
    if not csv_path.exists():
        progress(f"nothing measured; {csv_path} not written")
    return csv_path


def _point_line(model: str, row: MeasurementRow, wall_s: float) -> str:
    peak = "-" if row.peak_mem_gib is None else f"{row.peak_mem_gib:.2f} GiB"
    return (
        f"{model}: batch {row.batch:>5}: ttft {row.ttft_s:.4f} s, tpot {row.tpot_s * 1e3:.3f} ms "
        f"(median {row.tpot_median_s * 1e3:.3f}, p10 {row.tpot_p10_s * 1e3:.3f}, p90 {row.tpot_p90_s * 1e3:.3f}), "
        f"{row.batch / row.tpot_s:,.0f} tok/s, peak {peak} [{wall_s:.1f} s]"
    )
