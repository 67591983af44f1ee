"""Tensor-parallel decode on N GPUs of one host: the entry point, the launcher and the workers.

    python3 -m calibrate.tp_job --tp 2 --out "$OUT" --card h200 --probe --check \
        --models llama-3.1-8b,qwen2.5-14b --prompts 128,2048 --batches 1,2,4,8,16,32,64,128,256,512,1024 \
        --gen 64 --budget-s 330

starts N worker processes (this module with ``--worker``), one per GPU, and waits for them with a
timeout; ``run_tp_calibration`` does the same from Python. Under ``torchrun --nproc-per-node N -m
calibrate.tp_job ...`` each process is a worker directly. Files in ``--out``:

* ``measurements-<card>-graph-tp<N>.csv``: the measurement CSV (roofline/measurements.py), one row
  per (model, prompt, batch), engine ``graph``, ``tp`` = N, ``peak_mem_gib`` = the largest rank's
  max_memory_allocated (each rank's in ``peak_mem_rank_gib``), timings from rank 0's CUDA events.
  Rank 0 rewrites it atomically after every point.
* ``steps-<card>-graph-tp<N>.jsonl``: every decode step's time, one line per point.
* ``collectives-<card>-tp<N>.json`` (``--probe``): all-reduce and all-gather latency/bandwidth.
* ``tp-check-<card>-tp<N>.json`` (``--check``): TP decode vs the single-process decoder, tiny models.

Each (model, prompt) climbs the batches until a point runs out of memory on ANY rank (the ranks
agree on it; no rank is left in a collective), then the next prompt. ``--budget-s``: rank 0 stops
before a point that would start after the deadline and tells the others. ``--resume`` continues
the CSV. Workers write everything first, then leave with ``os._exit`` (no process-group teardown:
a probe hung there); a watchdog thread in each worker ends it past the hard deadline or when the
launcher dies, and the launcher kills (by pid) any worker still running after its timeout or 15 s
after another worker exited.

NVLink multicast (NVLS) stays off in every process: the launcher and each worker set
NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 before NCCL
starts (a program using multicast can take the host's shared GPUs out of service). Under torchrun
export them before torchrun too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

NVLS_OFF_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ENGINE = "graph"
DEFAULT_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
DEFAULT_PROMPTS = [128, 2048]
CHECK_MODELS = ["tiny-qwen2", "tiny-llama"]
GRACE_S = 15.0  # the launcher's wait for the other workers once one has exited
STARTUP_S = 300.0  # launcher timeout beyond the budget: start, model builds, probe, the last point
PG_TIMEOUT_S = 900  # backstop for a collective nobody answers (the launcher normally acts first)
POINT_COST_ENV = "ROOFLINE_TP_TEST_POINT_COST_S"  # test seam: rank 0's clock jumps this much per point


def print_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measurements_path(out_dir, card: str, tp: int) -> Path:
    return Path(out_dir) / f"measurements-{card}-{ENGINE}-tp{tp}.csv"


def steps_path(out_dir, card: str, tp: int) -> Path:
    return Path(out_dir) / f"steps-{card}-{ENGINE}-tp{tp}.jsonl"


def probe_path(out_dir, card: str, tp: int) -> Path:
    return Path(out_dir) / f"collectives-{card}-tp{tp}.json"


def check_path(out_dir, card: str, tp: int) -> Path:
    return Path(out_dir) / f"tp-check-{card}-tp{tp}.json"


# ---------------------------------------------------------------------------------------------
# The launcher (no torch.distributed in this process: nothing here can hang in a collective)


def run_tp_calibration(card: str, models: list[str], prompts: list[int], gen: int, batches: list[int], tp: int,
                       out_dir, device: str = "cuda", budget_s: float | None = None, resume: bool = False, *,
                       probe: bool = False, check: bool = False, check_models: list[str] | None = None,
                       seed: int = 0, warm_prefill: bool = True,
                       timeout_s: float | None = None, progress=print_to_stderr, extra_env: dict | None = None,
                       probe_sizes: list[int] | None = None, probe_gather_sizes: list[int] | None = None) -> Path:
    """Measure ``models`` at tensor parallelism ``tp`` on ``tp`` processes; returns the CSV path.

    ``budget_s`` stops cleanly before a point that would start later than that after launch; the
    workers are killed after ``timeout_s`` (default: budget + 300 s). RooflineError when a worker
    failed or was killed (the CSV then holds every point finished before)."""
    from roofline.errors import RooflineError

    batches, prompts = _check_args(models, prompts, gen, batches, tp, device)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if timeout_s is None:
        timeout_s = (budget_s if budget_s is not None else 3600.0) + STARTUP_S
    now = time.time()
    argv = ["--out", str(out_dir), "--card", card, "--tp", str(tp), "--models", ",".join(models),
            "--prompts", ",".join(map(str, prompts)), "--gen", str(gen), "--batches", ",".join(map(str, batches)),
            "--device", device, "--seed", str(seed), "--hard-deadline-unix", repr(now + timeout_s)]
    if budget_s is not None:
        argv += ["--deadline-unix", repr(now + budget_s)]
    argv += ["--resume"] * resume + ["--probe"] * probe + ["--check"] * check
    argv += ["--no-warm-prefill"] * (not warm_prefill)
    if check_models:
        argv += ["--check-models", ",".join(check_models)]
    if probe_sizes:
        argv += ["--probe-sizes", ",".join(map(str, probe_sizes))]
    if probe_gather_sizes:
        argv += ["--probe-gather-sizes", ",".join(map(str, probe_gather_sizes))]
    codes, note = launch(tp, argv, device=device, timeout_s=timeout_s, extra_env=extra_env)
    if note:
        progress(f"tp launcher: {note}")
    if codes[0] != 0:
        raise RooflineError(f"tp {tp}: worker exit codes {codes}{f' ({note})' if note else ''}; "
                            f"points finished before are in {measurements_path(out_dir, card, tp)}")
    return measurements_path(out_dir, card, tp)


def _check_args(models, prompts, gen, batches, tp, device) -> tuple[list[int], list[int]]:
    """Fail fast, before any process starts: names, shapes that split over ``tp``, GPUs present."""
    from calibrate.configs import load_model_config
    from calibrate.graph_engine import Shapes
    from calibrate.tp_engine import check_dense, plan_tp
    from roofline.errors import RooflineError

    if tp < 1:
        raise RooflineError(f"tp must be >= 1, got {tp}")
    if models and not batches:
        raise RooflineError("no batch size given")
    if models and not prompts:
        raise RooflineError("no prompt length given")
    if any(int(b) != b or b <= 0 for b in batches) or any(int(p) != p or p <= 0 for p in prompts):
        raise RooflineError(f"batch sizes and prompt lengths must be positive integers, got {batches} and {prompts}")
    if gen < 2:
        raise RooflineError(f"gen tokens must be >= 2 (at least one decode step), got {gen}")
    for name in models:
        config = load_model_config(name)
        check_dense(config)
        plan_tp(Shapes.from_config(config), tp, 0)
    if str(device).startswith("cuda"):
        import torch

        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if found < tp:
            raise RooflineError(f"tp {tp} needs {tp} CUDA GPUs, found {found}")
    return sorted({int(b) for b in batches}), list(dict.fromkeys(int(p) for p in prompts))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(world: int, worker_argv: list[str], device: str = "cuda", timeout_s: float = 3600.0,
           extra_env: dict | None = None) -> tuple[list[int | None], str]:
    """Run ``world`` workers (``python -m calibrate.tp_job --worker ...``); returns (exit codes, note).

    A worker still running ``timeout_s`` after the start, or GRACE_S after another exited, is
    killed (SIGKILL, by pid; its code is then -9) and the note says why."""
    root = Path(__file__).resolve().parent.parent
    port = _free_port()
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(world):
            env = {**os.environ, **(extra_env or {}), **NVLS_OFF_ENV,
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                   "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
                   "PYTHONUNBUFFERED": "1"}
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: gloo (the control group) on loopback
            if device == "cpu":
                env.setdefault("OMP_NUM_THREADS", "1")
            procs.append(subprocess.Popen([sys.executable, "-m", "calibrate.tp_job", "--worker", *worker_argv],
                                          env=env, cwd=str(root)))
        return _wait(procs, timeout_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)


def _wait(procs, timeout_s: float) -> tuple[list[int | None], str]:
    start, first_exit = time.monotonic(), None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return codes, ""
        now = time.monotonic()
        if first_exit is None and any(c is not None for c in codes):
            first_exit = now
        late = [r for r, c in enumerate(codes) if c is None]
        why = ""
        if now - start > timeout_s:
            why = f"timeout after {timeout_s:.0f} s: killed rank(s) {late}"
        elif first_exit is not None and now - first_exit > GRACE_S:
            why = f"rank(s) {late} still running {GRACE_S:.0f} s after another exited: killed"
        if why:
            for r in late:
                procs[r].kill()
            return [p.wait(timeout=30) for p in procs], why
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# A worker


def _watchdog(hard_deadline: float | None, parent_pid: int) -> None:
    """End this process past the hard deadline, or once the process that started it is gone."""

    def run():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                print(f"[rank {os.environ.get('RANK')}] launcher gone; exiting", file=sys.stderr, flush=True)
                os._exit(125)
            if hard_deadline is not None and time.time() > hard_deadline:
                print(f"[rank {os.environ.get('RANK')}] hard deadline passed; exiting", file=sys.stderr, flush=True)
                os._exit(124)

    threading.Thread(target=run, name="tp-watchdog", daemon=True).start()


def worker(args) -> None:
    """Run one rank; never returns: flushes, then ``os._exit`` (0 on success)."""
    os.environ.update(NVLS_OFF_ENV)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    code = 1
    try:
        _watchdog(args.hard_deadline_unix, os.getppid())
        code = _worker_main(args)
    except BaseException:  # noqa: BLE001 - reported, then the process ends
        print(f"[rank {os.environ.get('RANK')}] failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _worker_main(args) -> int:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from calibrate.tp_engine import Comm

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    timeout = timedelta(seconds=PG_TIMEOUT_S)
    if args.device.startswith("cuda"):
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev, timeout=timeout)
        ctrl = dist.new_group(backend="gloo", timeout=timeout)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
        ctrl = None
    comm = Comm(world, rank, group=None, ctrl=ctrl)
    say = print_to_stderr if rank == 0 else (lambda message: None)
    out = Path(args.out)
    if args.probe:  # first: its graph captures fail soft, so it yields data even where the engine cannot
        _run_probe(comm, args, dev, say)
    if args.check:
        _run_check(comm, args, dev, say)
    if _csv_list(args.models):
        _sweep(comm, args, dev, say)
    comm.barrier()
    say(f"tp {world}: done; files in {out}")
    return 0


def _run_check(comm, args, dev, say) -> None:
    import torch

    from calibrate.configs import load_model_config
    from calibrate.tp_engine import check_tp_decode
    from roofline.atomic import write_text_atomic

    results = {}
    for name in _csv_list(args.check_models):
        torch.manual_seed(args.seed)
        result = check_tp_decode(load_model_config(name), comm, dev, seed=args.seed)
        if comm.rank == 0:
            results[name] = result
            verdict = "ok" if result["tokens_equal"] and result["max_rel_logit_err"] < 1e-4 else "CHECK FAILED"
            say(f"check {name}: tp {comm.world} vs {result['reference']}: tokens equal {result['tokens_equal']}, "
                f"max relative logit error {result['max_rel_logit_err']:.2e}: {verdict}")
    if comm.rank == 0:
        write_text_atomic(check_path(args.out, args.card, comm.world), json.dumps(results, indent=1) + "\n")


def _run_probe(comm, args, dev, say) -> None:
    import torch

    from calibrate.timing import environment
    from calibrate.tp_engine import ALL_GATHER_BYTES, ALL_REDUCE_BYTES, collective_probe
    from roofline.atomic import write_text_atomic

    t0 = time.monotonic()
    sizes = [int(b) for b in _csv_list(args.probe_sizes)] or ALL_REDUCE_BYTES
    gather_sizes = [int(b) for b in _csv_list(args.probe_gather_sizes)] or ALL_GATHER_BYTES
    data = collective_probe(comm, dev, all_reduce_bytes=sizes, all_gather_bytes=gather_sizes, progress=say)
    if comm.rank == 0:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if dev.type == "cuda" else ""
        data = {"card": args.card, "backend": "nccl" if dev.type == "cuda" else "gloo", "nccl": nccl,
                **environment(dev), "env": {k: os.environ.get(k, "") for k in NVLS_OFF_ENV},
                "wall_s": round(time.monotonic() - t0, 2), **data}
        path = write_text_atomic(probe_path(args.out, args.card, comm.world), json.dumps(data, indent=1) + "\n")
        say(f"collectives probe written to {path} ({data['wall_s']} s)")


class _Budget:
    """Rank 0's deadline (unix time); the POINT_COST_ENV seam adds fake seconds per point."""

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self.cost = float(os.environ.get(POINT_COST_ENV) or 0.0)
        self.spent = 0.0

    def left(self) -> bool:
        return self.deadline is None or time.time() + self.spent <= self.deadline

    def point_done(self) -> None:
        self.spent += self.cost


def _sweep(comm, args, dev, say) -> None:
    from calibrate.configs import load_model_config
    from calibrate.timing import environment, free_memory
    from calibrate.tp_engine import TPEngine, settle
    from roofline.measurements import read_measurements, write_measurements

    world, rank = comm.world, comm.rank
    models, prompts = _csv_list(args.models), [int(p) for p in _csv_list(args.prompts)]
    batches = sorted({int(b) for b in _csv_list(args.batches)})
    csv_path, raw_path = measurements_path(args.out, args.card, world), steps_path(args.out, args.card, world)
    rows, done = [], None
    if rank == 0:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        if csv_path.exists() and args.resume:
            rows = read_measurements(csv_path)
            say(f"resume: {len(rows)} row(s) already in {csv_path}")
        elif csv_path.exists():
            say(f"{csv_path} exists; starting afresh (use --resume to continue it)")
        if not args.resume and raw_path.exists():
            raw_path.unlink()
        done = _done_points(rows, args.card, args.gen, world)
    done = comm.broadcast(done)
    env = environment(dev) if rank == 0 else None
    budget = _Budget(args.deadline_unix)
    stopped = False
    for model in models:
        todo = {p: _pending(batches, *done.get((model, p), ((), None))) for p in prompts}
        if not any(todo.values()):
            say(f"{model}: nothing to do")
            continue
        if not comm.broadcast(budget.left() if rank == 0 else None):
            say(f"{model}: deadline reached before start (resume later)")
            break
        t_model = time.monotonic()
        engine = comm.local(lambda: TPEngine(load_model_config(model), comm, str(dev), seed=args.seed,
                                             warm_prefill=not args.no_warm_prefill, model=model))
        failure = settle(comm.agree())
        if failure:
            if rank == 0:
                for p, pending in todo.items():
                    if pending:
                        rows.append(_oom_row(args, model, p, pending[0], world, env, f"loading the model: {failure}"))
                write_measurements(csv_path, rows)
            say(f"{model}: OUT OF MEMORY while loading the weights; recorded")
            engine = None
            free_memory()
            continue
        extra = engine.extra_columns()
        for prompt in prompts:
            for batch in todo[prompt]:
                if not comm.broadcast(budget.left() if rank == 0 else None):
                    say(f"{model}: deadline reached; stopping before prompt {prompt} batch {batch} (resume later)")
                    stopped = True
                    break
                t0 = time.monotonic()
                res = engine.measure(batch, prompt, args.gen)
                summary = {k: res.get(k) for k in ("peak_mem_gib", "peak_reserved_gib")}
                summary["tpot_s"] = sum(res["step_s"]) / len(res["step_s"]) if res.get("step_s") else None
                per_rank = comm.gather(summary)
                budget.point_done()
                if rank == 0:
                    if res["status"] == "ok":
                        res["point_wall_s"] = time.monotonic() - t0
                        row = _ok_row(args, model, prompt, batch, world, res, per_rank, env, extra)
                        rows.append(row)
                        write_measurements(csv_path, rows)
                        _append_steps(raw_path, row, res, per_rank)
                        say(_point_line(model, row, res["point_wall_s"]))
                    else:
                        rows.append(_oom_row(args, model, prompt, batch, world, env, res["message"]))
                        write_measurements(csv_path, rows)
                        say(f"{model}: prompt {prompt} batch {batch}: OUT OF MEMORY ({res['message'][:120]}); "
                            "recorded, not climbing further")
                if res["status"] != "ok":
                    break
            if stopped:
                break
        engine.close()
        del engine
        free_memory()
        say(f"{model}: done in {time.monotonic() - t_model:.1f} s")
        if stopped:
            break


def _done_points(rows, card: str, gen: int, tp: int) -> dict:
    """(model, prompt) -> (batches already measured, first OOM batch or None), for this card/gen/tp."""
    out: dict = {}
    for r in rows:
        if r.card != card or r.engine != ENGINE or r.gen_tokens != gen or r.tp_degree != tp:
            continue
        got, oom = out.get((r.model, r.prompt_tokens), ((), None))
        if not r.ok:
            oom = r.batch if oom is None else min(oom, r.batch)
        out[(r.model, r.prompt_tokens)] = (tuple(sorted({*got, r.batch})), oom)
    return out


def _pending(batches, done, oom_at) -> list[int]:
    return [b for b in batches if b not in done and (oom_at is None or b < oom_at)]


def _rank_list(values, fmt: str) -> str:
    return "" if any(v is None for v in values) else ";".join(format(v, fmt) for v in values)


def _ok_row(args, model, prompt, batch, world, res, per_rank, env, extra):
    from calibrate.timing import step_stats, utc_now
    from roofline.measurements import MeasurementRow

    peaks = [r["peak_mem_gib"] for r in per_rank]
    reserved = [r["peak_reserved_gib"] for r in per_rank]
    return MeasurementRow(
        card=args.card, model=model, engine=ENGINE, kv_cache="static", prompt_tokens=prompt,
        gen_tokens=args.gen, batch=batch, ttft_s=res["ttft_s"],
        peak_mem_gib=None if None in peaks else max(peaks), status="ok", tp=world, e2e_s=res["e2e_s"],
        timestamp=utc_now(), gpu=env["gpu"], driver=env["driver"] or None, torch=env["torch"],
        transformers=env["transformers"] or None,
        extra={**extra, "peak_mem_rank_gib": _rank_list(peaks, ".4f"),
               "peak_reserved_gib": "" if None in reserved else repr(float(max(reserved))),
               "tpot_rank_s": _rank_list([r["tpot_s"] for r in per_rank], ".7g"),
               "point_wall_s": repr(round(res["point_wall_s"], 3))},
        **step_stats(res["step_s"]),
    )


def _oom_row(args, model, prompt, batch, world, env, message):
    from calibrate.timing import utc_now
    from roofline.measurements import MeasurementRow

    return MeasurementRow(
        card=args.card, model=model, engine=ENGINE, kv_cache="static", prompt_tokens=prompt,
        gen_tokens=args.gen, batch=batch, ttft_s=None, tpot_s=None, peak_mem_gib=None, status="oom", tp=world,
        timestamp=utc_now(), gpu=env["gpu"], driver=env["driver"] or None, torch=env["torch"],
        transformers=env["transformers"] or None, extra={"oom_message": message.splitlines()[0][:200]},
    )


def _append_steps(path: Path, row, res: dict, per_rank: list[dict]) -> None:
    """One JSON line per point: rank 0's every decode step, each rank's mean step and peak."""
    record = {"card": row.card, "model": row.model, "engine": row.engine, "tp": row.tp, "batch": row.batch,
              "prompt_tokens": row.prompt_tokens, "gen_tokens": row.gen_tokens, "timestamp": row.timestamp,
              "ttft_s": row.ttft_s, "step_s": [float(f"{t:.7g}") for t in res["step_s"]],
              "tpot_rank_s": [r["tpot_s"] for r in per_rank],
              "peak_mem_rank_gib": [r["peak_mem_gib"] for r in per_rank]}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _point_line(model: str, row, wall_s: float) -> str:
    peak = "-" if row.peak_mem_gib is None else f"{row.peak_mem_gib:.2f} GiB"
    return (f"{model}: prompt {row.prompt_tokens} batch {row.batch:>5}: ttft {row.ttft_s:.4f} s, "
            f"tpot {row.tpot_s * 1e3:.3f} ms (p10 {row.tpot_p10_s * 1e3:.3f}, p90 {row.tpot_p90_s * 1e3:.3f}), "
            f"{row.batch / row.tpot_s:,.0f} tok/s, peak {peak} per GPU [{wall_s:.1f} s]")


# ---------------------------------------------------------------------------------------------
# Command line


def _csv_list(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "calibration-out"))
    ap.add_argument("--card", default="h200")
    ap.add_argument("--tp", type=int, default=2, help="GPUs (processes); the launcher starts this many")
    ap.add_argument("--models", default="llama-3.1-8b", help="comma list; empty: no sweep (probe/check only)")
    ap.add_argument("--prompts", default=",".join(map(str, DEFAULT_PROMPTS)), help="comma list of prompt lengths")
    ap.add_argument("--gen", type=int, default=128, help="generated tokens per point (gen-1 timed steps)")
    ap.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    ap.add_argument("--device", default="cuda", help="cuda (NCCL) or cpu (gloo, for tests)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--probe", action="store_true", help="measure all-reduce/all-gather first")
    ap.add_argument("--probe-sizes", default="", help="all-reduce bytes (default 2 KiB..64 MiB)")
    ap.add_argument("--probe-gather-sizes", default="", help="all-gather bytes per rank (default 64 KiB..256 MiB)")
    ap.add_argument("--check", action="store_true", help="check TP decode against one process first (tiny models)")
    ap.add_argument("--check-models", default=",".join(CHECK_MODELS))
    ap.add_argument("--no-warm-prefill", action="store_true",
                    help="skip the untimed full-size prefill before each point (saves its time at long prompts)")
    ap.add_argument("--budget-s", type=float, default=None, help="start no point after this many seconds")
    ap.add_argument("--timeout-s", type=float, default=None, help="kill the workers after this (default budget + 300)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--deadline-unix", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hard-deadline-unix", type=float, default=None, help=argparse.SUPPRESS)
    return ap


def _under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.worker or _under_torchrun():
        if args.deadline_unix is None and args.budget_s is not None:
            args.deadline_unix = time.time() + args.budget_s
        if args.hard_deadline_unix is None:
            args.hard_deadline_unix = time.time() + (args.timeout_s or (args.budget_s or 3600.0) + STARTUP_S)
        worker(args)  # does not return
    from roofline.errors import RooflineError
    from roofline.measurements import read_measurements

    t0 = time.monotonic()
    try:
        path = run_tp_calibration(
            card=args.card, models=_csv_list(args.models), prompts=[int(p) for p in _csv_list(args.prompts)],
            gen=args.gen, batches=[int(b) for b in _csv_list(args.batches)], tp=args.tp, out_dir=args.out,
            device=args.device, budget_s=args.budget_s, resume=args.resume, probe=args.probe, check=args.check,
            check_models=_csv_list(args.check_models),
            seed=args.seed, warm_prefill=not args.no_warm_prefill, timeout_s=args.timeout_s,
            probe_sizes=[int(b) for b in _csv_list(args.probe_sizes)],
            probe_gather_sizes=[int(b) for b in _csv_list(args.probe_gather_sizes)])
        failed = False
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        path, failed = measurements_path(args.out, args.card, args.tp), True
    print(f"=== tp {args.tp}: {time.monotonic() - t0:.1f} s wall", flush=True)
    if path.exists():
        print(f"\n{path.name}")
        print(f"{'model':<14} {'prompt':>6} {'batch':>5} {'ttft_s':>8} {'tpot_ms':>8} {'p10':>7} {'p90':>7} "
              f"{'tok/s':>9} {'peak_GiB':>8}")
        for r in read_measurements(path):
            if not r.ok:
                print(f"{r.model:<14} {r.prompt_tokens:>6} {r.batch:>5} OOM")
                continue
            peak = "" if r.peak_mem_gib is None else f"{r.peak_mem_gib:.2f}"
            print(f"{r.model:<14} {r.prompt_tokens:>6} {r.batch:>5} {r.ttft_s:>8.4f} {r.tpot_s * 1e3:>8.3f} "
                  f"{r.tpot_p10_s * 1e3:>7.3f} {r.tpot_p90_s * 1e3:>7.3f} {r.batch / r.tpot_s:>9,.0f} {peak:>8}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
