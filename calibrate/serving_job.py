"""Serving runs on the GPU machine: request streams through calibrate/serving_loop.py.

    PYTHONUNBUFFERED=1 python3 -m calibrate.serving_job --out "$OUT" --model qwen2.5-1.5b \\
        --max-num-seqs 64 --max-model-len 2048 --streams mixed --rates 4,16,64 --count 400 \\
        --seed 1 --kv-capacity-tokens 24000 --budget-s 240 2>&1 | tee "$OUT/log.txt"

builds the model once (random weights, static KV cache, one CUDA graph per decode bucket), then
serves every ``--runs`` item (or every stream x rate, or every ``--requests`` file) in turn,
each on a fresh clock, and writes per run ``requests-NAME.csv``, ``iterations-NAME.csv``,
``run-NAME.json`` and the stream itself, ``stream-NAME.csv`` (roofline/serving_runs.py documents
and reads them). Run names are ``MODEL-STREAM-rRATE-nCOUNT-sSEED`` (rate 2.5 -> r2p5) or
``MODEL-FILESTEM``.

``--budget-s`` bounds the whole job: a run stops admitting at its deadline (the sequences already
running finish; the rest are reported unserved, ``deadline.hit`` in its JSON), and a run that
would start with too little time left is skipped. ``--run-limit-s`` caps each run's admission.

Canned streams (``--streams``): lengths drawn from numpy default_rng([seed, 1]), log-uniform
integers in [lo, hi] (STREAMS); Poisson arrivals at ``--rates`` from default_rng(seed)
.exponential(1 / rate), cumulated -- the generator roofline/batching.py uses, so a simulation
with the same seed and rate draws the same arrivals. Rate ``0`` queues every request at t = 0.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback
from pathlib import Path

from roofline.atomic import model_file_label, safe_name

#: name -> ((prompt lo, hi), (gen lo, hi)): log-uniform integer lengths
STREAMS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "mixed": ((64, 1024), (16, 256)),
    "short": ((32, 256), (8, 64)),
    "long-gen": ((64, 256), (128, 512)),
    "long-prompt": ((512, 1536), (16, 64)),
    "fixed": ((256, 256), (128, 128)),
}
RESERVE_S = 5.0  # time kept back per run for draining the running sequences and writing files
MIN_RUN_S = 10.0  # a run with less admission time than this is skipped


def print_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- streams ------------------------------------------------------------------------------
def poisson_arrivals(count: int, rate_per_s: float, seed: int):
    """Cumulated exponential gaps, numpy default_rng(seed): roofline/batching.py's generator."""
    import numpy as np

    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate_per_s, count))


def _log_uniform(rng, lo: int, hi: int, count: int):
    import numpy as np

    if lo == hi:
        return np.full(count, lo, dtype=np.int64)
    x = np.exp(rng.uniform(math.log(lo), math.log(hi + 1), count))
    return np.clip(np.floor(x), lo, hi).astype(np.int64)


def stream_requests(name: str, count: int, rate_per_s: float | None, seed: int = 0) -> list:
    """A canned stream: ``count`` requests of STREAMS[name], Poisson arrivals at ``rate_per_s``
    (None or 0: all at t = 0)."""
    import numpy as np

    from calibrate.serving_loop import Request
    from roofline.errors import RooflineError

    if name not in STREAMS:
        raise RooflineError(f"unknown stream {name!r}; choose one of {', '.join(STREAMS)}")
    if count < 1:
        raise RooflineError(f"count must be at least 1, not {count}")
    (plo, phi), (glo, ghi) = STREAMS[name]
    rng = np.random.default_rng([seed, 1])
    prompts = _log_uniform(rng, plo, phi, count)
    gens = _log_uniform(rng, glo, ghi, count)
    arrivals = poisson_arrivals(count, rate_per_s, seed) if rate_per_s else np.zeros(count)
    return [Request(i, float(a), int(p), int(g)) for i, (a, p, g) in enumerate(zip(arrivals, prompts, gens))]


def file_requests(path, rate_per_s: float | None = None, seed: int = 0) -> list:
    """A request file's requests (file order = request id); ``rate_per_s`` replaces its arrivals
    with Poisson ones (as ``roofline simulate --arrival-rate``); without either, all at t = 0."""
    from calibrate.serving_loop import Request
    from roofline.serving_runs import read_request_file

    rows = read_request_file(path)
    arrivals = [r["arrival_s"] or 0.0 for r in rows]
    if rate_per_s:
        arrivals = poisson_arrivals(len(rows), rate_per_s, seed).tolist()
    return [Request(i, float(a), r["prompt_tokens"], r["gen_tokens"]) for i, (a, r) in enumerate(zip(arrivals, rows))]


#: options that must be whole numbers of at least 1 (when given)
WHOLE_OPTIONS = ("max_num_seqs", "max_model_len", "max_num_batched_tokens", "block_size", "kv_capacity_tokens")


def check_serving_options(options: dict, arrival_rate=None, deadline_s=None) -> None:
    """One-line errors for option values no run could use, before anything is built."""
    from roofline.errors import RooflineError

    for key in WHOLE_OPTIONS:
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise RooflineError(f"{key} must be a whole number of at least 1, not {value!r}")
    share = options.get("gpu_memory_utilization")
    if share is not None and not (isinstance(share, (int, float)) and 0 < share <= 1):
        raise RooflineError(f"gpu_memory_utilization must be a fraction in (0, 1], not {share!r}")
    for key, value in (("arrival_rate", arrival_rate), ("budget_s", deadline_s)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise RooflineError(f"{key} must be a positive number, not {value!r}")


def _check_model_early(model: str, device: str, options: dict) -> None:
    """The session's refusals that need no request (a model the loop does not run; with
    max_model_len given, one that would not fit), before a long request file is read."""
    import torch

    from calibrate.configs import load_model_config
    from calibrate.graph_engine import Shapes
    from calibrate.serving_loop import check_servable

    config = load_model_config(model)
    check_servable(Shapes.from_config(config), options.get("max_model_len") or 0, model)
    dev = torch.device(device)
    if options.get("max_model_len") and (dev.type == "cpu" or (dev.type == "cuda" and torch.cuda.is_available())):
        check_session_fits(model, config, dev, options.get("max_num_seqs") or 64, options["max_model_len"],
                           options.get("dtype") or "bfloat16")


def default_max_model_len(requests) -> int:
    """The longest request's p + g - 1 KV tokens, rounded up to a multiple of 256."""
    most = max(r.prompt_tokens + r.gen_tokens - 1 for r in requests)
    return -(-most // 256) * 256


# ---- a model built once, several runs --------------------------------------------------------
SESSION_OPTIONS = ("max_num_seqs", "max_model_len", "max_num_batched_tokens", "dtype", "use_graph", "seed",
                   "prefill_graphs", "spin_wait")
RUN_OPTIONS = ("block_size", "gpu_memory_utilization", "kv_capacity_tokens", "max_num_batched_tokens", "policy")


def session_memory_bytes(model: str, config: dict, max_num_seqs: int, max_model_len: int, dtype: str) -> int:
    """What a session allocates up front, about: the weights and the static KV cache (K and V, every
    layer, max_num_seqs + 1 slots -- the spare one the prefill graphs pad into -- of max_model_len
    rounded up to graph_engine.RING_ALIGN rows). Activations and graphs come on top."""
    from calibrate.graph_engine import Shapes
    from calibrate.grid import ModelSize
    from calibrate.serving_loop import static_cache_shape

    size = ModelSize.from_config(model, config)  # also refuses a config whose shape fields are broken
    per_element = {"bfloat16": 2, "float16": 2, "float32": 4}.get(dtype, 2)
    kv = 2 * math.prod(static_cache_shape(Shapes.from_config(config), max_num_seqs, max_model_len))
    return per_element * (size.params + kv)


def check_session_fits(model: str, config: dict, device, max_num_seqs: int, max_model_len: int,
                       dtype: str = "bfloat16", headroom: float = 0.9) -> None:
    """Refuse (one line) a session that could not be built: a model the loop does not run
    (serving_loop.check_servable), or weights + static KV cache beyond ``headroom`` x the memory
    free on the GPU (or, on the CPU, MemAvailable: there an out-of-memory ends the process
    instead of raising), before anything is allocated."""
    from calibrate.graph_engine import Shapes
    from calibrate.serving_loop import check_servable
    from calibrate.timing import mem_available_bytes
    from roofline.errors import RooflineError

    check_servable(Shapes.from_config(config), max_model_len, model)
    if device.type == "cuda":
        import torch

        # free on the device, plus what torch's allocator holds cached but unused (an earlier session's)
        free = torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        where = "free on the GPU"
    else:
        free, where = mem_available_bytes(), "available (MemAvailable)"
    refusal = session_fit_refusal(model, config, max_num_seqs, max_model_len, free, where, dtype, headroom)
    if refusal:
        raise RooflineError(refusal)


def session_fit_refusal(model: str, config: dict, max_num_seqs: int, max_model_len: int, free: float | None,
                        where: str, dtype: str = "bfloat16", headroom: float = 0.9) -> str | None:
    """The line refusing a session whose weights and static KV cache need more than ``headroom`` x
    ``free`` bytes (``where``: what the free memory is), or None when it fits or ``free`` is unknown.
    check_session_fits applies it to the device's free memory; the rate pickers
    (calibrate/runs/pick_rates_call102.py) to a card's memory, before any call."""
    need = session_memory_bytes(model, config, max_num_seqs, max_model_len, dtype)
    if free is None or need <= headroom * free:
        return None
    return (f"{model} does not fit: its weights and static KV cache ({max_num_seqs} slots of {max_model_len} "
            f"tokens) need about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB {where}; "
            "use fewer --max-num-seqs, a smaller --max-model-len or a smaller model")


class ServingSession:
    """One model on one device: weights, static KV cache and decode graphs, built (and warmed up)
    once; ``run`` serves a stream on a fresh clock and writes its files."""

    def __init__(self, model: str, device: str = "cuda", *, max_num_seqs: int = 64, max_model_len: int = 2048,
                 max_num_batched_tokens: int | None = None, dtype: str = "bfloat16", use_graph: bool | None = None,
                 seed: int = 0, progress=print_to_stderr, weights=None, prefill_graphs: bool | None = None,
                 spin_wait: bool = False):
        import torch

        from calibrate.configs import load_model_config
        from calibrate.serving_loop import ModelExecutor
        from calibrate.timing import environment, synchronize

        self.model, self.progress, self.seed = model, progress, seed
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            from calibrate.runner import NO_GPU_MESSAGE
            from roofline.errors import RooflineError

            raise RooflineError(NO_GPU_MESSAGE)
        self.env = environment(self.device)
        self.max_num_batched_tokens = max_num_batched_tokens or max(max_model_len, 2048)
        config = load_model_config(model)
        self.model_config = config  # recorded in each run: a config.json path need not exist where it is replayed
        if weights is None:  # tests hand in their own small weights
            check_session_fits(model, config, self.device, max_num_seqs, max_model_len, dtype)
        t0 = time.monotonic()
        self.executor = ModelExecutor(config, device=device, max_num_seqs=max_num_seqs,
                                      max_model_len=max_model_len, seed=seed, dtype=dtype, use_graph=use_graph,
                                      weights=weights, max_num_batched_tokens=self.max_num_batched_tokens,
                                      prefill_graphs=prefill_graphs, spin_wait=spin_wait)
        synchronize(self.device)
        t1 = time.monotonic()
        self.executor.warm_up(self.max_num_batched_tokens)
        synchronize(self.device)
        t2 = time.monotonic()
        self.executor.capture()
        t3 = time.monotonic()
        self.times = {"build_s": t1 - t0, "warmup_s": t2 - t1, "capture_s": t3 - t2}
        ex = self.executor
        self.memory = {"weight_bytes": ex.weight_bytes, "static_kv_bytes": ex.static_kv_bytes,
                       "kv_bytes_per_token": ex.kv_bytes_per_token}
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
            self.memory.update(
                total_memory_bytes=torch.cuda.get_device_properties(self.device).total_memory,
                setup_peak_allocated_bytes=peak,
                workspace_bytes=max(0, peak - ex.weight_bytes - ex.static_kv_bytes),
            )
        progress(f"{model}: built in {t1 - t0:.1f} s, warm-up {t2 - t1:.1f} s, {len(ex.graphs)} graphs captured "
                 f"in {t3 - t2:.1f} s (buckets {ex.buckets}); weights {ex.weight_bytes / 2**30:.2f} GiB, "
                 f"static KV {ex.static_kv_bytes / 2**30:.2f} GiB; {len(ex.prefill_graph_of)} prefill graphs "
                 f"{ex.prefill_attention_note or ex.prefill_graph_note}, {len(ex.chunk_graph_of)} chunk graphs "
                 f"({ex.chunk_gqa} K/V heads) {ex.chunk_graph_note}")

    def pool(self, block_size: int, gpu_memory_utilization: float, kv_capacity_tokens: int | None):
        """(num_blocks, source): the override, vLLM's memory sizing on CUDA, or (CPU) the static
        cache's own capacity, max_num_seqs x ceil(max_model_len / block_size)."""
        from calibrate.serving_loop import blocks_for, kv_pool_blocks

        if kv_capacity_tokens:
            return kv_capacity_tokens // block_size, "kv_capacity_tokens"
        if "total_memory_bytes" in self.memory:
            m = self.memory
            return kv_pool_blocks(m["total_memory_bytes"], gpu_memory_utilization, m["weight_bytes"],
                                  m["workspace_bytes"], m["kv_bytes_per_token"], block_size), "gpu_memory_utilization"
        ex = self.executor
        return ex.max_num_seqs * blocks_for(ex.max_model_len, block_size), "static_cache"

    def run(self, requests, name: str, out_dir, *, card: str = "h200", block_size: int = 16,
            gpu_memory_utilization: float = 0.9, kv_capacity_tokens: int | None = None,
            max_num_batched_tokens: int | None = None, policy: str = "prefill-first",
            deadline_s: float | None = None, stream: dict | None = None, wide_host_probe: bool = False) -> Path:
        """Serve ``requests`` (a list of serving_loop.Request); returns the run JSON's path. With
        ``wide_host_probe`` the host probe is also taken with every slot decoding, before and after the
        clock (config's host_probe_wide and host_probe_wide_after; the replay reads neither)."""
        import json

        import torch

        from calibrate.serving_loop import SchedulerConfig, device_probe, host_probe, serve
        from calibrate.timing import reset_peak, utc_now
        from roofline.atomic import write_text_atomic
        from roofline.serving_runs import (ITERATION_COLUMNS, REQUEST_COLUMNS, STREAM_COLUMNS, csv_text,
                                           run_paths, summarize)

        name = safe_name(name)
        ex = self.executor
        paths = run_paths(out_dir, name)
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        write_text_atomic(paths["stream"], csv_text(
            [{"prompt_tokens": r.prompt_tokens, "gen_tokens": r.gen_tokens, "arrival_s": r.arrival_s}
             for r in sorted(requests, key=lambda r: r.request_id)], STREAM_COLUMNS))
        num_blocks, source = self.pool(block_size, gpu_memory_utilization, kv_capacity_tokens)
        config = SchedulerConfig(max_num_seqs=ex.max_num_seqs, max_model_len=ex.max_model_len, num_blocks=num_blocks,
                                 block_size=block_size, policy=policy,
                                 max_num_batched_tokens=max_num_batched_tokens or self.max_num_batched_tokens)
        probe = host_probe(ex, ex.max_num_seqs, ex.max_model_len, seed=self.seed)  # this machine's host speed, before the clock
        gpu_probe = device_probe(ex, ex.max_model_len)  # this process's decode steps' speed, before the clock
        wide = {}
        if wide_host_probe:  # the host probe with every slot decoding, as a full server's steps run
            wide["host_probe_wide"] = host_probe(ex, ex.max_num_seqs, ex.max_model_len, seed=self.seed,
                                                 seqs=ex.max_num_seqs)
        reset_peak(self.device)
        started = utc_now()
        result = serve(requests, ex, config, deadline_s=deadline_s, seed=self.seed, progress=self.progress)
        # the loop's t = 0 as a Unix time (its clock is time.perf_counter), to line a run's iterations up
        # with samples taken beside it (calibrate/runs/power_sampler.py)
        clock_zero_unix_s = time.time() - (time.perf_counter() - result.started_at)
        summary = summarize(result.requests, result.iterations)
        summary["deadline_hit"] = result.deadline_hit
        memory = dict(self.memory)
        if self.device.type == "cuda":
            memory["run_peak_allocated_bytes"] = torch.cuda.max_memory_allocated(self.device)
        probe_after = host_probe(ex, ex.max_num_seqs, ex.max_model_len, seed=self.seed)  # the host again, after
        gpu_probe_after = device_probe(ex, ex.max_model_len)  # and the GPU
        if wide_host_probe:
            wide["host_probe_wide_after"] = host_probe(ex, ex.max_num_seqs, ex.max_model_len, seed=self.seed,
                                                       seqs=ex.max_num_seqs)
        run = {
            "name": name,
            "config": {
                "model": self.model, "model_config": self.model_config,
                "card": card, "device": str(self.device), "policy": policy,
                "max_num_seqs": ex.max_num_seqs, "max_model_len": ex.max_model_len, "block_size": block_size,
                "num_blocks": num_blocks, "kv_capacity_tokens": num_blocks * block_size, "kv_pool_source": source,
                "max_num_batched_tokens": config.batched_tokens, "gpu_memory_utilization": gpu_memory_utilization,
                "capture_sizes": ex.buckets, "cuda_graphs": bool(ex.graphs), "dtype": str(ex.dtype).replace("torch.", ""),
                "seed": self.seed, "prefill_attention": ex.prefill_attention,
                "prefill_attention_note": ex.prefill_attention_note,
                "prefill_graphs": bool(ex.prefill_graph_of),
                "prefill_token_buckets": ex.prefill_buckets if ex.prefill_graph_of else [],
                "prefill_graph_note": ex.prefill_graph_note,
                "chunk_graphs": bool(ex.chunk_graph_of),
                "chunk_graph_note": ex.chunk_graph_note,
                "chunk_graph_kv_heads": ex.chunk_gqa if ex.chunk_graph_of else "",
                "decode_attention": "masked matmul over every bucket slot's max_model_len positions",
                "host_probe": probe,
                "host_probe_after": probe_after,
                "device_probe": gpu_probe,
                "device_probe_after": gpu_probe_after,
                "host_wait": "spin" if ex.spin_wait else "sync",
                **wide,
            },
            "summary": summary,
            "stream": stream or {},
            "memory": memory,
            "times": {**self.times, "serve_wall_s": result.wall_s, "started": started,
                      "clock_zero_unix_s": clock_zero_unix_s},
            "deadline": {"deadline_s": deadline_s, "hit": result.deadline_hit, "unserved": summary["unserved"]},
            "environment": self.env,
        }
        write_text_atomic(paths["requests"], csv_text(result.requests, REQUEST_COLUMNS))
        write_text_atomic(paths["iterations"], csv_text(result.iterations, ITERATION_COLUMNS))
        write_text_atomic(paths["run"], json.dumps(run, indent=2) + "\n")
        self.progress(_summary_line(name, summary, result.wall_s))
        return paths["run"]

    def close(self) -> None:
        from calibrate.timing import free_memory

        self.executor.close()
        self.executor = None
        free_memory()


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def _summary_line(name: str, s: dict, wall_s: float) -> str:
    tput = "-" if s["throughput_tok_s"] is None else f"{s['throughput_tok_s']:,.0f}"
    return (f"{name}: {s['finished']}/{s['requests']} served in {wall_s:.1f} s, {tput} tok/s; "
            f"TTFT p50/p99 {_ms(s['ttft_p50_s'])}/{_ms(s['ttft_p99_s'])} ms, "
            f"TPOT p50/p99 {_ms(s['tpot_p50_s'])}/{_ms(s['tpot_p99_s'])} ms; "
            f"max running {s.get('max_running')}, preemptions {s['preemptions']}"
            f"{', DEADLINE HIT' if s.get('deadline_hit') else ''}")


def run_serving(card: str, model: str, requests, out_dir, device: str = "cuda", *, name: str | None = None,
                arrival_rate: float | None = None, seed: int = 0, deadline_s: float | None = None,
                progress=print_to_stderr, **engine_options) -> Path:
    """One serving run: ``requests`` is a request file's path (CSV or JSONL, as ``roofline
    simulate --requests``) or a list of serving_loop.Request. ``arrival_rate`` replaces a file's
    arrivals with Poisson ones (seed ``seed``). ``engine_options``: SESSION_OPTIONS and
    RUN_OPTIONS (max_model_len defaults to the longest request, rounded up to 256).
    Returns the run JSON's path; the other files lie beside it."""
    from roofline.errors import RooflineError

    unknown = sorted(set(engine_options) - set(SESSION_OPTIONS) - set(RUN_OPTIONS))
    if unknown:
        raise RooflineError(f"unknown serving option {unknown[0]!r}; the options are "
                            f"{', '.join(sorted(set(SESSION_OPTIONS) | set(RUN_OPTIONS)))}")
    check_serving_options(engine_options, arrival_rate, deadline_s)
    from calibrate.runner import check_device

    device = check_device(device)
    _check_model_early(model, device, engine_options)
    stream: dict = {"seed": seed, "rate_per_s": arrival_rate}
    if isinstance(requests, (str, os.PathLike)):
        stream["source"] = str(requests)
        name = name or f"{model_file_label(model)}-{safe_name(Path(requests).stem)}"
        requests = file_requests(requests, arrival_rate, seed)
    else:
        stream["source"] = "requests"
        name = name or f"{model_file_label(model)}-requests"
    stream["count"] = len(requests)
    session_kw = {k: v for k, v in engine_options.items() if k in SESSION_OPTIONS}
    session_kw.setdefault("max_model_len", default_max_model_len(requests))
    run_kw = {k: v for k, v in engine_options.items() if k in RUN_OPTIONS and k != "max_num_batched_tokens"}
    session = ServingSession(model, device, progress=progress, **session_kw)
    try:
        return session.run(requests, name, out_dir, card=card, deadline_s=deadline_s, stream=stream, **run_kw)
    finally:
        session.close()


# ---- the job --------------------------------------------------------------------------------
def _csv_list(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def parse_run(text: str, count: int, seed: int) -> tuple[str, float, int, int]:
    """``STREAM@RATE[:COUNT[:SEED]]`` -> (stream, rate, count, seed); count and seed default."""
    from roofline.errors import RooflineError

    stream, at, rest = text.partition("@")
    parts = rest.split(":") if at else []
    try:
        if not 1 <= len(parts) <= 3:
            raise ValueError
        rate = float(parts[0])
        count = int(parts[1]) if len(parts) > 1 else count
        seed = int(parts[2]) if len(parts) > 2 else seed
    except ValueError:
        raise RooflineError(f"--runs item {text!r}: use STREAM@RATE[:COUNT[:SEED]], e.g. mixed@10:300:1") from None
    if stream not in STREAMS:
        raise RooflineError(f"--runs item {text!r}: unknown stream {stream!r}; choose one of {', '.join(STREAMS)}")
    if rate < 0 or count < 1:
        raise RooflineError(f"--runs item {text!r}: the rate must be >= 0 and the count >= 1")
    return stream, rate, count, seed


def _rate_label(rate: float) -> str:
    return f"r{rate:g}".replace(".", "p")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "serving-out"))
    ap.add_argument("--card", default="h200")
    ap.add_argument("--model", default="qwen2.5-1.5b", help="comma list: one session per model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", default=None,
                    help="comma list of STREAM@RATE[:COUNT[:SEED]] (e.g. mixed@10:300,long-gen@20:300:2); "
                         "default: every --streams x --rates with --count and --seed")
    ap.add_argument("--streams", default="mixed", help=f"comma list of {', '.join(STREAMS)}")
    ap.add_argument("--rates", default="4,16,64", help="comma list, requests/s (0: all at t = 0)")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1, help="stream seed (lengths and arrivals)")
    ap.add_argument("--requests", default=None, help="comma list of request files: run these instead of streams")
    ap.add_argument("--arrival-rate", type=float, default=None, help="with --requests: Poisson arrivals instead")
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None, help="default max(max-model-len, 2048)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--kv-capacity-tokens", type=int, default=None, help="logical KV pool size (forces preemption)")
    ap.add_argument("--policy", default="prefill-first")
    ap.add_argument("--weight-seed", type=int, default=0)
    ap.add_argument("--eager-prefill", action="store_true",
                    help="prefill passes eagerly (the loop before prefill graphs), not as CUDA-graph replays")
    ap.add_argument("--spin-wait", action="store_true",
                    help="the host polls each pass's end instead of blocking in the token sync")
    ap.add_argument("--wide-host-probe", action="store_true",
                    help="also take the host probe with every slot decoding, before and after each run's clock "
                         "(recorded as host_probe_wide; the replay does not read it)")
    ap.add_argument("--budget-s", type=float, default=None, help="the whole job's wall-clock budget")
    ap.add_argument("--run-limit-s", type=float, default=None, help="each run's admission deadline")
    args = ap.parse_args(argv)

    from calibrate.timing import environment, nvidia_smi, torch_device

    t_start = time.monotonic()
    budget_end = None if args.budget_s is None else t_start + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print("environment:", environment(torch_device(args.device)), flush=True)
    if args.device.startswith("cuda"):
        print("nvidia-smi:", nvidia_smi("name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,"
                                        "power.limit,mig.mode.current"), flush=True)
    plans = []  # (label, stream info, requests factory)
    if args.requests:
        for path in _csv_list(args.requests):
            plans.append((Path(path).stem, {"source": path, "rate_per_s": args.arrival_rate, "seed": args.seed},
                          lambda p=path: file_requests(p, args.arrival_rate, args.seed)))
    else:
        specs = ([parse_run(text, args.count, args.seed) for text in _csv_list(args.runs)] if args.runs else
                 [(s, float(r), args.count, args.seed) for s in _csv_list(args.streams) for r in _csv_list(args.rates)])
        for stream, rate, count, seed in specs:
            info = {"source": "canned", "stream": stream, "prompt_range": STREAMS.get(stream, [None])[0],
                    "gen_range": STREAMS.get(stream, [None, None])[1], "count": count,
                    "rate_per_s": rate or None, "seed": seed}
            plans.append((f"{stream}-{_rate_label(rate)}-n{count}-s{seed}", info,
                          lambda s=stream, r=rate, n=count, d=seed: stream_requests(s, n, r or None, d)))
    failed = False
    written = []
    for model in _csv_list(args.model):
        try:
            session = ServingSession(model, args.device, max_num_seqs=args.max_num_seqs,
                                     max_model_len=args.max_model_len, max_num_batched_tokens=args.max_num_batched_tokens,
                                     seed=args.weight_seed, prefill_graphs=False if args.eager_prefill else None,
                                     spin_wait=args.spin_wait)
        except Exception:  # noqa: BLE001 - one model's failure must not cost the others
            traceback.print_exc()
            failed = True
            continue
        for label, info, make in plans:
            deadline = args.run_limit_s
            if budget_end is not None:
                left = budget_end - time.monotonic() - RESERVE_S
                if left < MIN_RUN_S:
                    print(f"=== {model}-{label}: skipped, {left + RESERVE_S:.0f} s of the budget left", flush=True)
                    continue
                deadline = left if deadline is None else min(deadline, left)
            try:
                requests = make()
                info = {**info, "count": len(requests)}
                written.append(session.run(
                    requests, f"{model_file_label(model)}-{label}", out, card=args.card, block_size=args.block_size,
                    gpu_memory_utilization=args.gpu_memory_utilization, kv_capacity_tokens=args.kv_capacity_tokens,
                    max_num_batched_tokens=args.max_num_batched_tokens, policy=args.policy, deadline_s=deadline,
                    stream=info, wide_host_probe=args.wide_host_probe))
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                print(f"=== {model_file_label(model)}-{label}: FAILED", flush=True)
                failed = True
        session.close()
    print(f"=== total {time.monotonic() - t_start:.1f} s wall, {len(written)} run(s) written to {out}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
