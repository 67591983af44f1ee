"""Decode sweeps: run one engine over models x prompts x batches, one CSV row per point, atomically.

``run_calibration`` measures each model over a grid (``calibrate.grid.Grid``): prompt lengths in
ascending order, each climbing its batches in ascending order. After EVERY point the whole CSV
(``out_dir/measurements-<card>-<engine>.csv``) is rewritten atomically, so an interrupted run keeps
what it measured and ``resume=True`` continues where it stopped. Every decode step's time goes to
``out_dir/steps-<card>-<engine>.jsonl`` (one JSON line per point, appended).

Out of memory: the first OOM of a (model, prompt) is recorded as a ``status=oom`` row and its larger
batches are skipped. Longer prompts hold more KV per sequence, so at every longer context (prompt +
gen) the climb stops below that batch too; shorter prompts are unaffected. On the CPU an OOM kills
the process, so a run whose largest point would not fit in RAM is refused before any model is built.

Bounded cost: above ``ttft_max_tokens`` (batch x prompt) the prefill is not run; the KV cache is
filled with random values instead and ``ttft_s`` is left blank (column ``prefill``: ``none``); above
``warmup_prefill_max_tokens`` the untimed warm-up prefill is skipped (``timed-cold``). A point that
would START after ``deadline`` (or ``budget_s`` after the call) is not started; one whose time,
scaled from the last measured point, would exceed ``max_seconds_per_point`` is skipped with the
rest of its prompt's batches.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from calibrate.grid import (
    CPU_2CORE,
    DEFAULT_TTFT_MAX_TOKENS,
    DEFAULT_WARMUP_PREFILL_MAX_TOKENS,
    H200,
    Grid,
    ModelSize,
    PointPlan,
    check_fits_in_ram,
    estimate_point_s,
    plan_point,
)
from roofline.errors import RooflineError
from roofline.measurements import MeasurementRow, read_measurements, write_measurements

ENGINES: dict[str, tuple[str, str]] = {
    "hf-eager": ("calibrate.hf_eager", "HFEagerEngine"),
    "graph": ("calibrate.graph_engine", "GraphEngine"),
}
DEFAULT_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
NO_GPU_MESSAGE = "no CUDA GPU found; use --device cpu with a tiny model to test the path"
DEVICE_MESSAGE = "unknown device {!r}; use cuda (or cuda:N) for a CUDA GPU, or cpu"


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


def keep_model_configs(out_dir: Path, configs: dict) -> None:
    """A copy of each model's config.json that is not a catalog model's, at
    roofline.measurements.kept_config_path (``out_dir/models/<folder>-<hash>/config.json``): the
    measurements name such a model by the path it was given, which need not exist where they are
    compared; roofline.measurements.read_measurements then reads the copy."""
    import json

    from roofline.atomic import write_text_atomic
    from roofline.catalogs import catalog_config_path
    from roofline.measurements import kept_config_path

    for name, config in configs.items():
        if catalog_config_path(name) is None:
            write_text_atomic(kept_config_path(out_dir, name), json.dumps(config, indent=2) + "\n")


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


def measure_point(engine_obj, batch: int, prompt_tokens: int, gen_tokens: int, **plan) -> dict:
    """One sweep point: {ttft_s, step_s: [...], e2e_s, peak_mem_gib, peak_reserved_gib}.

    The single seam the sweep goes through (tests replace it to simulate an OOM). ``plan`` holds
    ``timed_prefill`` / ``warmup_prefill`` (see ``PointPlan``); the runner passes them only for a
    bounded point, so a full point calls ``engine_obj.measure(batch, prompt, gen)`` as in v0.1.
    """
    if not plan or all(plan.values()):
        return engine_obj.measure(batch, prompt_tokens, gen_tokens)
    if "timed_prefill" in inspect.signature(engine_obj.measure).parameters:
        return engine_obj.measure(batch, prompt_tokens, gen_tokens, **plan)
    raise RooflineError(f"engine {getattr(engine_obj, 'name', engine_obj)!r} cannot skip its prefill; "
                        "raise the TTFT token limit")


def check_device(device: str) -> str:
    """``device`` if it is cpu, cuda or cuda:N; else a one-line RooflineError."""
    text = str(device).strip().lower()
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise RooflineError(DEVICE_MESSAGE.format(str(device)))
    return text


def _check_args(models, engine, batches, prompt_tokens, gen_tokens) -> Grid:
    if engine not in ENGINES:
        raise RooflineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if not models:
        raise RooflineError("no model given")
    return Grid.of(prompt_tokens, gen_tokens, batches)


def _point_row(card, model, engine_obj, prompt_tokens, gen_tokens, batch, result, env, extra) -> MeasurementRow:
    from calibrate.timing import step_stats, utc_now

    stats = step_stats(result["step_s"])
    reserved = result.get("peak_reserved_gib")
    measured = {k: "" if result.get(k) is None else repr(result[k]) for k in ("experts_touched_mean", "kv_cache_bytes")
                if k in result}
    return MeasurementRow(
        card=card, model=model, engine=engine_obj.name, kv_cache=engine_obj.kv_cache,
        prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, batch=batch,
        ttft_s=result["ttft_s"], peak_mem_gib=result.get("peak_mem_gib"), status="ok",
        weight_dtype=result.get("weight_dtype") or getattr(engine_obj, "weight_dtype", None),
        kv_dtype=result.get("kv_dtype") or getattr(engine_obj, "kv_dtype", None),
        e2e_s=result.get("e2e_s"), timestamp=utc_now(),
        gpu=env["gpu"], driver=env["driver"] or None, torch=env["torch"], transformers=env["transformers"],
        extra={**extra, **measured, "peak_reserved_gib": "" if reserved is None else repr(float(reserved)),
               "point_wall_s": repr(round(result["point_wall_s"], 3))},
        **stats,
    )


def _oom_row(card, model, engine, prompt_tokens, gen_tokens, batch, env, message, extra=None) -> MeasurementRow:
    from calibrate.timing import utc_now

    kv_cache = {"hf-eager": "dynamic", "graph": "static"}[engine]
    return MeasurementRow(
        card=card, model=model, engine=engine, kv_cache=kv_cache,
        prompt_tokens=prompt_tokens, gen_tokens=gen_tokens, batch=batch,
        ttft_s=None, tpot_s=None, peak_mem_gib=None, status="oom", timestamp=utc_now(),
        gpu=env["gpu"], driver=env["driver"] or None, torch=env["torch"], transformers=env["transformers"],
        extra={**(extra or {}), "oom_message": message.splitlines()[0][:200] if message else ""},
    )


def disable_cudnn_attention() -> None:
    """Turn off PyTorch's cuDNN SDPA backend. On Hopper with torch 2.11 it is chosen by default
    and builds a new plan for every KV length, which makes HF eager decode 3-5x slower than the
    lesson's engine (docs/calibration-runs.md); flash/memory-efficient SDPA is used instead."""
    import torch

    torch.backends.cuda.enable_cudnn_sdp(False)


def pending_batches(rows: list[MeasurementRow], card: str, model: str, engine: str,
                    prompt: int, gen: int, batches: Sequence[int]) -> tuple[list[int], int | None]:
    """The batches of (model, prompt, gen) still to measure, and the OOM cap that bounds them:
    the smallest batch that ran out of memory at this context or a shorter one (prompt + gen)."""
    mine = [r for r in rows if (r.card, r.model, r.engine) == (card, model, engine)]
    done = {r.batch for r in mine if (r.prompt_tokens, r.gen_tokens) == (prompt, gen)}
    cap = min((r.batch for r in mine if not r.ok and r.prompt_tokens + r.gen_tokens <= prompt + gen), default=None)
    return [b for b in batches if b not in done and (cap is None or b < cap)], cap


def run_calibration(
    card: str,
    models: list[str],
    engine: str,
    batches: Iterable[int],
    prompt_tokens: int | Iterable[int],
    gen_tokens: int | Sequence[int] | Mapping[int, int],
    out_dir: Path,
    device: str = "cuda",
    resume: bool = False,
    measure_ceilings: bool = True,
    progress: Callable[[str], None] = print_to_stderr,
    deadline: float | None = None,
    seed: int = 0,
    *,
    budget_s: float | None = None,
    ttft_max_tokens: int = DEFAULT_TTFT_MAX_TOKENS,
    warmup_prefill_max_tokens: int = DEFAULT_WARMUP_PREFILL_MAX_TOKENS,
    max_seconds_per_point: float | None = None,
    ceilings_sizes=None,
) -> Path:
    """Measure ``engine`` on ``models`` x prompts x ``batches``; returns the measurements CSV path.

    ``prompt_tokens`` is one length or several; ``gen_tokens`` one length for all, one per prompt
    (same order) or {prompt: gen}. ``deadline`` (a ``time.monotonic()`` value) and ``budget_s``
    (seconds from this call) stop the sweep cleanly before a point that would start after them;
    the CSV then holds every finished point and ``resume=True`` continues. See the module doc for
    ``ttft_max_tokens``, ``warmup_prefill_max_tokens`` and ``max_seconds_per_point``;
    ``ceilings_sizes`` (a ``calibrate.ceilings.CeilingSizes``) overrides the device's default.
    """
    t_call = time.monotonic()
    grid = _check_args(models, engine, batches, prompt_tokens, gen_tokens)
    device = check_device(device)
    if budget_s is not None:
        deadline = t_call + budget_s if deadline is None else min(deadline, t_call + budget_s)
    try:
        import torch
    except ImportError:
        raise RooflineError("calibration needs torch and transformers (pip install torch transformers)") from None
    from calibrate.configs import TINY_MODELS, load_model_config
    from calibrate.timing import environment, free_memory, is_oom, mem_available_bytes, torch_device

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RooflineError(NO_GPU_MESSAGE)
    configs = {name: load_model_config(name) for name in models}  # fail fast on unknown names
    sizes = {name: ModelSize.from_config(name, cfg) for name, cfg in configs.items()}  # checks the shapes
    dev = torch_device(device)
    if dev.type == "cpu":
        check_fits_in_ram(sizes, grid, mem_available_bytes(), ttft_max_tokens)
    speeds = H200 if dev.type == "cuda" else CPU_2CORE
    env = environment(dev)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = measurements_path(out_dir, card, engine)
    raw_path = steps_path(out_dir, card, engine)
    keep_model_configs(out_dir, configs)

    rows: list[MeasurementRow] = []
    if csv_path.exists():
        if resume:
            rows = read_measurements(csv_path, kept_configs=False)  # the rows as written, paths and all
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
            from calibrate.ceilings import default_sizes
            from calibrate.ceilings import measure_ceilings as _measure

            tiny = all(name.strip().lower() in TINY_MODELS for name in models)
            t0 = time.monotonic()
            data = _measure(device, configs, list(grid.batches), progress=progress,
                            sizes=ceilings_sizes or default_sizes(dev.type, tiny_models_only=tiny))
            data["card"] = card
            data["wall_s"] = round(time.monotonic() - t0, 2)
            write_json_atomic(cpath, data)
            progress(f"ceilings written to {cpath} ({data['wall_s']:.1f} s)")
            free_memory()

    def past_deadline() -> bool:
        return deadline is not None and time.monotonic() > deadline

    def record(row: MeasurementRow) -> None:
        rows.append(row)
        write_measurements(csv_path, rows)

    stopped = False
    for model in models:
        todo = [(p, g) for p, g in zip(grid.prompts, grid.gens)
                if pending_batches(rows, card, model, engine, p, g, grid.batches)[0]]
        if not todo:
            progress(f"{model}: nothing to do (every point done or past an OOM)")
            continue
        if past_deadline():
            progress(f"{model}: deadline reached before start (resume later)")
            stopped = True
            break
        model_t0 = time.monotonic()
        progress(f"{model}: {engine} on {dev}, prompts {[p for p, _ in todo]}, batches up to {grid.batches[-1]}")
        engine_obj, oom_message = None, None
        try:
            engine_obj = load_engine(engine, configs[model], device, seed)
        except Exception as exc:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom(exc):
                raise
            oom_message = f"loading the model: {exc}"
        if engine_obj is None:
            prompt, gen = todo[0]
            first = pending_batches(rows, card, model, engine, prompt, gen, grid.batches)[0][0]
            record(_oom_row(card, model, engine, prompt, gen, first, env, oom_message))
            progress(f"{model}: OOM while loading weights; recorded oom at prompt {prompt}, batch {first}")
            free_memory()
            continue
        extra = engine_obj.extra_columns()
        last: tuple[float, float] | None = None  # (wall s, estimate s) of this model's last point
        for prompt, gen in todo:
            pending, cap = pending_batches(rows, card, model, engine, prompt, gen, grid.batches)
            if not pending:
                progress(f"{model}: prompt {prompt}: skipped (OOM at batch {cap} at a shorter context)")
                continue
            progress(f"{model}: prompt {prompt}, gen {gen}: batches {pending}"
                     + (f" (below batch {cap}, which ran out of memory at a shorter context)" if cap else ""))
            for batch in pending:
                if past_deadline():
                    progress(f"{model}: deadline reached; stopping before prompt {prompt}, batch {batch} (resume later)")
                    stopped = True
                    break
                plan = plan_point(batch, prompt, ttft_max_tokens, warmup_prefill_max_tokens)
                estimate = estimate_point_s(sizes[model], engine, batch, prompt, gen, plan, speeds)["total_s"]
                if max_seconds_per_point is not None and last is not None:
                    guess = last[0] * estimate / last[1]
                    if guess > max_seconds_per_point:
                        progress(f"{model}: prompt {prompt}: batch {batch} and larger skipped: about {guess:.0f} s "
                                 f"each (> {max_seconds_per_point:g} s per point)")
                        break
                t0 = time.monotonic()
                oom_message = None
                try:
                    result = _measure_planned(engine_obj, batch, prompt, gen, plan)
                except Exception as exc:  # noqa: BLE001
                    if not is_oom(exc):
                        raise
                    oom_message = str(exc) or type(exc).__name__
                if oom_message is not None:
                    free_memory()  # the exception and its frames are gone by now
                    record(_oom_row(card, model, engine, prompt, gen, batch, env, oom_message,
                                    {"prefill": plan.label}))
                    progress(f"{model}: prompt {prompt}, batch {batch}: OUT OF MEMORY; recorded, not climbing further")
                    break
                result["point_wall_s"] = time.monotonic() - t0
                last = (result["point_wall_s"], estimate)
                row = _point_row(card, model, engine_obj, prompt, gen, batch, result, env,
                                 {**extra, "prefill": plan.label})
                record(row)
                append_steps(raw_path, row, result)
                progress(_point_line(model, row, result["point_wall_s"]))
            if stopped:
                break
        engine_obj.close()
        del engine_obj
        free_memory()
        progress(f"{model}: done in {time.monotonic() - model_t0:.1f} s")
        if stopped:
            break
    if not csv_path.exists():
        progress(f"nothing measured; {csv_path} not written")
    return csv_path


def _measure_planned(engine_obj, batch: int, prompt: int, gen: int, plan: PointPlan) -> dict:
    """measure_point, with the plan passed only for a bounded point (keeps v0.1's 4-argument seam)."""
    if plan.timed_prefill and plan.warmup_prefill:
        return measure_point(engine_obj, batch, prompt, gen)
    return measure_point(engine_obj, batch, prompt, gen,
                         timed_prefill=plan.timed_prefill, warmup_prefill=plan.warmup_prefill)


def _point_line(model: str, row: MeasurementRow, wall_s: float) -> str:
    peak = "-" if row.peak_mem_gib is None else f"{row.peak_mem_gib:.2f} GiB"
    ttft = "-" if row.ttft_s is None else f"{row.ttft_s:.4f} s"
    return (
        f"{model}: prompt {row.prompt_tokens:>5}, batch {row.batch:>5}: ttft {ttft}, tpot {row.tpot_s * 1e3:.3f} ms "
        f"(median {row.tpot_median_s * 1e3:.3f}, p10 {row.tpot_p10_s * 1e3:.3f}, p90 {row.tpot_p90_s * 1e3:.3f}), "
        f"{row.batch / row.tpot_s:,.0f} tok/s, peak {peak} [{wall_s:.1f} s]"
    )
