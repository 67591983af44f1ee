"""This machine's CPU as a card: a profile made from the ceilings `roofline calibrate --device cpu`
measured (issue 16), so a CPU calibration has a card to belong to and a user can pass both as
``--card FILE --calibration FILE``.

Every figure is the measurement and says so: the memory bandwidth is the measured read bandwidth,
the bf16 peak the measured GEMM rate, the memory what /proc/meminfo reports (total; the share a
model may use is MemAvailable at the time of the run, recorded as ``usable_memory_fraction``).
"""

from __future__ import annotations

from pathlib import Path

from roofline.atomic import read_json, write_text_atomic
from roofline.errors import RooflineError


def _sig(x: float) -> float:
    """x to 9 significant digits (a measurement written as measured, without float noise)."""
    return float(f"{x:.9g}")


def mem_total_bytes() -> int | None:
    """MemTotal from /proc/meminfo, bytes (None off Linux)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def cpu_card_profile(card_id: str, ceilings_path: str | Path) -> dict:
    """A card profile (the JSON roofline.hardware reads) for the CPU whose ceilings are in
    ``ceilings_path`` (written by `roofline calibrate --device cpu`)."""
    path = Path(ceilings_path)
    c = read_json(path, "ceilings")
    if not str(c.get("device", "")).startswith("cpu"):
        raise RooflineError(f"{path}: ceilings of {c.get('device')!r}, not of a CPU")
    total = mem_total_bytes() or c.get("mem_available_bytes")
    if not total:
        raise RooflineError("cannot tell this machine's memory (no /proc/meminfo): write the card profile by hand")
    src = f"measured by `roofline calibrate --device cpu` ({path.name}, {c.get('timestamp', '')[:10]}, " \
          f"{c.get('threads')} threads)"
    bf16 = _sig(c["gemm_bf16_flop_per_s"] / 1e12)
    profile = {
        "id": card_id,
        "name": f"{c.get('cpu_model') or 'this CPU'} ({c.get('threads')} threads, {c.get('cpu_capability') or 'CPU'})",
        "vendor": "cpu",
        "kind": "cpu",
        "memory": {"value": round(total / 2**30, 3), "unit": "GiB", "source": "MemTotal in /proc/meminfo"},
        "datasheet_bandwidth": {
            "value": _sig(c["read_bandwidth_bytes_per_s"] / 1e9), "unit": "GB/s",
            "source": f"{src}: read (sum) bandwidth of a {c.get('buffer_bytes', 0) / 2**30:.2f} GiB buffer",
            "note": "a measurement, not a datasheet figure: this machine as it ran"},
        "datasheet_bf16_flops": {
            "value": bf16, "unit": "TFLOP/s",
            "source": f"{src}: bf16 GEMM {c.get('n')}^3", "note": "a measurement, not a datasheet figure"},
        "tensor_peaks": {
            "bf16": {"value": bf16, "unit": "TFLOP/s", "source": f"{src}: bf16 GEMM"},
            "fp32": {"value": _sig(c["gemm_fp32_flop_per_s"] / 1e12), "unit": "TFLOP/s",
                     "source": f"{src}: fp32 GEMM"},
        },
        "note": f"made from measured ceilings by roofline.local_card; MemAvailable at the run: "
                f"{(c.get('mem_available_bytes') or 0) / 2**30:.1f} GiB",
    }
    return profile


def write_cpu_card(card_id: str, ceilings_path: str | Path, out_path: str | Path) -> Path:
    """Write cpu_card_profile as JSON (atomically) and check that roofline reads it back."""
    import json

    from roofline.hardware import load_card

    out = Path(out_path)
    write_text_atomic(out, json.dumps(cpu_card_profile(card_id, ceilings_path), indent=2) + "\n")
    load_card(str(out))
    return out
