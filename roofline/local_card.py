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


def linear_probe_terms(ceilings_path: str | Path) -> dict:
    """The decode matmuls' terms as this machine runs them, from the model-shape probe the
    ceilings step records (``models[*].decode_linear``: every linear layer of each swept model
    timed at M = each batch): ``bandwidth_efficiency``, ``compute_efficiency`` and
    ``roofline_exponent`` of t(M) = pnorm(W / (e_bw x bandwidth), 2 M P / (e_c x peak), p), least
    squares on relative residuals over every model and batch; {} when the file has no probe.

    Why on a CPU: a square 1024^3 GEMM (the peak) runs far better than a decode's M = 1-64 rows
    (this machine: 0.92 TFLOP/s square, 0.63 at M = 64 on qwen2.5-0.5b's shapes), and with one model
    swept the fit cannot tell that shortfall from the per-sequence attention and activation costs,
    which grow with the batch alike. Measured, the matmuls are held; the rest is fitted.
    (roofline calibrate --device cpu; docs/cpu.md.)"""
    import numpy as np
    from scipy.optimize import least_squares

    data = read_json(ceilings_path, "ceilings")
    bw, peak = data.get("read_bandwidth_bytes_per_s"), data.get("gemm_bf16_flop_per_s")
    weights, ms, times = [], [], []
    for entry in (data.get("models") or {}).values():
        w = entry.get("linear_weight_bytes_per_step")
        for point in entry.get("decode_linear") or []:
            if w and point.get("linear_s"):
                weights.append(float(w))
                ms.append(float(point["m"]))
                times.append(float(point["linear_s"]))
    if not bw or not peak or len(times) < 3:
        return {}
    weights, ms, times = np.array(weights), np.array(ms), np.array(times)

    def model(x):
        e_bw, e_c, p = x
        memory = weights / (e_bw * bw)
        compute = ms * weights / (e_c * peak)  # 2 M P FLOP, P = W / 2 bf16 weights
        return (memory**p + compute**p) ** (1.0 / p)

    fit = least_squares(lambda x: model(x) / times - 1.0, [0.6, 0.7, 2.0],
                        bounds=([0.05, 0.05, 1.0], [1.0, 1.0, 50.0]))
    e_bw, e_c, p = (float(v) for v in fit.x)
    return {"bandwidth_efficiency": _sig(e_bw), "compute_efficiency": _sig(e_c), "roofline_exponent": _sig(p)}
