"""Published decode measurements: one row per measured point, transcribed from public sources.

The files are ``hardware_profiles/measurements/published/<engine>.csv`` (engine = llama.cpp,
vllm, tensorrt-llm, lmdeploy, sglang, mlc, exllamav2); their README lists every source. The
engine profiles are fitted on the rows with ``reserved = no`` and validated on ``reserved = yes``.

Columns (a header row is required; order is free)::

    source_url, source_title, published, engine, engine_version, card, card_as_named,
    model, model_as_named, weight_format, kv_dtype, tp, batch, prompt_tokens, gen_tokens,
    metric, value, unit, reserved, notes

Optional columns (blank or absent = the default in brackets)::

    gpus            GPUs the run used [tp]; larger than tp only for a pipeline / layer split
                    (llama.cpp's default ``-sm layer`` over several GPUs)
    backend         cuda | metal | vulkan | rocm | sycl | cpu [not stated]
    flash_attn      yes | no [not stated]
    context_depth   tokens already in the KV cache before the measured phase [0]
                    (llama-bench ``-d``: ``tg32 @ d4096`` is prompt 0, depth 4096, gen 32)
    batching        static: one batch of ``batch`` requests started together, fixed lengths
                    (llama-bench, gptSessionBenchmark); continuous: continuous batching with
                    ``batch`` requests in flight (a serving benchmark's max concurrency);
                    offline: every request queued at once, the engine picks the running batch
                    (``batch`` is then its cap when the source states one, else blank) [not stated]
    value_sd        the source's standard deviation of ``value``, same unit [not stated]

``metric`` and its allowed units (the value stays in the source's unit; this module converts)::

    decode_tok_s_per_seq  tok/s   output tokens per second of ONE sequence
    decode_tok_s_total    tok/s   output tokens per second summed over the batch
    prefill_tok_s         tok/s   prompt tokens per second (all sequences of the batch)
    output_tok_s_total    tok/s,  output tokens over the wall time of the whole run, prefill
                          tok/s/gpu  included (a throughput benchmark's "output throughput");
                                  per GPU when the source says so (times gpus in base_value)
    tpot_s                s, ms   time per output token of one sequence
    ttft_s                s, ms   time to first token
    e2e_s                 s, ms   request latency, first prompt token in to last token out

``PublishedPoint.tpot_s`` is the per-sequence decode step in seconds where the row allows it:
1/value for ``decode_tok_s_per_seq``, batch/value for ``decode_tok_s_total`` (None when the
batch is not stated), the value itself for ``tpot_s``.

``reserved`` must follow the hold-out rule of issues 10 and 16 (``expected_reserved``): yes for
RTX 3090, L40S, H100 PCIe, A100 40GB, every H200 point not published by NVIDIA, and every Apple
M-series Pro or Ultra chip; no otherwise. A row that disagrees is an error, so the split cannot
drift by hand.

Pure: stdlib, ``roofline.errors`` and ``roofline.units`` (itself stdlib only).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable

from roofline.errors import RooflineError
from roofline.units import MS

#: Where the shipped CSVs live.
PUBLISHED_DIR = Path(__file__).resolve().parent.parent / "hardware_profiles" / "measurements" / "published"

COLUMNS: tuple[str, ...] = (
    "source_url",
    "source_title",
    "published",
    "engine",
    "engine_version",
    "card",
    "card_as_named",
    "model",
    "model_as_named",
    "weight_format",
    "kv_dtype",
    "tp",
    "batch",
    "prompt_tokens",
    "gen_tokens",
    "metric",
    "value",
    "unit",
    "reserved",
    "notes",
)
OPTIONAL_COLUMNS: tuple[str, ...] = ("gpus", "backend", "flash_attn", "context_depth", "batching", "value_sd")

ENGINES: tuple[str, ...] = ("llama.cpp", "vllm", "tensorrt-llm", "lmdeploy", "sglang", "mlc", "exllamav2")
WEIGHT_FORMATS: tuple[str, ...] = (
    "fp32", "bf16", "fp16", "fp8", "int8", "int4",
    "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0",
    "awq", "gptq", "mxfp4", "nvfp4",
)
KV_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "q8_0", "q4_0")
BACKENDS: tuple[str, ...] = ("cuda", "metal", "vulkan", "rocm", "sycl", "cpu")
#: How the batch was formed (see the module docstring).
BATCHING: tuple[str, ...] = ("static", "continuous", "offline")

#: Allowed units per metric, with the factor to the base unit (tok/s or seconds).
METRIC_UNITS: dict[str, dict[str, float]] = {
    "decode_tok_s_per_seq": {"tok/s": 1.0},
    "decode_tok_s_total": {"tok/s": 1.0},
    "prefill_tok_s": {"tok/s": 1.0},
    "output_tok_s_total": {"tok/s": 1.0, "tok/s/gpu": 1.0},
    "tpot_s": {"s": 1.0, "ms": MS},
    "ttft_s": {"s": 1.0, "ms": MS},
    "e2e_s": {"s": 1.0, "ms": MS},
}
_DECODE_METRICS = ("decode_tok_s_per_seq", "decode_tok_s_total", "tpot_s")

#: Cards held out for validation whatever the source (issue 10).
RESERVED_CARDS: frozenset[str] = frozenset({"rtx3090", "l40s", "h100-pcie", "a100-40gb"})
#: Apple chips held out (issue 16): every M-series Pro or Ultra, e.g. apple-m2-ultra-76c.
_APPLE_HELD_OUT = re.compile(r"^apple-m\d+-(pro|ultra)(-|$)")
#: First-party (NVIDIA's own) publications: their H200 points are for fitting, everyone else's held out.
_NVIDIA_URL = re.compile(r"^https?://([a-z0-9.-]+\.)?nvidia\.com/|^https?://github\.com/NVIDIA/|^https?://nvidia\.github\.io/", re.I)

_ID = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


@dataclass(frozen=True)
class PublishedPoint:
    """One transcribed measurement; ``value`` is in ``unit`` as the source gave it."""

    source_url: str
    source_title: str
    published: str
    engine: str
    engine_version: str
    card: str
    card_as_named: str
    model: str
    model_as_named: str
    weight_format: str
    kv_dtype: str | None
    tp: int
    batch: int | None
    prompt_tokens: int
    gen_tokens: int
    metric: str
    value: float
    unit: str
    reserved: bool
    notes: str
    gpus: int | None = None
    backend: str | None = None
    flash_attn: bool | None = None
    context_depth: int = 0
    batching: str | None = None
    value_sd: float | None = None

    @property
    def gpu_count(self) -> int:
        """GPUs the run used (``gpus`` when stated, else ``tp``)."""
        return self.gpus or self.tp

    @property
    def base_value(self) -> float:
        """``value`` in base units: tok/s (all GPUs) for the rate metrics, seconds for the times."""
        scale = METRIC_UNITS[self.metric][self.unit] * (self.gpu_count if self.unit == "tok/s/gpu" else 1)
        return self.value * scale

    @property
    def tpot_s(self) -> float | None:
        """Per-sequence time per output token in seconds, where the row determines it."""
        if self.metric == "decode_tok_s_per_seq":
            return 1.0 / self.base_value
        if self.metric == "decode_tok_s_total":
            return None if self.batch is None else self.batch / self.base_value
        if self.metric == "tpot_s":
            return self.base_value
        return None

    @property
    def context_tokens(self) -> int:
        """Tokens in the KV cache when the measured phase starts (depth + prompt for decode rows)."""
        return self.context_depth + (self.prompt_tokens if self.metric in _DECODE_METRICS else 0)


def expected_reserved(card: str, source_url: str) -> bool:
    """The hold-out rule: is a point on ``card`` from ``source_url`` reserved for validation?"""
    if card in RESERVED_CARDS or _APPLE_HELD_OUT.match(card):
        return True
    return card == "h200" and not _NVIDIA_URL.match(source_url)


def _text(col: str, raw: str, *, blank_ok: bool = False) -> str | None:
    text = raw.strip()
    if not text:
        if blank_ok:
            return None
        raise ValueError(f"{col}: must not be blank")
    return text


def _int(col: str, raw: str, *, minimum: int, blank_ok: bool = False) -> int | None:
    text = raw.strip()
    if not text:
        if blank_ok:
            return None
        raise ValueError(f"{col}: must not be blank")
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"{col}: {text!r} is not a whole number")
    value = int(text)
    if value < minimum:
        raise ValueError(f"{col}: must be >= {minimum}, got {value}")
    return value


def _float(col: str, raw: str, *, positive: bool, blank_ok: bool = False) -> float | None:
    text = raw.strip()
    if not text:
        if blank_ok:
            return None
        raise ValueError(f"{col}: must not be blank")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{col}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{col}: must be a finite number {'> 0' if positive else '>= 0'}, got {text}")
    return value


def _choice(col: str, raw: str, allowed: Iterable[str], *, blank_ok: bool = False) -> str | None:
    text = raw.strip()
    if not text and blank_ok:
        return None
    allowed = tuple(allowed)
    if text not in allowed:
        raise ValueError(f"{col}: {text!r} is not one of {', '.join(allowed)}")
    return text


def _yes_no(col: str, raw: str, *, blank_ok: bool) -> bool | None:
    text = _choice(col, raw.lower(), ("yes", "no"), blank_ok=blank_ok)
    return None if text is None else text == "yes"


def _point_from_record(record: dict[str, str]) -> PublishedPoint:
    """Build a point from one CSV record; raises ValueError('column: message')."""
    r = {c: record.get(c, "") or "" for c in COLUMNS + OPTIONAL_COLUMNS}
    url = _text("source_url", r["source_url"])
    if not re.match(r"^https?://\S+$", url):
        raise ValueError(f"source_url: {url!r} is not an http(s) address")
    published = _text("published", r["published"])
    if not _DATE.match(published):
        raise ValueError(f"published: {published!r} is not YYYY, YYYY-MM or YYYY-MM-DD")
    ids = {}
    for col in ("card", "model"):
        ids[col] = _text(col, r[col])
        if not _ID.match(ids[col]):
            raise ValueError(f"{col}: {ids[col]!r} must be a lower-case id (a-z, 0-9, '.', '-', '_', '+')")
    metric = _choice("metric", r["metric"], METRIC_UNITS)
    unit = _choice("unit", r["unit"], METRIC_UNITS[metric])
    point = PublishedPoint(
        source_url=url,
        source_title=_text("source_title", r["source_title"]),
        published=published,
        engine=_choice("engine", r["engine"], ENGINES),
        engine_version=_text("engine_version", r["engine_version"]),
        card=ids["card"],
        card_as_named=_text("card_as_named", r["card_as_named"]),
        model=ids["model"],
        model_as_named=_text("model_as_named", r["model_as_named"]),
        weight_format=_choice("weight_format", r["weight_format"], WEIGHT_FORMATS),
        kv_dtype=_choice("kv_dtype", r["kv_dtype"], KV_DTYPES, blank_ok=True),
        tp=_int("tp", r["tp"], minimum=1, blank_ok=True) or 1,
        batch=_int("batch", r["batch"], minimum=1, blank_ok=True),
        prompt_tokens=_int("prompt_tokens", r["prompt_tokens"], minimum=0),
        gen_tokens=_int("gen_tokens", r["gen_tokens"], minimum=0),
        metric=metric,
        value=_float("value", r["value"], positive=True),
        unit=unit,
        reserved=_yes_no("reserved", r["reserved"], blank_ok=False),
        notes=r["notes"].strip(),
        gpus=_int("gpus", r["gpus"], minimum=1, blank_ok=True),
        backend=_choice("backend", r["backend"], BACKENDS, blank_ok=True),
        flash_attn=_yes_no("flash_attn", r["flash_attn"], blank_ok=True),
        context_depth=_int("context_depth", r["context_depth"], minimum=0, blank_ok=True) or 0,
        batching=_choice("batching", r["batching"], BATCHING, blank_ok=True),
        value_sd=_float("value_sd", r["value_sd"], positive=False, blank_ok=True),
    )
    problem = _check_point(point)
    if problem:
        raise ValueError(problem)
    return point


def _check_point(p: PublishedPoint) -> str | None:
    """Cross-column checks, as 'column: message', or None."""
    if p.gpus is not None and p.gpus < p.tp:
        return f"gpus: {p.gpus} is fewer than tp={p.tp}"
    if p.metric in _DECODE_METRICS + ("e2e_s", "output_tok_s_total") and p.gen_tokens == 0:
        return f"gen_tokens: a {p.metric} row needs gen_tokens > 0"
    if p.metric in ("prefill_tok_s", "ttft_s", "e2e_s") and p.prompt_tokens == 0:
        return f"prompt_tokens: a {p.metric} row needs prompt_tokens > 0"
    if p.metric == "decode_tok_s_total" and p.batch is None:
        return "batch: a decode_tok_s_total row needs the batch (or concurrency) the source states"
    want = expected_reserved(p.card, p.source_url)
    if p.reserved != want:
        return (f"reserved: card {p.card!r} from this source must be reserved={'yes' if want else 'no'} "
                "(issue 10/16 hold-out rule)")
    return None


def _identity(p: PublishedPoint) -> tuple:
    """What makes two rows the same measured point (a second copy is a transcription error)."""
    return (p.source_url, p.engine, p.engine_version, p.card, p.card_as_named, p.model, p.weight_format,
            p.kv_dtype, p.tp, p.gpu_count, p.batch, p.prompt_tokens, p.gen_tokens, p.context_depth,
            p.metric, p.backend, p.flash_attn, p.batching)


def read_published(path: str | os.PathLike) -> list[PublishedPoint]:
    """Read and validate one published-measurement CSV. Errors read ``file:line: column: message``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RooflineError(f"{path}: no such file") from None
    except OSError as exc:
        raise RooflineError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise RooflineError(f"{path}: not UTF-8 text") from None
    if not text.strip():
        raise RooflineError(f"{path}: empty file (expected a header row: {', '.join(COLUMNS)})")

    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except csv.Error as exc:
        raise RooflineError(f"{path}:1: malformed CSV ({exc})") from None
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise RooflineError(f"{path}:1: missing column(s) {', '.join(missing)} in the header")
    unknown = [h for h in header if h not in COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        raise RooflineError(f"{path}:1: unknown column(s) {', '.join(unknown)} in the header "
                            f"(optional ones: {', '.join(OPTIONAL_COLUMNS)})")
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise RooflineError(f"{path}:1: duplicate column(s) {', '.join(dupes)} in the header")

    points: list[PublishedPoint] = []
    seen: dict[tuple, int] = {}
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise RooflineError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise RooflineError(f"{path}:{line}: {len(cells)} cells but the header has {len(header)} columns")
        try:
            point = _point_from_record(dict(zip(header, cells)))
        except ValueError as exc:
            raise RooflineError(f"{path}:{line}: {exc}") from None
        if path.stem in ENGINES and point.engine != path.stem:
            raise RooflineError(f"{path}:{line}: engine: {point.engine!r} in a file named for {path.stem!r}")
        key = _identity(point)
        if key in seen:
            raise RooflineError(f"{path}:{line}: metric: the same point as line {seen[key]} (duplicate row)")
        seen[key] = line
        points.append(point)
    if not points:
        raise RooflineError(f"{path}: no data rows after the header")
    return points


def load_published(folder: str | os.PathLike = PUBLISHED_DIR) -> list[PublishedPoint]:
    """Every point of every ``*.csv`` in ``folder`` (sorted by file name), validated."""
    folder = Path(folder)
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise RooflineError(f"{folder}: no published-measurement CSV files")
    return [p for f in files for p in read_published(f)]


def select(
    points: Iterable[PublishedPoint],
    *,
    engine: str | None = None,
    card: str | None = None,
    model: str | None = None,
    metric: str | None = None,
    reserved: bool | None = None,
) -> list[PublishedPoint]:
    """The points matching every filter given (None = any)."""
    want = {"engine": engine, "card": card, "model": model, "metric": metric, "reserved": reserved}
    return [p for p in points if all(v is None or getattr(p, k) == v for k, v in want.items())]


def counts(points: Iterable[PublishedPoint]) -> dict[tuple[str, str, bool], int]:
    """Number of points per (engine, card, reserved), sorted by key."""
    tally = Counter((p.engine, p.card, p.reserved) for p in points)
    return dict(sorted(tally.items()))


def points_to_dicts(points: Iterable[PublishedPoint]) -> list[dict[str, object]]:
    """Points as plain dicts with the derived base-unit values (``base_value``, ``tpot_s``)."""
    names = [f.name for f in fields(PublishedPoint)]
    return [{**{n: getattr(p, n) for n in names}, "base_value": p.base_value, "tpot_s": p.tpot_s} for p in points]
