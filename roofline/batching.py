"""Static batching's waste: length mixes, request files, token accounting and the slowdown.

Definitions (docs/batching.md and docs/method.md are written from these):

* A *mix* ``"8x32,8x256"`` is a list of COUNTxGEN classes: COUNT requests that each generate
  GEN tokens. Its requests are interleaved round-robin across the classes (one of each class in
  turn, a mixed arrival) and cut into consecutive static batches of ``batch`` requests (default:
  all of them in one batch; the last batch may be smaller).
* Token accounting: tokens needed = sum of every request's gen; slots used = sum over batches of
  batch size x the longest gen in the batch; ``waste_fraction`` = (slots - needed) / slots =
  1 - needed / slots. The lesson's 8x32 + 8x256 in one batch: 2,304 / 4,096 / 0.4375.
* With a card and model (roofline.serving.static_batch_times): a static batch is prefilled
  together (TTFT = the prefill of its prompts), then every member keeps decoding until the longest
  is done -- finished slots still compute and their KV keeps growing -- so decode step i of a
  batch of n costs ``pass_s(decode_work(n, n * (prompt + i)))``. Return policy ``whole-batch``:
  every request's end-to-end time is the batch's end. ``early-return``: TTFT + (its gen - 1)
  steps of the shared batch. *Alone*: the class as a batch of its own (its count as the batch
  size, or ``batch`` if that is smaller). Slowdown = E2E in the mixed batch / E2E alone.
* A request file (CSV with a header, or JSONL) has ``prompt_tokens``, ``gen_tokens`` and
  optionally ``arrival_s``. For ``waste`` it is grouped in arrival order (file order without
  arrival_s) into consecutive static batches of ``batch``; the batches run back to back, each
  starting when the previous one has finished and its last member has arrived. E2E = finish -
  arrival (arrival 0 without arrival_s).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError
from roofline import validate
from roofline.serving import PERCENTILES, RETURN_POLICIES, static_batch_times
from roofline.step import StepModel

REQUEST_COLUMNS = ("prompt_tokens", "gen_tokens", "arrival_s")


# ---- mixes ----------------------------------------------------------------------------------
#: Bounds on a length mix (the simulator's: roofline.scheduler), checked while parsing.
MAX_REQUESTS = 10_000_000
MAX_GEN_TOKENS = 10_000_000


def parse_mix(text: str) -> list[tuple[int, int]]:
    """``"8x32,8x256"`` -> [(8, 32), (8, 256)]: (count, gen tokens) per class."""
    classes = []
    items = [s.strip() for s in str(text).split(",")]
    for n, item in enumerate(items, 1):
        parts = item.lower().split("x")
        if len(parts) != 2 or not all(x.strip().isascii() and x.strip().isdigit() for x in parts):
            raise RooflineError(
                f"item {n} {item!r}: use COUNTxGEN with whole numbers, e.g. 8x32 (8 requests of 32 tokens)", "mix"
            )
        count, gen = (int(x) for x in parts)
        if count < 1:
            raise RooflineError(f"item {n} {item!r}: the count must be at least 1", "mix")
        if gen < 1:
            raise RooflineError(f"item {n} {item!r}: the generation length must be at least 1", "mix")
        if gen > MAX_GEN_TOKENS:
            raise RooflineError(f"item {n} {item!r}: at most {MAX_GEN_TOKENS:,} generated tokens a request", "mix")
        classes.append((count, gen))
        total = sum(c for c, _ in classes)
        if total > MAX_REQUESTS:  # refused before any array of that size is built
            raise RooflineError(f"{total:,} requests: at most {MAX_REQUESTS:,} in one mix", "mix")
    return classes


def interleave(classes: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(gen tokens, class index) of the mix's requests, round-robin across classes."""
    counts = np.array([c for c, _ in classes])
    gens = np.array([g for _, g in classes])
    cls = np.repeat(np.arange(len(classes)), counts)
    rank = np.concatenate([np.arange(c) for c in counts])
    order = np.lexsort((cls, rank))  # by rank, then class
    return gens[cls[order]], cls[order]


# ---- token accounting -----------------------------------------------------------------------
def batch_starts(n: int, batch: int | None) -> np.ndarray:
    return np.arange(0, n, batch or max(n, 1))


def token_accounting(gen_tokens, batch: int | None = None) -> dict:
    """Tokens needed, slots used (batch size x longest gen, per batch) and the waste fraction."""
    gen = np.asarray(gen_tokens, dtype=np.int64)
    starts = batch_starts(len(gen), batch)
    sizes = np.diff(np.append(starts, len(gen)))
    longest = np.maximum.reduceat(gen, starts)
    needed = int(gen.sum())
    slots = int((sizes * longest).sum())
    return {
        "requests": int(len(gen)),
        "batches": int(len(starts)),
        "tokens_needed": needed,
        "slots_used": slots,
        "wasted_slots": slots - needed,
        "waste_fraction": (slots - needed) / slots,
    }


# ---- request streams ------------------------------------------------------------------------
@dataclass(frozen=True)
class Requests:
    """A request stream: arrays of prompt and generation lengths, and arrivals (None: all at 0)."""

    prompt_tokens: np.ndarray
    gen_tokens: np.ndarray
    arrival_s: np.ndarray | None = None
    source: str = ""
    class_index: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        p, g = np.asarray(self.prompt_tokens), np.asarray(self.gen_tokens)
        if p.shape != g.shape or p.ndim != 1 or len(g) == 0:
            raise RooflineError("a request stream needs as many prompt lengths as generation lengths, at least one")
        if p.min() < 1 or g.min() < 1:
            raise RooflineError("prompt and generation lengths must be at least 1 token")
        a = self.arrival_s
        if a is not None and (np.shape(a) != g.shape or not np.all(np.isfinite(a)) or np.min(a) < 0):
            raise RooflineError("arrival times must be finite seconds >= 0, one per request")

    def __len__(self) -> int:
        return len(self.gen_tokens)

    def with_poisson_arrivals(self, rate_per_s: float, seed: int = 0) -> "Requests":
        """Poisson arrivals at ``rate_per_s``: exponential gaps from numpy's default_rng(seed)."""
        rate_per_s = validate.positive(rate_per_s, "arrival_rate", "a positive number of requests per second")
        gaps = np.random.default_rng(seed).exponential(1.0 / rate_per_s, len(self))
        return Requests(self.prompt_tokens, self.gen_tokens, np.cumsum(gaps), self.source, self.class_index)


def requests_from_mix(mix: str, prompt_tokens: int = 128, count: int | None = None) -> Requests:
    """The mix's interleaved requests (repeated, in the same order, up to ``count`` if given)."""
    gen, cls = interleave(parse_mix(mix))
    if count is not None:
        count = validate.whole(count, "count")
        reps = -(-count // len(gen))
        gen, cls = np.tile(gen, reps)[:count], np.tile(cls, reps)[:count]
    prompt_tokens = validate.whole(prompt_tokens, "prompt_tokens")
    return Requests(np.full(len(gen), prompt_tokens, dtype=np.int64), gen, None, f"--mix {mix}", cls)


def _whole(value, column: str, where: str, minimum: int) -> int:
    text = str(value).strip()
    try:
        number = float(text) if isinstance(value, str) else value
        if isinstance(number, bool) or not float(number).is_integer():
            raise ValueError
        number = int(number)
    except (TypeError, ValueError, OverflowError):
        raise RooflineError(f"{where}: {column} must be a whole number, not {text!r}") from None
    if number < minimum:
        raise RooflineError(f"{where}: {column} must be at least {minimum}, not {number}")
    return number


def _seconds(value, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise RooflineError(f"{where}: arrival_s must be a number of seconds, not {str(value).strip()!r}") from None
    if not math.isfinite(number) or number < 0:
        raise RooflineError(f"{where}: arrival_s must be a finite number of seconds >= 0, not {value}")
    return number


def _records(path: Path):
    """Yield (line number, dict) from a CSV with a header or a JSONL file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RooflineError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise RooflineError(f"{path}: not a UTF-8 text file") from None
    from roofline.scheduler import MAX_REQUESTS

    if text.count("\n") > MAX_REQUESTS + 1:  # refused before parsing (the simulation would refuse it anyway)
        raise RooflineError(f"{path}: more than {MAX_REQUESTS:,} requests; at most that many in one simulation", "requests")
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if not first:
        raise RooflineError(f"{path}: no requests (the file is empty)")
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson") or first.startswith("{"):
        for no, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RooflineError(f"{path} line {no}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise RooflineError(f"{path} line {no}: each line must be a JSON object with prompt_tokens and gen_tokens")
            yield no, rec
        return
    reader = csv.reader(lines)
    header_no, header = None, None
    for no, row in enumerate(reader, 1):
        if not any(c.strip() for c in row):
            continue
        if header is None:
            header_no, header = no, [c.strip() for c in row]
            unknown = [c for c in header if c not in REQUEST_COLUMNS]
            if unknown:
                raise RooflineError(
                    f"{path} line {header_no}: unknown column {unknown[0]!r}; the columns are {', '.join(REQUEST_COLUMNS)}"
                )
            continue
        if len(row) != len(header):
            raise RooflineError(f"{path} line {no}: {len(row)} fields, the header has {len(header)}")
        yield no, dict(zip(header, row))


def read_requests(path: str | Path) -> Requests:
    """Read a request file (CSV with a header, or JSONL); errors name the file line."""
    path = Path(path)
    prompts, gens, arrivals = [], [], []
    has_arrival = None
    for no, rec in _records(path):
        where = f"{path} line {no}"
        for col in ("prompt_tokens", "gen_tokens"):
            if col not in rec or (isinstance(rec[col], str) and not rec[col].strip()):
                raise RooflineError(f"{where}: missing {col}")
        extra = [k for k in rec if k not in REQUEST_COLUMNS]
        if extra:
            raise RooflineError(f"{where}: unknown field {extra[0]!r}; the fields are {', '.join(REQUEST_COLUMNS)}")
        prompts.append(_whole(rec["prompt_tokens"], "prompt_tokens", where, 1))
        gens.append(_whole(rec["gen_tokens"], "gen_tokens", where, 1))
        arrival = rec.get("arrival_s")
        present = arrival is not None and not (isinstance(arrival, str) and not arrival.strip())
        if has_arrival is None:
            has_arrival = present
        elif present != has_arrival:
            raise RooflineError(f"{where}: arrival_s must be given on every line or on none")
        if present:
            arrivals.append(_seconds(arrival, where))
    if not gens:
        raise RooflineError(f"{path}: no requests (only a header or blank lines)")
    arrival_arr = np.array(arrivals) if has_arrival else None
    return Requests(np.array(prompts, dtype=np.int64), np.array(gens, dtype=np.int64), arrival_arr, str(path))


# ---- waste with timing ----------------------------------------------------------------------
def static_e2e_within_batches(model: StepModel, prompt, gen, batch: int | None, return_policy: str):
    """Per request: E2E measured from its own batch's start, and TTFT; batches timed separately."""
    n = len(gen)
    e2e, ttft = np.empty(n), np.empty(n)
    for s in batch_starts(n, batch):
        e = min(n, s + (batch or n))
        pre, cum = static_batch_times(model, prompt[s:e], gen[s:e])
        ttft[s:e] = pre
        e2e[s:e] = pre + (cum[-1] if return_policy == "whole-batch" else cum[gen[s:e] - 1])
    return e2e, ttft


def run_back_to_back(model: StepModel, req: Requests, batch: int | None, return_policy: str) -> np.ndarray:
    """E2E (finish - arrival) of a request stream in fixed consecutive static batches run back to back."""
    arrival = np.zeros(len(req)) if req.arrival_s is None else req.arrival_s
    order = np.argsort(arrival, kind="stable")
    p, g, a = req.prompt_tokens[order], req.gen_tokens[order], arrival[order]
    n = len(g)
    e2e_sorted = np.empty(n)
    t = 0.0
    for s in batch_starts(n, batch):
        e = min(n, s + (batch or n))
        t = max(t, float(a[e - 1]))
        pre, cum = static_batch_times(model, p[s:e], g[s:e])
        done = t + pre + (cum[-1] if return_policy == "whole-batch" else cum[g[s:e] - 1])
        e2e_sorted[s:e] = done - a[s:e]
        t = t + pre + cum[-1]
    e2e = np.empty(n)
    e2e[order] = e2e_sorted
    return e2e


def _check_batch(batch):
    return None if batch is None else validate.whole(batch, "batch")


def mix_waste(mix: str, batch: int | None = None, prompt_tokens: int = 128, model: StepModel | None = None,
              return_policy: str = "whole-batch") -> dict:
    """Token accounting for a mix; with a StepModel, each class's E2E in the batch, alone, and the slowdown."""
    batch = _check_batch(batch)
    validate.choice(return_policy, "return_policy", RETURN_POLICIES)
    classes = parse_mix(mix)
    req = requests_from_mix(mix, prompt_tokens)
    out = {"source": req.source, "batch": batch or len(req), "prompt_tokens": prompt_tokens, **token_accounting(req.gen_tokens, batch)}
    rows = [{"class": f"{c}x{g}", "count": c, "gen_tokens": g} for c, g in classes]
    if model is not None:
        e2e, ttft = static_e2e_within_batches(model, req.prompt_tokens, req.gen_tokens, batch, return_policy)
        for k, row in enumerate(rows):
            mine = req.class_index == k
            size = min(row["count"], batch or row["count"])
            alone, alone_ttft = static_e2e_within_batches(
                model, np.full(size, prompt_tokens), np.full(size, row["gen_tokens"]), None, return_policy
            )
            row.update(
                ttft_in_batch_s=float(ttft[mine].mean()),
                e2e_in_batch_s=float(e2e[mine].mean()),
                alone_batch=size,
                e2e_alone_s=float(alone[0]),
                slowdown=float(e2e[mine].mean() / alone[0]),
            )
        shortest = min(rows, key=lambda r: r["gen_tokens"])
        out["return_policy"] = return_policy
        out["short_request_slowdown"] = shortest["slowdown"]
    out["classes"] = rows
    return out


def requests_waste(req: Requests, batch: int | None = None, model: StepModel | None = None,
                   return_policy: str = "whole-batch") -> dict:
    """Token accounting for a request file in arrival order; with a StepModel, the E2E distribution."""
    batch = _check_batch(batch)
    validate.choice(return_policy, "return_policy", RETURN_POLICIES)
    gen = req.gen_tokens if req.arrival_s is None else req.gen_tokens[np.argsort(req.arrival_s, kind="stable")]
    out = {"source": req.source, "batch": batch or len(req), **token_accounting(gen, batch)}
    if model is not None:
        e2e = run_back_to_back(model, req, batch, return_policy)
        out["return_policy"] = return_policy
        for q, v in zip(PERCENTILES, np.percentile(e2e, PERCENTILES)):
            out[f"e2e_p{q}_s"] = float(v)
        out["e2e_mean_s"] = float(e2e.mean())
    return out
