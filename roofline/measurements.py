"""The measurement CSV: one row per (card, model, engine, prompt, gen, batch) decode run.

The file is what ``calibrate/`` writes and what the fit and ``compare`` read. Columns may come
in any order; extra columns are kept (``MeasurementRow.extra``) and written back.

Required columns (a header row is required)::

    card, model, engine, kv_cache, prompt_tokens, gen_tokens, batch, ttft_s, tpot_s, peak_mem_gib

``ttft_s`` and ``peak_mem_gib`` may be blank. ``kv_cache`` is ``dynamic`` or ``static``.

Optional columns::

    status                    ok (default when blank or absent) or oom; an oom row marks the first
                              batch that ran out of memory: its timings are blank and consumers
                              skip it (``MeasurementRow.ok``)
    tp                        tensor-parallel degree (GPUs the model is split over; blank = 1);
                              peak_mem_gib is then per GPU (the largest of the ranks)
    weight_dtype, kv_dtype    storage formats of the weights and the KV cache (blank = bf16)
    tpot_median_s, tpot_p10_s, tpot_p90_s, tpot_std_s, n_decode_steps, e2e_s
    gpu, driver, torch, transformers, timestamp

Times are seconds. ``tpot_s`` is the MEAN decode step, so ``e2e_s ~= ttft_s + (gen_tokens-1) *
tpot_s``. Peak memory is GiB in the file (it is compared with PyTorch's ``max_memory_allocated``)
and bytes in code (``MeasurementRow.peak_mem_bytes``).

Pure: stdlib only (no pydantic either, so the GPU machine's bare image can write these files).
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from roofline.errors import RooflineError
from roofline.units import GiB

REQUIRED_COLUMNS: tuple[str, ...] = (
    "card",
    "model",
    "engine",
    "kv_cache",
    "prompt_tokens",
    "gen_tokens",
    "batch",
    "ttft_s",
    "tpot_s",
    "peak_mem_gib",
)
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "status",
    "tp",
    "weight_dtype",
    "kv_dtype",
    "tpot_median_s",
    "tpot_p10_s",
    "tpot_p90_s",
    "tpot_std_s",
    "n_decode_steps",
    "e2e_s",
    "gpu",
    "driver",
    "torch",
    "transformers",
    "timestamp",
)
COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS

KV_CACHE_KINDS: tuple[str, ...] = ("dynamic", "static")
STATUSES: tuple[str, ...] = ("ok", "oom")

_STR_COLUMNS = ("card", "model", "engine", "weight_dtype", "kv_dtype", "gpu", "driver", "torch", "transformers", "timestamp")
_INT_COLUMNS = ("prompt_tokens", "gen_tokens", "batch", "tp", "n_decode_steps")
_FLOAT_COLUMNS = (
    "ttft_s",
    "tpot_s",
    "peak_mem_gib",
    "tpot_median_s",
    "tpot_p10_s",
    "tpot_p90_s",
    "tpot_std_s",
    "e2e_s",
)
#: Columns that must hold a value on every row (blank allowed nowhere).
_NEVER_BLANK = ("card", "model", "engine", "kv_cache", "prompt_tokens", "gen_tokens", "batch")
#: Timing columns that an ok row must carry (ttft_s and peak_mem_gib may be blank).
_OK_NEEDS = ("tpot_s",)


@dataclass(frozen=True)
class MeasurementRow:
    """One measured decode run. Times in seconds; memory in GiB as written (bytes: peak_mem_bytes)."""

    card: str
    model: str
    engine: str
    kv_cache: str
    prompt_tokens: int
    gen_tokens: int
    batch: int
    ttft_s: float | None
    tpot_s: float | None
    peak_mem_gib: float | None
    status: str = "ok"
    tp: int | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    tpot_median_s: float | None = None
    tpot_p10_s: float | None = None
    tpot_p90_s: float | None = None
    tpot_std_s: float | None = None
    n_decode_steps: int | None = None
    e2e_s: float | None = None
    gpu: str | None = None
    driver: str | None = None
    torch: str | None = None
    transformers: str | None = None
    timestamp: str | None = None
    #: Columns outside the format, kept verbatim (column -> text).
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        problem = _check_row(self)
        if problem:
            raise ValueError(problem)

    @property
    def ok(self) -> bool:
        """True for a completed measurement; False for an OOM marker row."""
        return self.status == "ok"

    @property
    def peak_mem_bytes(self) -> float | None:
        return None if self.peak_mem_gib is None else self.peak_mem_gib * GiB

    @property
    def tp_degree(self) -> int:
        """GPUs the model was split over (1 when the column is blank or absent)."""
        return self.tp or 1

    @property
    def key(self) -> tuple[str, str, str, int, int, int, int]:
        """What identifies a sweep point: (card, model, engine, prompt, gen, batch, tp)."""
        return (self.card, self.model, self.engine, self.prompt_tokens, self.gen_tokens, self.batch, self.tp_degree)

    def to_dict(self) -> dict[str, str | int | float | None]:
        """Column name -> value (None for blank), format columns first, then the extra ones."""
        out: dict[str, str | int | float | None] = {c: getattr(self, c) for c in COLUMNS}
        out.update(self.extra)
        return out


def _check_row(row: MeasurementRow) -> str | None:
    """What is wrong with ``row``, as 'column: message', or None."""
    for col in _NEVER_BLANK:
        value = getattr(row, col)
        if value is None or (isinstance(value, str) and not value.strip()):
            return f"{col}: must not be blank"
    if row.kv_cache not in KV_CACHE_KINDS:
        return f"kv_cache: {row.kv_cache!r} is not one of {', '.join(KV_CACHE_KINDS)}"
    if row.status not in STATUSES:
        return f"status: {row.status!r} is not one of {', '.join(STATUSES)}"
    if row.batch <= 0:
        return f"batch: must be > 0, got {row.batch}"
    if row.prompt_tokens <= 0:
        return f"prompt_tokens: must be > 0, got {row.prompt_tokens}"
    if row.gen_tokens <= 0:
        return f"gen_tokens: must be > 0, got {row.gen_tokens}"
    if row.tp is not None and row.tp < 1:
        return f"tp: must be >= 1, got {row.tp}"
    if row.n_decode_steps is not None and row.n_decode_steps < 0:
        return f"n_decode_steps: must be >= 0, got {row.n_decode_steps}"
    for col in _FLOAT_COLUMNS:
        value = getattr(row, col)
        if value is None:
            continue
        if not math.isfinite(value):
            return f"{col}: must be a finite number, got {value}"
        if value < 0:
            return f"{col}: must be >= 0, got {value}"
    if row.ok:
        for col in _OK_NEEDS:
            if getattr(row, col) is None:
                return f"{col}: must not be blank on a status=ok row"
        if row.tpot_s is not None and row.tpot_s <= 0:
            return f"tpot_s: must be > 0, got {row.tpot_s}"
    return None


def _parse_int(col: str, text: str) -> int | None:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{col}: {text!r} is not a number") from None
    if not value.is_integer():
        raise ValueError(f"{col}: {text!r} is not a whole number")
    return int(value)


def _parse_float(col: str, text: str) -> float | None:
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{col}: {text!r} is not a number") from None


def _row_from_text(record: dict[str, str]) -> MeasurementRow:
    """Build a row from one CSV record (column -> text); raises ValueError('column: message')."""
    kwargs: dict[str, object] = {}
    extra: dict[str, str] = {}
    for col, raw in record.items():
        text = (raw or "").strip()
        if col in _INT_COLUMNS:
            kwargs[col] = _parse_int(col, text)
        elif col in _FLOAT_COLUMNS:
            kwargs[col] = _parse_float(col, text)
        elif col == "status":
            kwargs[col] = text.lower() or "ok"
        elif col == "kv_cache":
            kwargs[col] = text.lower()
        elif col in _STR_COLUMNS:
            kwargs[col] = text or None
        else:
            extra[col] = raw or ""
    return MeasurementRow(**kwargs, extra=extra)  # type: ignore[arg-type]


#: The largest measurement CSV read (a full grid of many models is well under 1 MB).
MAX_CSV_BYTES = 100_000_000


def read_measurements(path: str | os.PathLike, kept_configs: bool = True) -> list[MeasurementRow]:
    """Read and validate a measurement CSV. Errors name the file and line: ``f.csv:7: batch: ...``.
    ``kept_configs``: rows of a config.json path that does not exist here name the copy
    `roofline calibrate` kept beside the CSV instead (``kept_config_path``); the harness itself
    (``calibrate --resume``) reads the rows as written."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CSV_BYTES:
            raise RooflineError(f"{path}: {size / 1e6:,.0f} MB; a measurement file is at most {MAX_CSV_BYTES / 1e6:.0f} MB")
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Excel's UTF-8) is not part of the header
    except FileNotFoundError:
        raise RooflineError(f"{path}: no such file") from None
    except OSError as exc:
        raise RooflineError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise RooflineError(f"{path}: not UTF-8 text") from None
    if not text.strip():
        raise RooflineError(f"{path}: empty file (expected a header row: {', '.join(REQUIRED_COLUMNS)})")

    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except csv.Error as exc:
        raise RooflineError(f"{path}:1: malformed CSV ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise RooflineError(f"{path}:1: missing column(s) {', '.join(missing)} in the header")
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise RooflineError(f"{path}:1: duplicate column(s) {', '.join(dupes)} in the header")
    if any(not h for h in header):
        raise RooflineError(f"{path}:1: a header cell is blank")

    rows: list[MeasurementRow] = []
    line = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise RooflineError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue  # blank line
        if len(cells) != len(header):
            raise RooflineError(
                f"{path}:{line}: {len(cells)} cells but the header has {len(header)} columns"
            )
        try:
            rows.append(_row_from_text(dict(zip(header, cells))))
        except (ValueError, TypeError) as exc:
            raise RooflineError(f"{path}:{line}: {exc}") from None
    if not rows:
        raise RooflineError(f"{path}: no data rows after the header")
    return _with_kept_configs(rows, path) if kept_configs else rows


def kept_config_path(out_dir: Path, model: str) -> Path:
    """Where `roofline calibrate` keeps the config of ``model`` given as a path: ``models/<label>-
    <hash>/config.json`` under ``out_dir``, the label its folder's name (roofline.atomic.
    model_file_label), the hash the first 8 hex digits of SHA-256 of the path as given (two
    checkpoints' ``.../hf/config.json`` must not share one copy)."""
    import hashlib

    from roofline.atomic import model_file_label

    digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return Path(out_dir) / "models" / f"{model_file_label(model)}-{digest}" / "config.json"


def _with_kept_configs(rows: list[MeasurementRow], path: Path) -> list[MeasurementRow]:
    """Rows of a model named by a config.json path that does not exist here, renamed to the copy
    `roofline calibrate` keeps beside the CSV (``kept_config_path``), where there is one."""
    from dataclasses import replace

    from roofline.atomic import probe_path
    from roofline.catalogs import catalog_config_path

    moved = {}
    for model in {r.model for r in rows}:
        if catalog_config_path(model) is not None or any(probe_path(model)):
            continue
        kept = kept_config_path(path.parent, model)
        if probe_path(str(kept))[1]:
            moved[model] = str(kept)
    return [replace(r, model=moved[r.model]) if r.model in moved else r for r in rows] if moved else rows


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back to the same float
    return str(value)


def rows_to_dicts(rows: Iterable[MeasurementRow]) -> list[dict[str, str | int | float | None]]:
    """Rows as plain dicts (column -> value, None for blank): for JSON, tables and DataFrames."""
    return [row.to_dict() for row in rows]


def columns_for(rows: Iterable[MeasurementRow]) -> list[str]:
    """The format's columns, then every extra column in order of first appearance."""
    cols = list(COLUMNS)
    for row in rows:
        for col in row.extra:
            if col not in cols:
                cols.append(col)
    return cols


def format_measurements(rows: Iterable[MeasurementRow]) -> str:
    """The CSV text of ``rows`` (header first), as write_measurements writes it."""
    rows = list(rows)
    cols = columns_for(rows)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    for row in rows:
        values = row.to_dict()
        writer.writerow([_cell(values.get(c)) for c in cols])
    return buf.getvalue()


def write_measurements(path: str | os.PathLike, rows: Iterable[MeasurementRow]) -> Path:
    """Write ``rows`` to ``path`` atomically: a temp file in the same folder, then os.replace.

    A reader (or a run interrupted mid-write) sees either the old file or the new one, never half.
    """
    from roofline.atomic import write_text_atomic

    return write_text_atomic(path, format_measurements(rows))
