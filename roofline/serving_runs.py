"""Read back what calibrate/serving_loop.py measured (stdlib only: it also runs on the GPU machine).

A serving run named NAME leaves three files in its out folder:

* ``requests-NAME.csv``: one row per request (request order): REQUEST_COLUMNS. Seconds are
  measured from the run's clock start (t = 0, after warm-up and graph capture); ``arrival_s``
  is when the request became admissible; ``ttft_s`` = first_token_s - arrival_s (a request's
  FIRST first token, even if it was later preempted), ``tpot_s`` = (finish_s - first_token_s) /
  (gen_tokens - 1), blank when gen_tokens = 1; ``e2e_s`` = finish_s - arrival_s. Times are blank
  for a request never finished (the run's admission deadline came first). The runs committed
  under hardware_profiles/ keep it gzip-compressed too, ``requests-NAME.csv.gz`` (the working
  tree a device call sends is bounded: docs/calibration-runs.md); the readers take either.
* ``iterations-NAME.csv``: one row per iteration (ITERATION_COLUMNS). ``kind`` is ``prefill``,
  ``decode`` or (policy chunked) ``mixed``; ``decode_seqs`` sequences decoded in a step of
  ``bucket`` slots (blank without a decode step); ``prefill_seqs`` sequences (or chunks) with
  ``prefill_tokens`` tokens in the prefill pass; ``prefill_pairs`` = sum over them of t c + t (t
  + 1) / 2 for t tokens after c cached ones (n (n + 1) / 2 for a whole prompt); ``kv_tokens`` =
  sum over the sequences in the iteration of the tokens their KV holds after it (decode: each
  slot's attended context, position + 1; prefill: c + t); ``preempted`` in this iteration;
  ``finished``, ``running`` and ``used_blocks`` after it; ``device_s`` is the passes' device
  time (CUDA events; the CPU's wall time). The runs committed under hardware_profiles/ keep it
  gzip-compressed, ``iterations-NAME.csv.gz``; the readers take either.
* ``run-NAME.json``: ``config``, ``summary`` (from ``summarize``, + ``deadline_hit``), ``stream``,
  ``memory``, ``times``, ``environment``, ``deadline``.
* ``stream-NAME.csv``: the request stream itself (prompt_tokens, gen_tokens, arrival_s), the
  file ``roofline simulate --requests`` reads, so the simulator replays the same stream.

Percentiles are numpy's default (linear interpolation between closest ranks).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import RooflineError

REQUEST_COLUMNS = (
    "request_id", "arrival_s", "prompt_tokens", "gen_tokens", "first_token_s", "finish_s",
    "ttft_s", "tpot_s", "e2e_s", "preemptions", "first_scheduled_s", "prefilled_tokens",
)
ITERATION_COLUMNS = (
    "iteration", "t_start_s", "t_end_s", "kind", "decode_seqs", "prefill_seqs", "prefill_tokens",
    "kv_tokens", "bucket", "prefill_pairs", "preempted", "finished", "running", "used_blocks", "device_s",
)
STREAM_COLUMNS = ("prompt_tokens", "gen_tokens", "arrival_s")
PERCENTILES = (50, 90, 99)
_INTS = {"request_id", "prompt_tokens", "gen_tokens", "preemptions", "prefilled_tokens", "iteration",
         "decode_seqs", "prefill_seqs", "prefill_tokens", "kv_tokens", "bucket", "prefill_pairs",
         "preempted", "finished", "running", "used_blocks"}


def percentile(values, q: float) -> float:
    """numpy.percentile(values, q) with its default linear method, for a non-empty sequence."""
    data = sorted(float(v) for v in values)
    if not data:
        raise ValueError("percentile of no values")
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize(requests: list[dict], iterations: list[dict] | None = None) -> dict:
    """The run's summary from its request rows (and iteration rows for max_running).

    Over the FINISHED requests: throughput_tok_s = their generated tokens / makespan_s, with
    makespan_s = last finish - first arrival of the whole stream (as roofline.serving's
    ``Served``); ttft/tpot/e2e p50, p90, p99 (tpot over requests with gen_tokens > 1).
    """
    done = [r for r in requests if r.get("finish_s") is not None]
    out: dict = {"requests": len(requests), "finished": len(done), "unserved": len(requests) - len(done)}
    tokens = sum(int(r["gen_tokens"]) for r in done)
    first_arrival = min((float(r["arrival_s"]) for r in requests), default=0.0)
    makespan = max((float(r["finish_s"]) for r in done), default=first_arrival) - first_arrival
    out.update(generated_tokens=tokens, makespan_s=makespan,
               throughput_tok_s=tokens / makespan if makespan > 0 else None)
    for name in ("ttft", "tpot", "e2e"):
        values = [r[f"{name}_s"] for r in done if r.get(f"{name}_s") is not None]
        for q in PERCENTILES:
            out[f"{name}_p{q}_s"] = percentile(values, q) if values else None
        out[f"{name}_mean_s"] = sum(values) / len(values) if values else None
    out["preemptions"] = sum(int(r.get("preemptions") or 0) for r in requests)
    out["preempted_requests"] = sum(1 for r in requests if int(r.get("preemptions") or 0) > 0)
    if iterations is not None:
        out["iterations"] = len(iterations)
        out["prefill_passes"] = sum(1 for it in iterations if it["kind"] == "prefill")
        out["decode_steps"] = sum(1 for it in iterations if it["kind"] == "decode")
        out["max_running"] = max((int(it["running"]) + int(it["finished"]) for it in iterations), default=0)
        busy = sum(float(it["t_end_s"]) - float(it["t_start_s"]) for it in iterations)
        out["busy_s"] = busy
    return out


# ---- writing (used by calibrate/serving_job.py) ---------------------------------------------
def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def csv_text(rows: list[dict], columns) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def run_paths(out_dir, name: str) -> dict[str, Path]:
    out_dir = Path(out_dir)
    return {"requests": out_dir / f"requests-{name}.csv", "iterations": out_dir / f"iterations-{name}.csv",
            "run": out_dir / f"run-{name}.json", "stream": out_dir / f"stream-{name}.csv"}


# ---- reading --------------------------------------------------------------------------------
def _typed(row: dict, where: str) -> dict:
    out = {}
    for key, text in row.items():
        text = (text or "").strip()
        if text == "":
            out[key] = None
        elif key == "kind":
            out[key] = text
        else:
            try:
                out[key] = int(text) if key in _INTS else float(text)
            except ValueError:
                raise RooflineError(f"{where}: {key} must be a number, not {text!r}") from None
    return out


def stored(path) -> Path:
    """``path``, or its gzip-compressed copy (``path`` + ``.gz``) where only that exists."""
    path = Path(path)
    if not path.exists():
        packed = path.with_name(path.name + ".gz")
        if packed.exists():
            return packed
    return path


def _read_csv(path: Path, columns) -> list[dict]:
    """A CSV with ``columns`` (more allowed), plain or gzip-compressed (a name ending in .gz)."""
    try:
        data = Path(path).read_bytes()
        text = (gzip.decompress(data) if Path(path).suffix == ".gz" else data).decode("utf-8")
    except OSError as exc:  # (gzip.BadGzipFile and EOFError: a damaged archive)
        raise RooflineError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise RooflineError(f"cannot read {path}: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise RooflineError(f"{path}: missing column {missing[0]!r}")
    return [_typed(row, f"{path} line {no}") for no, row in enumerate(reader, 2)]


def read_requests_csv(path) -> list[dict]:
    return _read_csv(Path(path), REQUEST_COLUMNS)


def read_iterations_csv(path) -> list[dict]:
    return _read_csv(Path(path), ITERATION_COLUMNS)


@dataclass(frozen=True)
class ServingRun:
    name: str
    run: dict  # the run JSON: config, summary, stream, memory, times, environment, deadline
    requests: list[dict]
    iterations: list[dict]

    @property
    def config(self) -> dict:
        return self.run["config"]

    @property
    def summary(self) -> dict:
        return self.run["summary"]


def read_run(out_dir, name: str) -> ServingRun:
    """The three files of run ``name`` in ``out_dir``."""
    paths = run_paths(out_dir, name)
    try:
        run = json.loads(paths["run"].read_text(encoding="utf-8"))
    except OSError as exc:
        raise RooflineError(f"cannot read {paths['run']}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{paths['run']}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return ServingRun(name, run, read_requests_csv(stored(paths["requests"])),
                      read_iterations_csv(stored(paths["iterations"])))


def run_names(out_dir) -> list[str]:
    """Names of the complete runs in ``out_dir`` (a run file with its two CSVs, each plain or
    compressed), sorted."""
    names = []
    for path in sorted(Path(out_dir).glob("run-*.json")):
        name = path.name[len("run-"):-len(".json")]
        paths = run_paths(out_dir, name)
        if stored(paths["requests"]).exists() and stored(paths["iterations"]).exists():
            names.append(name)
    return names


def read_request_file(path) -> list[dict]:
    """A request file (CSV with a header, or JSONL) as dicts of prompt_tokens, gen_tokens and
    arrival_s (None when the file has none): the format roofline.batching.read_requests reads,
    without numpy or pydantic (the GPU machine reads its streams with this)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RooflineError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if not first:
        raise RooflineError(f"{path}: no requests (the file is empty)")
    records = []
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson") or first.startswith("{"):
        for no, line in enumerate(lines, 1):
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RooflineError(f"{path} line {no}: not valid JSON ({exc.msg})") from None
                if not isinstance(rec, dict):
                    raise RooflineError(f"{path} line {no}: each line must be a JSON object")
                records.append((no, rec))
    else:
        rows = [(no, row) for no, row in enumerate(csv.reader(lines), 1) if any(c.strip() for c in row)]
        header = [c.strip() for c in rows[0][1]]
        for no, row in rows[1:]:
            if len(row) != len(header):
                raise RooflineError(f"{path} line {no}: {len(row)} fields, the header has {len(header)}")
            records.append((no, dict(zip(header, row))))
    out = []
    for no, rec in records:
        unknown = [k for k in rec if k not in STREAM_COLUMNS]
        if unknown:
            raise RooflineError(f"{path} line {no}: unknown field {unknown[0]!r}; the fields are "
                                f"{', '.join(STREAM_COLUMNS)}")
        item = {}
        for key in STREAM_COLUMNS:
            value = rec.get(key)
            if value is None or (isinstance(value, str) and not value.strip()):
                if key != "arrival_s":
                    raise RooflineError(f"{path} line {no}: missing {key}")
                item[key] = None
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise RooflineError(f"{path} line {no}: {key} must be a number, not {value!r}") from None
            if key == "arrival_s":
                if not math.isfinite(number) or number < 0:
                    raise RooflineError(f"{path} line {no}: arrival_s must be a finite number of seconds >= 0")
                item[key] = number
            else:
                if not number.is_integer() or number < 1:
                    raise RooflineError(f"{path} line {no}: {key} must be a whole number of at least 1")
                item[key] = int(number)
        out.append(item)
    if not out:
        raise RooflineError(f"{path}: no requests (only a header or blank lines)")
    if len({r["arrival_s"] is None for r in out}) > 1:
        raise RooflineError(f"{path}: arrival_s must be given on every line or on none")
    return out
