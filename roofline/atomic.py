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
    """Parse a JSON file; a missing file or bad JSON raises RooflineError with one line naming
    the file (and ``what`` it was meant to be)."""
    import json

    from roofline.errors import RooflineError

    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RooflineError(f"cannot read {label}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
