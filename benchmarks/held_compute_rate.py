"""What the shipped graph calibration's fit does when the decode matmuls' compute rate is held at the
gemm probe's (docs/method.md, section 13, "Large dense decode batches"): benchmarks/make_calibrations.py
rerun with ``compute_efficiency`` held at EFFICIENCY (default 0.99: the probe's median 786 TFLOP/s over
products of 1,024-4,096 rows, N and K from 2,048, against the ceiling's 794), its calibrations written to
OUT (default /tmp/held-compute-rate), nothing shipped touched; prints the terms that move and the
validation errors, then device call 54's TPOT MAPE with the shipped calibration and with this one.
An experiment, not used by the model.

    .venv/bin/python benchmarks/held_compute_rate.py [EFFICIENCY] [OUT]
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import roofline.calibration as calibration
    import roofline.fitting as fitting
    from roofline import api

    efficiency = float(sys.argv[1]) if len(sys.argv) > 1 else 0.99
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/held-compute-rate")
    out.mkdir(parents=True, exist_ok=True)
    fit, save = fitting.fit_calibration, calibration.save_calibration

    def held_fit(*args, fixed=None, **kwargs):
        return fit(*args, fixed={**(fixed or {}), "compute_efficiency": efficiency}, **kwargs)

    fitting.fit_calibration = held_fit
    calibration.save_calibration = lambda cal, path: save(cal, out / Path(path).name)
    try:
        import benchmarks.make_calibrations as make

        make.main()
    finally:
        fitting.fit_calibration, calibration.save_calibration = fit, save
    shipped = ROOT / "hardware_profiles" / "calibrations" / "h200-graph.json"
    a, b = json.loads(shipped.read_text()), json.loads((out / "h200-graph.json").read_text())
    for k in ("bandwidth_efficiency", "compute_efficiency", "activation_traffic_coeff", "roofline_exponent",
              "overhead_exponent", "layer_overhead_s"):
        print(f"{k:26s} shipped {a[k]:.4g}  held {b[k]:.4g}")
    for kind in b["fit_report"]["validation"]:
        va, vb = a["fit_report"]["validation"][kind], b["fit_report"]["validation"][kind]
        print(f"validation {kind:5s} TPOT MAPE shipped {100 * va['tpot_mape_fraction']:.2f}%  "
              f"held {100 * vb['tpot_mape_fraction']:.2f}%")
    call54 = ROOT / "hardware_profiles" / "measurements" / "h200-graph-check-call54.csv"
    for name, cal in (("shipped", shipped), ("held", out / "h200-graph.json")):
        print(f"call 54 TPOT MAPE {name}: {100 * api.compare([call54], calibration=cal)['tpot_mape_fraction']:.2f}%")


if __name__ == "__main__":
    main()
