"""Write a file so that it is never seen half-written: a temporary file beside it, then rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; on any failure the old file (if any) is untouched
    and no temporary file is left behind. The file gets the mode a plain open() would give.
    Raises OSError."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """As write_bytes_atomic, for UTF-8 text (newlines written as given)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def read_json(path: str | os.PathLike, what: str = ""):
    """Parse a JSON file, plain or gzip-compressed (a name ending in .gz; a missing ``x.json``
    whose ``x.json.gz`` exists is read from that, as the large measurement probes are stored); a
    missing file or bad JSON raises RooflineError with one line naming the file (and ``what`` it
    was meant to be)."""
    import gzip
    import json
    import zlib

    from roofline.errors import RooflineError

    path = Path(path)
    if path.suffix != ".gz" and not path.exists() and path.with_name(path.name + ".gz").is_file():
        path = path.with_name(path.name + ".gz")
    label = f"{what} {short(path)}" if what else short(path)
    too_large = (f"{label}: larger than any profile, calibration or config "
                 f"({MAX_JSON_BYTES / 1e6:.0f} MB at most)")
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise RooflineError(f"{label}: {size / 1e6:,.0f} MB, larger than any profile, calibration or "
                                f"config ({MAX_JSON_BYTES / 1e6:.0f} MB at most)")
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:  # bounded: never more than the cap is decompressed
                data = f.read(MAX_JSON_BYTES + 1)
            if len(data) > MAX_JSON_BYTES:
                raise RooflineError(too_large)
            text = data.decode("utf-8-sig")
        else:
            text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:  # gzip.BadGzipFile is an OSError
        raise RooflineError(f"cannot read {label}: {exc.strerror or exc}") from None
    except (EOFError, zlib.error):
        raise RooflineError(f"cannot read {label}: a damaged gzip file") from None
    except UnicodeDecodeError:
        raise RooflineError(f"{label}: not a UTF-8 text file (binary?)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{short(path)}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise RooflineError(f"{short(path)}: JSON nested too deeply") from None


#: The largest JSON file read (catalog configs are kilobytes; measurement probes a few MB).
MAX_JSON_BYTES = 64_000_000


def short(text, limit: int = 120) -> str:
    """``text`` for an error message: at most ``limit`` characters (a hostile 100 kB name is cut)."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def probe_path(key: str) -> tuple[bool, bool]:
    """(is a directory, is a file) for a user-given name, without the OSError a name too long for
    the file system raises (such a name is neither)."""
    path = Path(key).expanduser()
    try:
        return path.is_dir(), path.is_file()
    except (OSError, ValueError):  # ENAMETOOLONG; ValueError: an embedded NUL
        return False, False


def safe_name(text: str) -> str:
    """``text`` with anything but letters, digits, '.', '_' and '-' as '-': a file name's part."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "run"


def model_file_label(model: str) -> str:
    """A model's name as it goes into file names: a catalog name (or a repo id's last part) as it
    is; a config.json path as its folder's name, another .json file as its stem, a folder as its
    name; through ``safe_name`` (a path's slashes must not make folders)."""
    from pathlib import PurePath

    p = PurePath(model.strip().replace("\\", "/"))
    if p.name == "config.json":
        label = p.parent.name
    elif p.suffix.lower() == ".json":
        label = p.stem
    else:
        label = p.name
    return safe_name(label)

