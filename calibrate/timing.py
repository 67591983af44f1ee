"""Clocks, statistics, memory and environment helpers shared by the harnesses.

On CUDA, time marks are CUDA events (read after one synchronize at the end); on the CPU they are
``time.perf_counter`` readings (CPU work is synchronous, so no synchronize is needed).
"""

from __future__ import annotations

import datetime as _dt
import gc
import platform
import subprocess
import time

import numpy as np

from roofline.units import GiB


def torch_device(device: str):
    import torch

    return torch.device(device)


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Marks:
    """Time stamps on the device's timeline: ``mark()`` n times, then ``seconds(i, j)``."""

    def __init__(self, device, capacity: int = 0):
        import torch

        self.device = device
        self.cuda = device.type == "cuda"
        self._pool = [torch.cuda.Event(enable_timing=True) for _ in range(capacity)] if self.cuda else []
        self._marks: list = []

    def mark(self) -> int:
        if self.cuda:
            import torch

            event = self._pool.pop() if self._pool else torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter())
        return len(self._marks) - 1

    def seconds(self, i: int, j: int) -> float:
        """Seconds from mark i to mark j (synchronize first on CUDA: see ``done``)."""
        a, b = self._marks[i], self._marks[j]
        if self.cuda:
            return a.elapsed_time(b) * 1e-3  # elapsed_time is in ms
        return b - a

    def done(self) -> None:
        synchronize(self.device)

    def consecutive(self) -> list[float]:
        """Seconds between each mark and the next."""
        self.done()
        return [self.seconds(i, i + 1) for i in range(len(self._marks) - 1)]

    def pairs(self) -> list[float]:
        """Seconds of (mark 0 -> 1), (2 -> 3), ...: for start/end marks around each step."""
        self.done()
        return [self.seconds(i, i + 1) for i in range(0, len(self._marks) - 1, 2)]


def step_stats(step_s: list[float]) -> dict[str, float | int | None]:
    """Mean (tpot_s), median, p10, p90, population std of decode step times, in seconds."""
    if not step_s:
        return {"tpot_s": None, "tpot_median_s": None, "tpot_p10_s": None, "tpot_p90_s": None,
                "tpot_std_s": None, "n_decode_steps": 0}
    arr = np.asarray(step_s, dtype=float)
    return {
        "tpot_s": float(arr.mean()),
        "tpot_median_s": float(np.median(arr)),
        "tpot_p10_s": float(np.percentile(arr, 10)),
        "tpot_p90_s": float(np.percentile(arr, 90)),
        "tpot_std_s": float(arr.std()),
        "n_decode_steps": int(arr.size),
    }


_SIDE_STREAMS: dict = {}


def side_stream(device):
    """The one side stream of ``device`` that every warm-up before a CUDA-graph capture runs on.

    cuBLAS keeps a workspace (32 MiB on Hopper) for every stream it has run on, allocated through
    PyTorch's caching allocator and never freed; a new ``torch.cuda.Stream()`` per capture cycles
    through PyTorch's pool of 32 streams, so a long sweep's peak memory used to grow by up to
    1 GiB, by how many captures had run before (docs/method.md, memory). One stream per device
    keeps it constant."""
    import torch

    key = str(device)
    if key not in _SIDE_STREAMS:
        _SIDE_STREAMS[key] = torch.cuda.Stream(device)
    return _SIDE_STREAMS[key]


def reset_peak(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device) -> tuple[float | None, float | None]:
    """(max_memory_allocated, max_memory_reserved) since the last reset, in GiB; None on CPU."""
    import torch

    if device.type != "cuda":
        return None, None
    return (torch.cuda.max_memory_allocated(device) / GiB, torch.cuda.max_memory_reserved(device) / GiB)


def is_oom(exc: BaseException) -> bool:
    """True for torch's OutOfMemoryError and for RuntimeErrors that report running out of memory.

    The exception's chain (``__cause__``, ``__context__``) counts too: an out-of-memory inside a
    CUDA-graph capture surfaces as the capture's own error, raised while the OOM is handled.
    """
    import torch

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
        if isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def free_memory() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def nvidia_smi(query: str) -> str:
    """One ``nvidia-smi --query-gpu`` answer (first GPU), or '' where nvidia-smi is missing."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0].strip() if out.stdout.strip() else ""


def environment(device) -> dict[str, str]:
    """gpu, driver, torch and transformers versions (plus CUDA) for the rows and the ceilings file."""
    import torch

    try:
        import transformers

        tf_version = transformers.__version__
    except ImportError:
        tf_version = ""
    if device.type == "cuda":
        gpu = torch.cuda.get_device_name(device)
        driver = nvidia_smi("driver_version")
    else:
        gpu = f"cpu: {cpu_model_name()} ({platform.machine()}, {torch.get_num_threads()} threads)"
        driver = ""
    return {
        "gpu": gpu,
        "driver": driver,
        "torch": torch.__version__,
        "transformers": tf_version,
        "cuda": torch.version.cuda or "",
        "python": platform.python_version(),
    }


def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform.processor(), else 'unknown'."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_available_bytes() -> int | None:
    """RAM the kernel says a new process can use without swapping (MemAvailable in /proc/meminfo),
    in bytes; None where /proc/meminfo is missing (not Linux)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    value, unit = line.split()[1:3]
                    return int(value) * {"kB": 1024}.get(unit, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def median_s(fn, device, warmup: int, reps: int) -> float:
    """Median seconds of one ``fn()`` call (a graph's replay, or eager calls), each call timed
    alone on the device's timeline after ``warmup`` untimed calls."""
    import numpy as np

    for _ in range(warmup):
        fn()
    synchronize(device)
    marks = Marks(device, 2 * reps)
    for _ in range(reps):
        marks.mark()
        fn()
        marks.mark()
    return float(np.median(marks.pairs()))
