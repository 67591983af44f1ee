"""Write docs/calibration.md from the committed measurements and the shipped calibrations: every
table in it is computed here from files in the repo, every console block is a command and its output.

    .venv/bin/python benchmarks/make_calibrations.py     # refit the shipped calibrations (about a minute)
    .venv/bin/python benchmarks/calibration_report.py    # then this (about a minute)

Held-out means: a model (or a context) the calibration's fit never saw. What each calibration was
fitted on is its ``fitted_on`` (benchmarks/make_calibrations.py says why).
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
M = "hardware_profiles/measurements"
C = "hardware_profiles/calibrations"
GRAPH = f"{C}/h200-graph.json"
EAGER = f"{C}/h200-hf-eager.json"
LESSON = f"{C}/rtx3060-hf-eager.json"
ROOFLINE = str(Path(sys.executable).parent / "roofline")


def run(args: list[str], keep=None) -> str:
    """`roofline ARGS` as a console block; ``keep(lines)`` may elide lines of a long output."""
    out = subprocess.run([ROOFLINE, *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = out.rstrip().splitlines()
    if keep is not None:
        lines = keep(lines)
    return "```console\n$ roofline " + " ".join(shlex.quote(a) for a in args) + "\n" + "\n".join(lines) + "\n```\n"


def summary_only(lines: list[str]) -> list[str]:
    """The first line and the MAPE table of a `roofline compare` output (the per-row table elided)."""
    blank = lines.index("")
    return [lines[0], "(per-row table elided: `--format csv` gives every row)", *lines[blank:]]


def pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def signed(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def table(headers, rows) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def compare(csv, calibration: str, models=()) -> dict:
    """``roofline compare`` of one measurement file (or a list of them) against ``calibration``."""
    from roofline import api

    files = [csv] if isinstance(csv, str) else list(csv)
    return api.compare([ROOT / f for f in files], calibration=ROOT / calibration, models=models)


def per_model_context(result: dict, ttft_min_batch: int = 16) -> str:
    """TPOT MAPE and worst point, TTFT MAPE from batch ``ttft_min_batch`` up, peak-memory MAPE, per
    model and context, from a compare result."""
    groups = defaultdict(list)
    for r in result["rows"]:
        groups[(r["model"], r["prompt_tokens"], r["gen_tokens"])].append(r)
    rows = []
    for (model, p, g), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        e = np.array([r["tpot_predicted_s"] / r["tpot_measured_s"] - 1 for r in rs])
        tt = [r["ttft_predicted_s"] / r["ttft_measured_s"] - 1 for r in rs
              if r["ttft_measured_s"] is not None and r["batch"] >= ttft_min_batch]
        mem = [r["peak_mem_predicted_bytes"] / r["peak_mem_measured_bytes"] - 1 for r in rs
               if r["peak_mem_measured_bytes"] is not None]
        rows.append([model, f"{p}/{g}", f"{min(r['batch'] for r in rs)}-{max(r['batch'] for r in rs)}",
                     pct(float(np.mean(np.abs(e)))), signed(float(e[np.argmax(np.abs(e))])),
                     pct(float(np.mean(np.abs(tt)))) if tt else "-", pct(float(np.mean(np.abs(mem)))) if mem else "-",
                     len(rs)])
    return table(["model", "prompt/gen", "batches", "TPOT MAPE", "worst TPOT", f"TTFT MAPE (batch >= {ttft_min_batch})",
                  "peak mem MAPE", "points"], rows)


def load_curve_section() -> str:
    """The sustained-matmul probe's curves (the prefill's, which the calibration holds, and the pure
    GEMM's) by seconds of load, with the SM clock nvidia-smi sampled alongside."""
    import bisect

    from roofline.probes import sustained_matmul_curve

    path = ROOT / M / "h200-probe-sustained-matmul.json"
    data = json.loads(path.read_text())
    prefill = sustained_matmul_curve(path)
    gemm = dict(sustained_matmul_curve(path, "gemm"))
    clocks = data.get("clocks") or []
    times = [c["t_s"] for c in clocks]
    gemm_windows = [w for w in data["windows"] if w.get("series", "gemm") == "gemm" and w["phase"] == 1]

    def clock_at(load_s):  # the first load phase's clock at this many seconds of load (nearest sample)
        w = min(gemm_windows, key=lambda x: abs(x["load_s"] - load_s), default=None)
        if w is None or not clocks:
            return "-"
        i = min(max(bisect.bisect_left(times, w["t_s"]), 0), len(clocks) - 1)
        return f"{clocks[i]['sm_mhz']:.0f}"

    rows = [[f"{t:.3g}", f"{r:.3f}", f"{gemm[t]:.3f}" if t in gemm else "-", clock_at(t)] for t, r in prefill]
    return table(["seconds of load (bin midpoint)", "prefill's rate (held by the calibration)",
                  "one GEMM's rate", "SM clock under the GEMM (MHz)"], rows)


def ttft_by_length(calibration: str, files=None) -> str:
    """TTFT's median signed error and MAPE by the measured TTFT's length, every batch, over ``files``
    (every model), else the calibration's dense validation set (its files, its models)."""
    models = ()
    if files is None:
        dense = json.loads((ROOT / calibration).read_text())["fit_report"]["validation"]["dense"]
        files, models = [f"{M}/{f}" for f in dense["files"]], dense["models"]
    bins = ((0.05, 0.1), (0.1, 0.2), (0.2, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 5.0), (5.0, 100.0))
    errs = defaultdict(list)
    for r in compare(files, calibration, models)["rows"]:
        t = r["ttft_measured_s"]
        if t is not None and r["ttft_predicted_s"] is not None:
            for lo, hi in bins:
                if lo <= t < hi:
                    errs[(lo, hi)].append(r["ttft_predicted_s"] / t - 1)
    rows = [[f"{lo:g}-{hi:g} s" if hi < 100 else f"{lo:g} s and more", len(errs[(lo, hi)]),
             signed(float(np.median(errs[(lo, hi)]))), pct(float(np.mean(np.abs(errs[(lo, hi)]))))]
            for lo, hi in bins if errs[(lo, hi)]]
    return table(["measured TTFT", "points", "median error", "MAPE"], rows)


def per_model(result: dict) -> str:
    rows = [[m, pct(e["tpot_mape_fraction"]), pct(e["tpot_worst_fraction"]), pct(e["ttft_mape_fraction"]),
             pct(e["ttft_mape_fraction_batch_64_up"]), pct(e["peak_mem_mape_fraction"]), e["points"]]
            for m, e in result["per_model"].items()]
    rows.append(["all", pct(result["tpot_mape_fraction"]), pct(result["tpot_worst_fraction"]),
                 pct(result["ttft_mape_fraction"]), pct(result["ttft_mape_fraction_batch_64_up"]),
                 pct(result["peak_mem_mape_fraction"]), result["points"]])
    return table(["model", "TPOT MAPE", "worst TPOT", "TTFT MAPE", "TTFT MAPE b>=64", "peak mem MAPE", "points"], rows)


def fit_section(path: str) -> str:
    from roofline.calibration import load_calibration
    from roofline.views import fit_view

    cal = load_calibration(ROOT / path)
    lines = fit_view(cal, path, "table").splitlines()[1:]  # the first line says "wrote": it was read here
    return f"`{path}` ({cal.card}/{cal.engine}, {cal.kv_cache} cache):\n\n```text\n" + "\n".join(lines) + "\n```\n"


def ceilings_section() -> str:
    from roofline.hardware import load_card

    c = json.loads((ROOT / M / "h200-ceilings-grid.json").read_text())
    card = load_card("h200")
    rows = [
        ["copy bandwidth (bytes read + written)", f"{c['copy_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s",
         f"{card.datasheet_bandwidth.value:,.0f} GB/s"],
        ["read bandwidth (the model's ceiling)", f"{c['read_bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s",
         f"{card.datasheet_bandwidth.value:,.0f} GB/s"],
        ["bf16 GEMM", f"{c['gemm_bf16_flop_per_s'] / 1e12:,.1f} TFLOP/s", f"{card.datasheet_bf16_flops.value:,.1f} TFLOP/s"],
        ["balance point", f"{c['balance_point_flop_per_byte']:.1f} FLOP/byte",
         f"{card.datasheet_bf16_flops.base / card.datasheet_bandwidth.base:.1f} FLOP/byte"],
    ]
    return table(["quantity", "measured", "datasheet"], rows) + (
        f"\n{c['gpu']}, driver {c['driver']}, torch {c['torch']}, {c['timestamp'][:10]} "
        f"(`{M}/h200-ceilings-grid.json`, measured in the same device call as the grid).\n")


def moe_probe_section(tokens: int = 16384) -> str:
    """Where one MoE layer's time goes at ``tokens`` tokens (a prefill's size), stage by stage, from
    the MoE probe (h200-probe-moe.json), with the routed rows' gather and combine per element."""
    from roofline.atomic import read_json

    data = read_json(ROOT / "hardware_profiles/measurements/h200-probe-moe.json", "MoE probe")
    by = defaultdict(dict)
    for p in data["points"]:
        if p["tokens"] == tokens:
            by[p["model"]][p["stage"]] = p
    rows = []
    for model, st in by.items():
        t = {k: v["seconds"] for k, v in st.items()}
        p = st["moe_forward"]
        gc = t["gather"] + t["combine"]
        rows.append([model, f"{p['experts']} / {p['top_k']}", f"{p['hidden']} x {p['moe_inter']}",
                     f"{1e3 * t['moe_forward']:.2f}", f"{1e3 * (t['gemm_gate_up'] + t['gemm_down']):.2f}",
                     f"{1e3 * gc:.2f}", f"{1e3 * t['act']:.2f}", f"{1e3 * (t['route'] + t['sort']):.2f}",
                     f"{1e12 * gc / (p['rows'] * p['hidden']):.1f}"])
    return table(["model", "experts / top-k", "hidden x expert width", "layer (ms)", "grouped matmuls",
                  "gather + combine", "activation", "route + sort", "gather + combine, ps per row x hidden"], rows)


def prefill_kernels_section() -> str:
    """The prefill-kernels probe (h200-probe-prefill-kernels.json): the per-element costs its generic
    shapes give, and every catalog model's layer at 32,768 tokens a forward, measured by kernel
    family against the step model's price of the same layer (evidence: none of it fitted)."""
    from roofline.atomic import read_json
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.model_spec import load_model
    from roofline.prefill import static_prefill_work
    from roofline.probes import PROBED_KINDS, prefill_elementwise_costs, prefill_kernel_layer_seconds
    from roofline.step import StepModel

    path = ROOT / M / "h200-probe-prefill-kernels.json"
    costs = prefill_elementwise_costs([path, ROOT / M / "h200-probe-prefill-kernels-mla.json"])
    head = table(["kind of element", "ps per element (per token, per layer)"],
                 [[k.replace("_", " "), f"{1e12 * costs[k]:.2f}"] for k in PROBED_KINDS if k in costs])
    cal, card = load_calibration(ROOT / GRAPH), load_card("h200")
    rows = []
    for pt in read_json(path, "prefill-kernels probe")["points"]:
        if pt["kind"] != "model" or pt["batch"] != 16:
            continue
        spec = load_model(pt["base"])
        m = StepModel(spec=spec, card=card, calibration=cal)
        work = static_prefill_work(pt["batch"], pt["prompt"], "last", m.window, m.masked_prefill)
        parts = m.pass_parts(work)
        per = 1e9 / spec.num_hidden_layers / (pt["batch"] * pt["prompt"])
        meas = prefill_kernel_layer_seconds(pt)
        priced = m.pass_s(work) * per
        rows.append([pt["label"], f"{meas['matmul'] * 1e9:.0f} / {parts.matmul_compute_s * per:.0f}",
                     f"{meas['attention'] * 1e9:.0f} / {(parts.attention_memory_s + parts.attention_compute_s) * per:.0f}",
                     f"{meas['elementwise'] * 1e9:.0f} / {parts.elementwise_s * per:.0f}",
                     f"{meas['prefill'] * 1e9:.0f} / {priced:.0f}", signed(priced / (meas["prefill"] * 1e9) - 1)])
    body = table(["model (a layer, 16 x 2,048 tokens)", "matmuls ns (meas / priced)", "attention", "elementwise",
                  "the layer", "error"], rows)
    return head + "\n" + body


def probe_section() -> str:
    """The attention probe against the calibrated attention family, point by point (a sample)."""
    from roofline.calibration import load_calibration
    from roofline.fitting import _probe_attention_s, _probe_models
    from roofline.hardware import load_card
    from roofline.probes import attention_points

    cal, card = load_calibration(ROOT / GRAPH), load_card("h200")
    pts = attention_points(ROOT / M / "h200-probe-attention.json")
    pred = _probe_attention_s(card, cal, _probe_models(card, pts), pts) + min(p.seconds for p in pts)
    rows = []
    for p, q in zip(pts, pred):
        if p.batch in (1, 16, 256) or (p.batch == 64 and p.context_tokens == 32768):
            kv = p.batch * p.context_tokens * 2 * p.kv_heads * p.head_dim * 2
            rows.append([f"{p.q_heads}/{p.kv_heads}/{p.head_dim}", p.batch, f"{p.context_tokens:,}",
                         f"{kv / 2**20:,.1f}", f"{p.seconds * 1e6:,.1f}", f"{q * 1e6:,.1f}",
                         signed(q / p.seconds - 1), f"{kv / p.seconds / 1e9:,.0f}"])
    errs = np.abs(pred / np.array([p.seconds for p in pts]) - 1)
    return table(["heads q/kv/width", "batch", "cached tokens", "K+V MiB", "measured us", "model us", "error",
                  "K+V read GB/s"], rows) + (
        f"\nAll {len(pts)} points: MAPE {pct(float(errs.mean()))}; from 8 MiB of K+V up "
        f"{pct(float(np.mean([e for e, p in zip(errs, pts) if p.batch * p.context_tokens * 2 * p.kv_heads * p.head_dim * 2 >= 8 * 2**20])))}.\n")


def groups_probe_section() -> str:
    """The attention-groups probe against the calibrated attention family: per generic shape (query
    heads per KV head), the mean signed error at batches 64 and 256, by cached tokens."""
    from roofline.calibration import load_calibration
    from roofline.fitting import _probe_attention_s, _probe_models
    from roofline.hardware import load_card
    from roofline.probes import attention_points

    cal, card = load_calibration(ROOT / GRAPH), load_card("h200")
    floor = min(p.seconds for p in attention_points(ROOT / M / "h200-probe-attention.json"))
    pts = attention_points(ROOT / M / "h200-probe-attention-groups.json")
    pred = _probe_attention_s(card, cal, _probe_models(card, pts), pts) + floor
    by: dict = defaultdict(list)
    for p, q in zip(pts, pred):
        if p.batch >= 64:
            by[(p.q_heads, p.kv_heads, p.head_dim, p.context_tokens)].append(q / p.seconds - 1)
    shapes = sorted({k[:3] for k in by}, key=lambda k: (k[2], k[0] // k[1]))
    contexts = sorted({k[3] for k in by})
    rows = [[f"{q}/{kv}/{hd}", q // kv] + [signed(float(np.mean(by[(q, kv, hd, t)]))) if (q, kv, hd, t) in by else "-"
                                           for t in contexts] for q, kv, hd in shapes]
    return table(["shape (q/kv/width)", "query heads a KV head"] + [f"{t:,} cached, batches 64-256" for t in contexts],
                 rows)


def overhead_share_section(cal) -> str:
    """The fixed part of one layer at batch 1 by model (the layers probe's slope less the layer's weight
    bytes at the calibration's bandwidth), and the dense validation's TPOT error by overhead share."""
    from roofline.model_spec import load_model

    data = json.loads((ROOT / M / "h200-probe-layers.json").read_text())
    bandwidth = cal.bandwidth_efficiency * cal.measured_bandwidth_bytes_per_s
    fixed_rows = []
    for model in dict.fromkeys(p["model"] for p in data["points"]):
        sel = sorted((p["layers"], p["step_s"]) for p in data["points"]
                     if p["model"] == model and not p["variant"] and p["batch"] == 1)
        slope = np.polyfit([x for x, _ in sel], [y for _, y in sel], 1)[0]
        spec = load_model(model)
        layer_bytes = 2.0 * (spec.linear_params_per_layer + spec.bias_params_per_layer)
        fixed_rows.append([model, "fitted" if model in cal.fitted_on else "held out", f"{slope * 1e6:.1f}",
                           f"{layer_bytes / bandwidth * 1e6:.1f}", f"{(slope - layer_bytes / bandwidth) * 1e6:.1f}"])
    val = cal.fit_report["validation"]["dense"]
    bins = [[f"{b['from']:.1f}-{b['to']:.1f}", b["points"], len(b["models"]),
             ", ".join(b["models"]) if len(b["models"]) <= 3 else "", pct(b["tpot_mape_fraction"])]
            for b in val["tpot_mape_by_overhead_share"]]
    top = cal.fit_report["coverage"]["overhead_share"][1]
    return (table(["model", "fit", "batch 1: one layer (us)", "its weights at the fitted bandwidth (us)",
                   "fixed part (us)"], fixed_rows)
            + "\nThe dense validation set's TPOT error by the predicted step's overhead share (its fixed "
            f"overhead over its time; the fitted steps reach {100 * top:.0f}%):\n\n"
            + table(["overhead share", "held-out points", "models", "(which, if three or fewer)", "TPOT MAPE"], bins)
            + "\nAbove 0.6 the figures rest on one model (qwen2.5-0.5b, the catalog's only dense model that small); "
              f"a row more than {100 * top + 2:.0f}% fixed overhead (2 points over the fitted steps') also names its "
              "overhead share as an extrapolation.\n")


def layers_section() -> str:
    """The layers probe: each model's decode step cut to 2-12 layers, its per-layer and per-step
    times (least squares over the layer counts), and the shipped calibration on those steps."""
    from roofline.calibration import load_calibration
    from roofline.decode import mean_tpot_s
    from roofline.hardware import load_card
    from roofline.model_spec import load_model
    from roofline.step import StepModel

    cal, card = load_calibration(ROOT / GRAPH), load_card("h200")
    data = json.loads((ROOT / M / "h200-probe-layers.json").read_text())
    fitted = set(cal.fitted_on)
    groups: dict = defaultdict(list)
    for p in data["points"]:
        groups[(p["model"], p["variant"])].append(p)
    rows = []
    for (model, variant), pts in groups.items():
        spec = load_model(model)
        if variant:
            spec = spec.model_copy(update={k: v for k, v in
                                           (("num_attention_heads", pts[0]["q_heads"]),
                                            ("num_key_value_heads", pts[0]["kv_heads"]),
                                            ("head_dim", pts[0]["head_dim"]))})
            spec = type(spec)(**spec.model_dump())
        cells, errs = [], []
        for batch in (1, 16, 64):
            sel = sorted((p["layers"], p["step_s"]) for p in pts if p["batch"] == batch)
            layers = np.array([x for x, _ in sel], dtype=float)
            secs = np.array([y for _, y in sel])
            slope, icpt = np.polyfit(layers, secs, 1)
            cells.append(f"{icpt * 1e6:,.0f} + {slope * 1e6:,.1f} x L")
            for n, t in sel:
                pred = mean_tpot_s(StepModel(spec.with_layers(n), card, cal), np.array([float(batch)]),
                                   np.array([128.0]), np.array([128.0]), "static")[0]
                errs.append(pred / t - 1.0)
        role = "fitted" if model in fitted and not variant else "held out"
        rows.append([model + (f" ({variant})" if variant else ""), role, *cells,
                     pct(float(np.mean(np.abs(errs)))), signed(float(max(errs, key=abs)))])
    return table(["model", "set terms?", "batch 1: step + layer us", "batch 16", "batch 64",
                  "calibration MAPE on the cut steps", "worst"], rows)


#: the six runs the shipped fit reads (benchmarks/make_calibrations.py): call 39's two at 2,048 positions,
#: call 80's at 520 (two), 2,048 and 4,104
LAYER_FEATURE_PROBES = ("h200-probe-layer-features.json", "h200-probe-layer-features-2.json") + tuple(
    f"h200-probe-layer-features-call80-{run}.json" for run in ("520a", "2048b", "4104c", "520d"))
#: held-out files of the models with a decode-layer feature (and mixtral-8x7b, without one)
FEATURE_FILES = ("h200-graph-dense-call20.csv", "h200-graph-check-call25.csv", "h200-graph-check-call26.csv",
                 "h200-graph-check-call29.csv", "h200-graph-call22.csv", "h200-graph-moe.csv",
                 "h200-graph-moe-call19.csv", "h200-graph-moe-check-call29.csv", "h200-graph-moe-check-call32.csv",
                 "h200-graph-moe-check-call34.csv")
FEATURE_MODELS = ("qwen3-8b", "qwen3-32b", "olmo-2-7b", "gemma-3-4b", "gemma-3-12b", "deepseek-v2-lite", "gpt-oss-20b",
                  "mixtral-8x7b")


def layer_features_section() -> str:
    """The layer-features probe: each variant's per-layer time over its reference's (median over
    batches 1-16 and the runs), what the shipped calibration prices that at, and each held-out
    model's TPOT MAPE per context with and without the feature times."""
    import statistics

    from roofline import api
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.probes import priced_per_layer_s, read_layer_features

    cal, card = load_calibration(ROOT / GRAPH), load_card("h200")
    runs = read_layer_features([ROOT / f"{M}/{name}" for name in LAYER_FEATURE_PROBES])

    def measured(model, variant, batch, k):
        return runs.per_layer_s(model, variant, batch, k)[0]

    def priced(model, variant, batch):
        _, layers, context = runs.per_layer_s(model, variant, batch, 0)
        return priced_per_layer_s(cal, card, model, runs.grid[(model, variant)], layers, batch, context)

    rows = []
    for (model, variant) in runs.grid:
        if not variant:
            continue
        ref = runs.reference(model, variant)
        keys = sorted({(b, k) for (m, v, b, k) in runs.cuts if m == model and v == variant and b <= 16})
        meas = statistics.median(measured(model, variant, b, k) - measured(model, ref, b, k) for b, k in keys)
        price = statistics.median(priced(model, variant, b) - priced(model, ref, b) for b in sorted({b for b, _ in keys}))
        big = [measured(model, variant, b, 0) - measured(model, ref, b, 0) for b in (64, 256)]
        rows.append([f"{model} {variant}", ref or "the model", f"{meas * 1e6:+.1f}", f"{price * 1e6:+.1f}",
                     " / ".join(f"{x * 1e6:+.0f}" for x in big)])
    probe = table(["variant", "against", "measured us a layer (batches 1-16)", "priced (shipped calibration)",
                   "measured at batches 64 / 256"], rows)
    without = cal.model_copy(update={"layer_feature_overhead_s": None})
    groups: dict = defaultdict(lambda: ([], []))
    for f in FEATURE_FILES:
        # gpt-oss-20b's call-19 rows were measured again in call 22, after the sinks row's alignment fix
        models = [m for m in FEATURE_MODELS if not (f == "h200-graph-moe-call19.csv" and m == "gpt-oss-20b")]
        for i, c in enumerate((cal, without)):
            for r in api.compare([ROOT / f"{M}/{f}"], calibration=c)["rows"]:
                if r["model"] in models:
                    groups[(r["model"], r["prompt_tokens"], r["gen_tokens"])][i].append(
                        abs(r["tpot_predicted_s"] / r["tpot_measured_s"] - 1))
    held = [[m, f"{p}/{g}", pct(float(np.mean(w))), pct(float(np.mean(wo))), len(w)]
            for (m, p, g), (w, wo) in sorted(groups.items(), key=lambda kv: (FEATURE_MODELS.index(kv[0][0]), kv[0][1]))]
    return probe, table(["model", "prompt/gen", "TPOT MAPE", "without the feature times", "points"], held)


def contexts_section() -> str:
    """The attention-contexts probe: at each probed cache length, the median (and range) over shapes
    and batches of the measured attention's residual from its trend in log length, against the
    shipped calibration's price without its windows (roofline.probes.attention_context_residuals)."""
    from roofline.calibration import load_calibration
    from roofline.hardware import load_card
    from roofline.probes import attention_context_residuals, attention_points

    cal = load_calibration(ROOT / GRAPH)
    series = attention_context_residuals(attention_points(ROOT / f"{M}/h200-probe-attention-contexts.json"), cal,
                                         load_card("h200"))
    res: dict = defaultdict(list)
    for by in series.values():
        for t, r in by.items():
            res[t].append(r)
    windows = cal.attention_context_factors or []
    rows = []
    for t in sorted(res):
        v = np.array(res[t])
        inside = " / ".join(f"x{w[2]:.3f} (heads {w[3]:.0f}-{w[4]:.0f} wide)" for w in windows if w[0] < t <= w[1])
        rows.append([f"{t:,}", signed(float(np.exp(np.median(v)) - 1)), signed(float(np.exp(v.min()) - 1)),
                     signed(float(np.exp(v.max()) - 1)), len(v), inside])
    return table(["cache positions", "median over shapes and batches", "least", "most", "series",
                  "window's factor"], rows)


def floor_section() -> str:
    data = json.loads((ROOT / M / "floor-errors.json").read_text())
    rows = []
    for label, s in data["per_source"].items():
        rows.append([label, signed(s["tpot"]["mean_signed_fraction"]), pct(s["tpot"]["mape_fraction"]),
                     signed(s["ttft"]["mean_signed_fraction"]) if s["ttft"] else "-",
                     signed(s["peak_mem"]["mean_signed_fraction"]) if s["peak_mem"] else "-", s["tpot"]["points"]])
    p = data["pooled"]
    rows.append(["all", signed(p["tpot"]["mean_signed_fraction"]), pct(p["tpot"]["mape_fraction"]),
                 signed(p["ttft"]["mean_signed_fraction"]), signed(p["peak_mem"]["mean_signed_fraction"]),
                 p["tpot"]["points"]])
    return table(["measurements", "TPOT mean signed", "TPOT MAPE", "TTFT (b>=64) mean signed",
                  "peak mem mean signed", "points"], rows)


def bend_section() -> str:
    from roofline import api
    from roofline.measurements import read_measurements

    rows = []
    data = [r for r in read_measurements(ROOT / M / "h200-graph-grid.csv") if r.ok] + \
           [r for r in read_measurements(ROOT / M / "h200-graph-heldout.csv") if r.ok]
    for model, prompt, gen in (("qwen2.5-1.5b", 128, 128), ("qwen2.5-7b", 128, 128), ("llama-3.1-8b", 128, 128),
                               ("qwen2.5-7b", 2048, 64), ("qwen2.5-14b", 512, 32), ("qwen2.5-3b", 4096, 32)):
        tp = {r.batch: r.tpot_s for r in data if (r.model, r.prompt_tokens, r.gen_tokens) == (model, prompt, gen)}
        bs = sorted(tp)
        knee = next(((lo, hi) for lo, hi in zip(bs, bs[1:]) if tp[hi] / tp[lo] > (hi / lo) ** 0.5), None)
        b = api.bend("h200", model, engine="graph", calibration=ROOT / GRAPH, prompt_tokens=prompt, gen_tokens=gen)
        rows.append([model, f"{prompt}/{gen}", ", ".join(map(str, bs)),
                     "none measured" if knee is None else f"({knee[0]}, {knee[1]}]", b.knee_batch,
                     b.crossing_batch or "never"])
    return table(["model", "prompt/gen", "measured batches", "measured: first step costing > sqrt(ratio) in TPOT",
                  "predicted knee", "predicted crossing"], rows)


def main() -> None:
    from roofline.calibration import load_calibration

    t0 = time.perf_counter()
    graph = load_calibration(ROOT / GRAPH)
    feature_probe, feature_held = layer_features_section()
    val = graph.fit_report["validation"]
    heldout = compare(f"{M}/h200-graph-heldout.csv", GRAPH)
    old128 = compare(f"{M}/h200-graph.csv", GRAPH, models=("qwen2.5-0.5b",))
    old32 = compare(f"{M}/h200-graph-qwen2.5-32b.csv", GRAPH)
    new128 = compare(f"{M}/h200-graph-128-call4.csv", GRAPH)
    call17 = compare(f"{M}/h200-graph-128-call17.csv", GRAPH)
    llama32 = compare(f"{M}/h200-graph-heldout-call4.csv", GRAPH)
    moe = compare(f"{M}/h200-graph-moe.csv", GRAPH)
    moe19 = compare(f"{M}/h200-graph-moe-call19.csv", GRAPH)
    arch20 = compare(f"{M}/h200-graph-dense-call20.csv", GRAPH)
    again22 = compare(f"{M}/h200-graph-call22.csv", GRAPH)
    unaligned23 = compare(f"{M}/h200-graph-unaligned-call23.csv", GRAPH)
    check25 = compare(f"{M}/h200-graph-check-call25.csv", GRAPH)
    check26 = compare([f"{M}/h200-graph-check-call26.csv", f"{M}/h200-graph-check-call26-llama2.csv"], GRAPH)
    check29 = compare([f"{M}/h200-graph-check-call29.csv", f"{M}/h200-graph-moe-check-call29.csv"], GRAPH)
    check32 = compare([f"{M}/h200-graph-check-call32.csv", f"{M}/h200-graph-moe-check-call32.csv"], GRAPH)
    check34 = compare(f"{M}/h200-graph-moe-check-call34.csv", GRAPH)
    tp2 = compare(f"{M}/h200-graph-tp2.csv", GRAPH)
    doc = [
        "# Calibration: the model against real decode\n\n",
        "Generated by `.venv/bin/python benchmarks/calibration_report.py` from the measurements in "
        "`hardware_profiles/measurements/` and the calibrations `benchmarks/make_calibrations.py` fits from them "
        "(how and where they were measured, the commands and the GPU time: [calibration-runs.md](calibration-runs.md); "
        "the formulas: [method.md](method.md)). *Held out* means the fit never saw that model (or that context).\n",
        "\n## What each shipped calibration was fitted on\n\n",
        table(["calibration", "fitted on", "measurements"], [
            ["`h200-graph.json`", ", ".join(graph.fitted_on),
             "dense terms: the default grid (`h200-graph-grid.csv`: prompts 128, 512, 2048, 8192, 16384 x batches 1-1024 "
             "until out of memory) of the three dense models, the attention probes (`h200-probe-attention.json`, and "
             "`h200-probe-attention-groups.json` at generic shapes), the "
             "layers probe's cut steps of the same three models (`h200-probe-layers.json`); stored as measured: the "
             "prefill-attention and masked-attention probes' rates by head width (`h200-probe-prefill-attention.json`, "
             "`h200-probe-masked-attention.json`), the prefill-kernels probe's cost per element by kind at generic "
             "shapes (`h200-probe-prefill-kernels.json`) and the TP2 link (`h200-collectives-tp2.json`); MoE terms: "
             "the qwen3-30b-a3b rows of `h200-graph-moe.csv` only, with the MoE probe's routed-row cost, grouped-GEMM "
             "rate and (gpt-oss's) clamped activation, the first two at qwen3-30b-a3b's shape (`h200-probe-moe.json`), "
             "and the grouped-mm probe's table of the experts' matmuls at generic shapes "
             "(`h200-probe-grouped-mm-call72.json`)"],
            ["`h200-hf-eager.json`", ", ".join(load_calibration(ROOT / EAGER).fitted_on),
             "`h200-hf-eager-grid.csv`: prompts 128, 2048, 8192 x batches 1-256"],
            ["`rtx3060-hf-eager.json`", ", ".join(load_calibration(ROOT / LESSON).fitted_on),
             "the lesson's own table (`rtx3060-hf-eager-lesson.csv`)"],
        ]),
        "\nEvery other model and context in these files is held out. The attention probe times the graph engine's "
        "decode attention alone at two head shapes, 12/2/128 (qwen2.5-1.5b's) and 14/2/64 (qwen2.5-0.5b's): "
        "qwen2.5-0.5b's *attention kernel shape* was therefore seen by the fit, though never its decode steps.\n",
        "\n## Ceilings measured on the lent H200\n\n", ceilings_section(),
        "\n## Engine `graph`: the fit\n\n",
        "The graph engine (`calibrate/graph_engine.py`): our own decoder with a static KV cache read whole every "
        "step and the decode step captured in one CUDA graph per batch, prefill in forwards of at most 32,768 tokens. "
        "In-sample, leave-one-model-out (each of the three fitted on the other two) and leave-one-context-out "
        "(each context predicted by a fit on the others) errors:\n\n",
        fit_section(GRAPH),
        "\nThe leave-one-model-out row of qwen2.5-1.5b is the weak one: fitted on qwen2.5-7b and llama-3.1-8b alone "
        "(28 and 32 layers, both about 8 GB of weights) the fixed and per-layer overheads are barely separable from "
        "their steps, and qwen2.5-1.5b's small steps are mostly overhead. The layers probe (below) measures that "
        "split directly, which took this row from 14.2% to 9.6%. The expected error `predict` shows is the larger "
        "of the mean of these held-out rows and the held-out context nearest the question "
        "([method.md](method.md#confidence)).\n",
        "\n## The step's fixed time: the layers probe\n\n",
        "`python3 -m calibrate.probes --what layers` (device call 16, `h200-probe-layers.json`) times the graph "
        "engine's own decode step of each model cut to 2, 4, 8 and 12 layers (batches 1, 16 and 64, a 256-token "
        "static cache, as at prompt 128 / gen 128). A line through the layer counts gives the step's own time "
        "(embedding, final norm, LM head, argmax) and one layer's. The fit takes the three fitted models' cut steps "
        "as extra residuals (`roofline fit --layers-probe`); the other rows are held out, the head-split variants "
        "(the same weights, other heads) among them. Before the probe the fit had put 220 us in the step and 44.8 "
        "us in each layer; it now puts 32 us and 50.2 us (`.venv/bin/python benchmarks/overhead_variants.py` sets "
        "both fits, and other forms, against the held-out models):\n\n",
        layers_section(),
        "\n### How much of a step is fixed, and what that does to the error\n\n",
        "The fixed part of a layer (launches and the small kernels' own time) is not the same on every model: "
        "at batch 1 the layers probe's per-layer time less the layer's weight bytes at the fitted bandwidth is "
        "44-49 us across the seven models, and qwen2.5-1.5b, the one small model fitted on, has the most of "
        "the seven. A step that is mostly fixed time (a small model at small batches) carries that spread, "
        "which three fitted models cannot show: the held-out 128/128 runs of qwen2.5-0.5b are priced 6-10% too slow at "
        "batches 1-64. `predict` therefore gives each row at least the held-out error of steps as much fixed "
        "overhead (`fit_report.validation.dense.tpot_mape_by_overhead_share`), and names a step more fixed "
        "overhead than any fitted one as an extrapolation ([method.md](method.md#confidence)):\n\n",
        overhead_share_section(graph),
        "\n## A layer's features: the layer-features probe\n\n",
        "The fitted per-layer time is learnt on models whose layers all run the same ~19 kernels. A layer with "
        "q/k norms (qwen3, gemma-3, olmo-2), MLA's absorbed decode, shared experts, or gpt-oss's MoE layer runs "
        "more, and every such held-out model was priced fast at small batches (qwen3-8b -3 to -8% at batches "
        "1-16, olmo-2-7b -7%, gemma-3 -4 to -9%, deepseek-v2-lite -7 to -13%). `python3 -m calibrate.probes "
        "--what layer-features` (device calls 37-39 and 80) times the engine's decode step at a fitted model's "
        "shape with one feature switched on, cut to 2 and 6 layers, batches 1-256. The fit reads six runs: call "
        "39's two with the probe's 2,048-position cache (`h200-probe-layer-features.json`, `-2.json`) and call "
        "80's at 520 (two), 2,048 and 4,104 positions (`h200-probe-layer-features-call80-*.json`). Each "
        "variant's per-layer time over its reference's, less what the fitted terms price the shape change at, "
        "is one equation; least squares gives the feature times "
        f"(`layer_feature_overhead_s`: q/k norms {1e6 * graph.layer_feature_overhead_s['qk_norm']:.1f} us a "
        f"layer, MLA {1e6 * graph.layer_feature_overhead_s['mla']:.1f}, two shared experts "
        f"{1e6 * graph.layer_feature_overhead_s['shared_experts']:.1f}, gpt-oss's MoE layer "
        f"{1e6 * graph.layer_feature_overhead_s['biased_experts']:.1f}; [method.md](method.md#layer-features)). "
        "The probe, and the shipped calibration's price of the same differences:\n\n",
        feature_probe,
        "\nThe per-layer differences move by a few us between runs (call 80's two at 520 positions: up to 10 us "
        "at batch 4); the fit takes each variant's median over the batches and runs. At 2,048 positions "
        "qwen3-30b-a3b's softmax still runs the warp kernel, and its gpt_oss variant's, the sink in its row, "
        "does not: the two runs at 2,048 alone read gpt-oss's MoE layer at 1.6 us (3.9 once the step prices "
        "the sink's row), those at 520 and 4,104 at 13 (`.venv/bin/python benchmarks/layer_walk.py`, part 3). "
        "The MHA variant's q/k "
        "norms cost less than the GQA ones' (the least squares takes the mean); from batch 64 up the features "
        "cost more than their fixed time (their elements, the routed rows' biases), which the term underprices. "
        "The held-out models with these features, TPOT MAPE per context with the shipped calibration and with "
        "its feature times removed (the MoE terms as fitted with them: qwen3-30b-a3b has q/k norms, so its "
        "per-MoE-layer overhead fell from 93 to 87 us, and mixtral-8x7b, which has none of the features, is "
        "priced that much faster). These measurements were seen before the term was written:\n\n",
        feature_held,
        "\n**A check after the fact** (device call 40, `h200-graph-check-call40.csv`, `h200-graph-moe-check-call40.csv`, "
        "measured after the feature times were committed, at prompts none of these models had been measured at): "
        "the q/k-norm models at 1,024 and 3,072, deepseek-v2-lite, gpt-oss-20b and mixtral-8x7b at 3,072. With the "
        "feature times removed the same rows are at: qwen3-8b 8.4% and 4.0%, qwen3-32b 5.4% and 2.5%, olmo-2-7b "
        "10.3% and 4.5%, gemma-3-4b 6.9% and 5.4%, gemma-3-12b 5.0% and 4.1%, deepseek-v2-lite 3.5% (the previous "
        "calibration's figures; mixtral-8x7b was 3.5%). At 1,024 + 16 the larger batches were priced fast (olmo-2-7b "
        "-11% from batch 16, qwen3-8b -10% at 64: 7.9% and 5.8% MAPE) until the attention-contexts probe's windows "
        "(next section) were written after this check; the table is with them. gpt-oss-20b's batch 16 is "
        "+11%: its random routing touched 22.5 experts a layer there (28.2 at 6,144), and the model prices "
        "uniform routing's 28.2:\n\n",
        per_model_context(compare([f"{M}/h200-graph-check-call40.csv", f"{M}/h200-graph-moe-check-call40.csv"], GRAPH)),
        "\n## Cache lengths where the attention runs a slower kernel: the attention-contexts probe\n\n",
        "`python3 -m calibrate.probes --what attention-contexts` (device call 42, `h200-probe-attention-contexts.json`; "
        "call 41 ran 19 of its lengths first) times the engine's decode attention alone at generic shapes (1, 4 "
        "and 8 query heads a KV head of 128, 7 of 64), batches 16, 64 and 256, over 40 cache lengths around the "
        "powers of two. Against the calibration's price each series follows a smooth trend in log length; its "
        "residual from the trend, per length (`roofline fit --attention-contexts-probe` makes a window of every "
        "run of lengths more than 8% over it; [method.md](method.md#attention)):\n\n",
        contexts_section(),
        "\nThe windows change only the rows whose cache is in them. With them (the tables in this file): "
        "olmo-2-7b at 1,024 + 16 7.9% -> 3.9% TPOT MAPE, qwen3-8b 5.8% -> 2.7%, qwen3-32b 4.0% -> 1.6% (call 40); "
        "llama-3.2-3b at 1,000 + 50 6.8% -> 3.3%, mistral-7b-v0.3 4.5% -> 1.6% (call 23); phi-3-mini-4k at "
        "1,024 + 16 16.3% -> 11.0% (call 32). These rows were seen before the windows were written.\n",
        "\n**A check after the fact** (device call 43, `h200-graph-check-call43.csv`, run after the windows were "
        "committed): four models never measured at these lengths, at prompt 512 + gen 128 (a 640-position cache) "
        "and 1,024 + 32 (1,056). Without the windows internlm2.5-7b, llama-2-13b and pythia-6.9b were at 2.4-4.4% "
        "(priced fast from batch 16, -5 to -7%); with them at 0.7-2.0%. gemma-2-9b (heads 256 wide, never probed) "
        "went from 2.8% to 4.6% and 6.3% (+14% and +20% at batch 256): its QK product runs other tiles. The "
        "windows now hold for the probe's head widths only (64-128; MLA never), which was written after this "
        "check saw gemma-2-9b: its rows are back at 2.8% and no longer unseen by the rule. The table is with "
        "the rule:\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call43.csv", GRAPH)),
        "\nDevice call 44 (`h200-graph-check-call44.csv`, after the head-width rule was committed): falcon-7b, "
        "qwen2.5-14b, llama-3.2-1b and mistral-7b-v0.1 at 512 + 128 (640 positions), 1,000 + 88 (1,088: the "
        "window's last) and 1,100 + 28 (1,128: past it). Without the windows mistral-7b-v0.1 and qwen2.5-14b were "
        "at 2.3-3.7% in the windows, llama-3.2-1b at 8.0% and 11.1%; with them 1.3-1.5% and 6.6% and 8.2% "
        "(llama-3.2-1b's 64-wide heads at batch 256: -16% and -18%; the probe's one 64-wide shape runs 1.4x "
        "there, the median over shapes and batches was 1.17; each width's factor is now the probe's at batch 256, "
        "written after this check: 1.21 for 128-wide heads, 1.38 for 64-wide). falcon-7b (71 query heads on one KV head) went "
        "from 3.5-5.4% to 5.4-6.1% with them: the windows now hold for the probe's 1-8 heads a KV head too "
        "(written after this check saw falcon-7b; its rows are back at 3.5-5.4%). The table is with both rules "
        "(llama-3.2-1b at 4.1% and 5.1%):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call44.csv", GRAPH)),
        "\nDevice call 45 (`h200-graph-check-call45.csv`, after the per-width factors were committed): qwen2.5-0.5b "
        "(64-wide heads), qwen2.5-3b and llama-3.2-3b at 512 + 128 and 1,024 + 48 (1,072 positions), never "
        "measured there. Without the windows 1.6-6.1% TPOT MAPE (qwen2.5-0.5b -19% at batch 256 at 1,072); with "
        "one median factor 1.1-4.5%; with the per-width factors:\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call45.csv", GRAPH)),
        "\n## A prefill's clock: the sustained-matmul probe\n\n",
        "Before this probe, TTFT's error grew with the prefill's length on every file, the fitted models' own "
        "included: priced 2-5% slow under 0.1 s, within 1% at 0.2-0.5 s, 4.6% fast at 1-2 s, 5-7% fast past 2 s "
        "(the calibration of commit a3b8504, one prefill rate whatever the pass's length); the models of device "
        "call 47 below, larger than any measured before, had prefills of 2-5 s and missed by 9-11%. The H200 "
        "does not hold its clock under load. `python3 -m calibrate.probes --what sustained-matmul` (device calls "
        "48 and 49, `h200-probe-sustained-matmul.json`) runs one 8192^3 bf16 GEMM back to back for 12 s and then "
        "in 3 s bursts after idle gaps, and the graph engine's prefill of two fitted models forward after forward "
        "(qwen2.5-7b, 4 x 512 tokens a forward, ~50 ms each; llama-3.1-8b, 16 x 2,048, ~0.9 s), timing each "
        "window from the host while nvidia-smi samples the SM clock every 50 ms:\n\n",
        load_curve_section(),
        "\nThe clock holds 1,980 MHz for the first ~0.1 s of load, then falls to ~1,500 MHz under the GEMM, and "
        "the power reaches the 700 W limit at ~1 s (a dip there, in every phase). A prefill, whose norms, "
        "attention and elementwise kernels draw less, falls less: ~7% from 0.1 s, ~9% at the limit. After 1 s "
        "idle the clock is back at its boost. A prefill's matmuls priced at the fitted efficiency now run at the "
        "prefill curve's average over the pass (`Calibration.matmul_load_curve`, `roofline fit "
        "--sustained-matmul-probe`; roofline.prefill.prefill), the pass starting on a rested card (the harness "
        "captures the decode graph between its warm-up prefill and the timed one); the rates probes timed (the "
        "prompt attention's, the routed experts') are held as timed; the prefill efficiency, refitted on the same "
        "TTFTs, is now relative to the first tens of ms (1.017 of the ceiling's 8192^3 GEMM). TTFT by its length "
        "over the dense files held out (the validation set):\n\n",
        ttft_by_length(GRAPH),
        "\nThe curve is the card's (its power limit and boost): it is not carried to other cards; the engine "
        "profile carries the prefill efficiency at a half-second prefill's average of it.\n",
        "\n**Catalog models no run had measured** (device call 47, `h200-graph-check-call47.csv`; gpt-neox-20b: "
        "64 MHA heads of 96, parallel residual; falcon-40b: 128 query heads of 64 on 8 KV heads, parallel "
        "attention, 60 layers; llama-2-70b: 80 layers, 128 GiB of weights, batches 1-16). Measured before the "
        "load curve, whose TTFT misses (falcon-40b 10.6% and 11.1%, llama-2-70b 10.3%, gpt-neox-20b 9.0-9.6% "
        "MAPE from batch 16) led to the sustained-matmul probe: their TTFT is not unseen by it, their TPOT and "
        "peak memory are (nothing was changed after them but the prefill's clock):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call47.csv", GRAPH)),
        "\n**A check after the fact** (device call 50, `h200-graph-check-call50.csv`, run after the load curve "
        "was committed): five dense models at prompt lengths none was measured at (qwen2.5-32b at 4,096 and "
        "8,192, internlm2.5-7b at 2,048 and 8,192, llama-2-13b and gemma-3-12b at 6,144, gpt-j-6b at 2,048). "
        "TTFT's MAPE over all its 27 points is 3.0% with the curve, 4.1% with the calibration before it "
        "(qwen2.5-32b's prefills of 1-4 s: 7.5% -> 5.3%):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call50.csv", GRAPH)),
        "\n**Large decode batches** (device call 54, `h200-graph-check-call54.csv`, committed before it ran, the "
        "model as of the MoE tiles; nothing changed after it): ten held-out models at the default grid's prompts "
        "512 + 64 and 2,048 + 64, batches 64-2,048 until out of memory, where the validation set had six points "
        "from batch 512 up. Two patterns. At 512 + 64 the models with eight KV heads run batch 128 slower than "
        "the model says (-4% to -8%, llama-3.2-1b -19%) and batches 256-2,048 faster (+4% to +9%); the "
        "attention-batches probe (device call 55, `h200-probe-attention-batches.json`) finds the first in "
        "cuBLAS: the decode attention's QK product at 576 positions runs 1.4-2x slower per sequence at 1,024 "
        "batched matrices (batch 128 x 8 KV heads; llama-3.2-1b's 64-wide heads at 768 too), not at 2,112 "
        "positions. The fitted llama-3.1-8b shows both in-sample (-6% at 128, +3-4% from 256). At 2,048 + 64 "
        "llama-3.2-1b is -7% and falcon-7b -6 to -9% at every batch, gemma-3-4b +8-10% at 256-512 (docs/method.md, "
        "section 13):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call54.csv", GRAPH)),
        "\nDevice call 56 (`h200-graph-check-call56.csv`, the same grid on eight more held-out models, committed "
        "before it ran, nothing changed after it) finds the large batches of the MHA models (llama-2-7b and -13b, "
        "pythia-6.9b, olmo-2-7b; gpt-j-6b's 16 heads of 256) priced 2-13% slow, gemma-2-9b's 1-9% slow, and "
        "qwen2.5-0.5b's (14 query heads on 2, 64 wide) 9-18% fast from batch 128 at 2,048 + 64. Against the "
        "attention probes the step model's attention family misses the same way: MHA heads over the probe by 3-13% "
        "from batch 64 at 2,048-8,192 positions, many query heads a KV head under it at long rows "
        "(`benchmarks/attention_probes_vs_model.py`). Refitting its terms on the probes alone lands on the same "
        "terms (`benchmarks/attention_terms_from_probes.py`): the form, one cost per KV byte and one per score "
        "element, is what misses (docs/method.md, section 13):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call56.csv", GRAPH)),
        "\nDevice call 57 (`h200-graph-check-call57.csv`, committed with the graph engine's second decode logits "
        "buffer and run after it): the same grid on five models not measured at these contexts. TPOT within "
        "5.3% MAPE per model and context, no point past 8.3%; peak memory 0.19% MAPE (0.22% with the calibration "
        "before the buffer: these models' vocabularies and batches make the buffer small beside their peaks):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call57.csv", GRAPH)),
        "\nDevice call 58 (`h200-graph-check-call58.csv`, committed with the decode attention's stream terms "
        "fitted on the attention probes, docs/method.md section 2.1, and run after it): eight held-out models at "
        "8,192 + 32 and 16,384 + 32 positions none of them had been measured at, batches 1 to out of memory. With "
        "the calibration it checked (commit 9708df0) TPOT 4.0% MAPE over 67 points (4.1% before the stream terms, "
        "commit d3dad80): at 8,192 + 32 2.1%, at 16,384 + 32 6.2%, falcon-7b (71 query heads on one KV head) "
        "14.2%, +17 to +22% from batch 64. What it missed led to the softmax's kernels by row length "
        "(`attention_score_row_factors`, docs/method.md section 2.1: past 9,216 positions PyTorch's softmax "
        "stages the row in shared memory and runs at about half the bytes a score element); with them, below, "
        "2.2% (falcon-7b 3.2%), but these rows are no longer unseen by that term (device call 59 is its check "
        "after the fact):\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call58.csv", GRAPH)),
        "\nDevice call 59 (`h200-graph-check-call59.csv`, committed with the softmax's kernels by row length and run "
        "after it; nothing changed after it): nine held-out models at 1,920 + 32 (1,952 positions: the warp's "
        "softmax) and 12,288 + 32 (12,320: shared memory), lengths none of them had been measured at, batches 1 to "
        "out of memory. TPOT 4.0% MAPE over 157 points (3.9% with the stream terms alone, commit 9708df0; 4.2% "
        "before them, d3dad80); at 12,320 positions 2.6% (2.3%, 2.9%), at 1,952 5.1% (5.1%, 5.2%). Two misses. "
        "At 1,952 positions every model's small batches are priced 5-8% fast, batch 1 included, where the attention "
        "is a few percent of the step: a step at batch 1 of 1,952 positions is measured slower than one of 2,064 or "
        "4,128 (internlm2.5-7b 5.92 ms against 5.57 and 5.69), a length where cuBLAS runs a slower kernel that the "
        "attention-contexts probe did not probe (its lengths jump from 1,536 to 2,048); llama-3.2-1b's batches 128 "
        "and 256 there -20%, as at 2,112 (the batched-matrices count, docs/method.md section 13). And the 64-wide "
        "heads at 12,320 positions from batch 64 are priced 6-13% fast (qwen2.5-0.5b 6.2%, was 3.7% with the "
        "stream terms alone; llama-3.2-1b 7.0%, was 5.5%): the shared-memory softmax's factor, fitted on 16,384 and "
        "32,768 positions, cheapens them more than they run at 12,320; the 128-wide heads there are within 1-4%:\n\n",
        per_model_context(compare(f"{M}/h200-graph-check-call59.csv", GRAPH)),
        "\n## Dense models and contexts the fit never saw\n\n",
        "Measured with the same harness (`h200-graph-heldout.csv`: five models the fit never saw, at prompts 512, "
        "4096 and 16384, batches 1 to out of memory; TTFT is timed up to 65,536 prompt tokens a batch):\n\n",
        per_model_context(heldout),
        "\nPer model, all contexts together:\n\n", per_model(heldout),
        "\nThe command, for one of them:\n\n",
        run(["compare", "--calibration", GRAPH, f"{M}/h200-graph-heldout.csv", "--model", "qwen2.5-14b"], summary_only),
        "\n**Where it misses.** qwen2.5-0.5b (0.5B parameters, a third the size of the smallest fitted model, "
        "24 layers of hidden 896) is over-predicted at small batches by up to 10% at prompt 128 (next table): its "
        "steps are almost all per-layer fixed time, and the layers probe measures a layer of it at 47 us beyond its "
        "weights' bytes where the fitted 1.5-8B models' take 51-57 us; the calibration has one fixed time a layer "
        "(50.2 us). `predict` flags the size as an extrapolation. mistral-7b-v0.1's windowed prefill at 16k, past its "
        "4,096-token window, runs the engine's masked full-square attention; priced from the masked-attention "
        "probe since the sixth session (TTFT -51% before, -7 to -9% now: \"Other architectures\" below).\n",
        "\n**A prompt's attention at its head width's rate.** The prefill-attention probe (device call 18, "
        "`h200-probe-prefill-attention.json`) times the engine's prefill attention alone: on prompts of 4,096 tokens "
        "and more 128-wide heads run at a median 588 TFLOP/s, 64-wide ones at 453; the calibration stores both as "
        "measured (`prefill_attention_flop_per_s`) and prices a prompt's pairs at the model's rate, where it had "
        "priced them at the prefill matmuls' ~650. The two held-out models with 64-wide heads had come out fast at "
        "long prompts: qwen2.5-0.5b's TTFT at prompt 4,096 (batch 16 and up) from 11.8% to 7.2% MAPE, "
        "llama-3.2-1b's from 5.1% to 1.7% ([method.md](method.md), section 9).\n",
        "\n## Other architectures the fit never saw (device calls 20, 22, 23)\n\n",
        "Twelve catalog models of families the calibration never measured, at prompts 512 and 4,096, gen 16, "
        "batches 1 to out of memory (`h200-graph-dense-call20.csv`): qk-norm (qwen3-8b, qwen3-32b, olmo-2-7b, "
        "gemma-3), sliding windows (gemma-2-9b, gemma-3, phi-3-mini-4k), plain GELU MLPs (pythia-6.9b, gpt-j-6b, "
        "falcon-7b), MHA (llama-2-7b) and internlm2.5-7b. Before this call the graph engine built its own reading "
        "of each config: gemma-3, gpt-j and falcon failed, pythia and gpt-neox ran a gated MLP (+25% weights), "
        "gemma-2 an untied head without its windows, phi-3 without its window. It now takes the structure from "
        "roofline's own config reader (`roofline.config_families`), so it measures the model `predict` prices "
        "(every catalog model's weights within 0.02%, `tests/test_graph_engine_models.py`):\n\n",
        per_model(arch20),
        "\nPeak memory of the three plain-MLP models was 2.5-4.1% high (up to 13% at a point) until the "
        "prefill transient counted half the intermediate buffers for them (`ModelSpec.prefill_transient_width`: "
        "up and GELU(up) against a gated MLP's gate-up, activation and product); the table is with it. "
        "phi-3-mini-4k missed TPOT at prompt 4,096 by 15-46%. The kernels probe (`python3 -m calibrate.probes "
        "--what kernels`, device call 21, `h200-probe-kernels-call21.json`) profiles the engine's decode step kernel by "
        "kernel: its 2,047-token window gave the scores an odd row length, and cuBLAS ran the attention's batched "
        "matmuls as GEMV kernels (391 + 187 us for two layers against ~100 us as tensor-core kernels). The same "
        "held for gpt-oss-20b's sinks (a softmax row of T + 1) and for any static cache whose length is not a "
        "multiple of 8 (llama-3.1-8b at 2,053 positions ran an fp32 GEMM, 1.115 ms for two layers against 0.760 "
        "ms). No serving engine has that artifact, so the harness now lays out every cache in a multiple of 8 "
        "slots, masked past the window or the sequence (`calibrate.graph_engine.RING_ALIGN`; ring and mask tested "
        "against the full history). Re-measured after the fix (device call 22, `h200-graph-call22.csv`; the "
        "kernels probe again in calls 22 and 23, `h200-probe-kernels-call22.json` and `h200-probe-kernels.json`: "
        "every point on tensor-core kernels after the last fix):\n\n",
        per_model_context(again22),
        "\nHeld-out models at prompt + gen lengths that are not multiples of 8 (device call 23, "
        "`h200-graph-unaligned-call23.csv`: 1,000 + 50 and 3,000 + 50):\n\n",
        per_model_context(unaligned23),
        "\n**Windowed prefill.** Past its window (and with sinks, always) the engine's prefill runs a masked SDPA "
        "over the whole prompt, K/V repeated to every head, which the model had priced as the window's causal "
        "pairs: gemma-3-4b and phi-3-mini-4k came out 25-36% fast at prompt 4,096, mistral-7b-v0.1 51% at 16k (now 7-9%). "
        "The masked-attention probe (device call 24, `h200-probe-masked-attention.json`: generic shapes of "
        "head widths 64-256, no catalog model's) times that path: the square at 190-320 TFLOP/s, sinks' padded "
        "72-wide heads at ~120. Priced from it (`masked_prefill_attention_flop_per_s`; [method.md](method.md), "
        "section 3), the tables above carry the change: TTFT MAPE gemma-3-4b 18.3% -> 9.7%, gemma-3-12b 14.3% "
        "-> 6.4%, phi-3-mini-4k 22.3% -> 12.0% (call 20) and 35.7% -> 11.5% at prompt 4,096 (call 22), "
        "mistral-7b-v0.1 13.9% -> 4.3% (the held-out table above), gpt-oss-20b at 4,096 55.7% -> 14.1%. These "
        "measurements were seen before the term was written (they are why it was); the probe's shapes are "
        "generic and nothing was fitted on them.\n",
        "\n**A check after the fact** (device call 25, `h200-graph-check-call25.csv`, measured after the "
        "masked-path and alignment changes were committed, on points none of them saw: the windowed and sinks "
        "models at prompts 2,048 and 8,192, falcon-7b and qwen3-8b):\n\n",
        per_model_context(check25),
        "\nAnd device call 26 (`h200-graph-check-call26.csv`, `h200-graph-check-call26-llama2.csv`): four of these "
        "families at prompt 16,384, and llama-2-13b (MHA, 13B, never measured) at 512 and 3,072:\n\n",
        per_model_context(check26),
        "\n**The prefill's elementwise kernels** (device calls 27 and 28, `python3 -m calibrate.probes --what "
        "prefill-kernels`, `h200-probe-prefill-kernels.json`). The step model priced a prompt's non-matmul work as "
        "one fitted coefficient on hidden + intermediate width, learnt on models whose queries are as wide as the "
        "hidden state and that norm neither queries nor keys; olmo-2-7b's prefill came out 14-16% fast, phi-3-mini-4k's "
        "11-14%, qwen3-30b-a3b's 17-24%, llama-2-7b's 9-11%. The probe profiles the engine's eager prefill of a "
        "config cut to 2 and to 6 layers, kernel by kernel (the difference is four layers' kernels: the embedding "
        "and the head cancel), at twelve generic shapes (llama's, qwen3's with per-head q/k norms, gpt-neox's plain "
        "GELU MLP; from hidden 3,072, 24 query and 8 KV heads of 128, intermediate 8,192, one width changed at a "
        "time; two narrow ones of hidden 1,536) and at 2,048-32,768 tokens a forward. A non-negative least-squares "
        "fit of each generic point's elementwise time per (token x layer) to its elements of each kind, over the "
        "forwards of 8,192 tokens and more (a batch of 16 and more runs 8,192-32,768), gives:\n\n",
        prefill_kernels_section(),
        "\nA query element costs 2.3x a hidden one (rope: five kernels on it, then the attention output's copy), a "
        "key element 3.3x (rope, and both K and V written to the cache), a q/k-norm element 1.2x; the head width "
        "does not matter (64, 128 and 256 alike), nor, within 10%, the forward's size. The per-element costs "
        "price the catalog models' elementwise kernels (none fitted on) within 6% at 8,192 tokens a forward and "
        "4-9% under at 32,768 (phi-3-mini-4k 8-12% under: its masked path's copies); the table has each layer's "
        "measured and priced kernel families at 32,768 tokens, and the step model's price of the whole layer. The calibration "
        "stores the costs as bytes at the measured bandwidth ceiling (`prefill_elementwise_bytes_per_element`, "
        "`roofline fit --prefill-kernels-probe`: another card prices them at its own bandwidth) and holds the old "
        "coefficient at 0; the prefill's matmul efficiency refitted with it came out at "
        f"{graph.prefill_compute_efficiency:.3f} of the measured {graph.measured_peak_flop_per_s / 1e12:.0f} "
        "TFLOP/s (~765 TFLOP/s; the probe's eager matmul kernels run at ~805 at 2,048 tokens a forward and ~680 "
        "at 32,768: larger forwards' matmuls are slower per FLOP, which one efficiency does not follow, and the "
        "matmul column above shows it). gpt-oss's clamped SwiGLU (its experts' activation) is a kind of "
        "its own: the MoE probe's act stage costs 5.7 ps more per element than silu's, added to the gated kind "
        "(`clamped_intermediate`). An MLA layer's decompressed prefill has kinds of its own, from six generic "
        "dense MLA shapes (device call 36, `h200-probe-prefill-kernels-mla.json`, pooled with the GQA shapes: "
        "heads, rope, nope, value and latent widths changed one at a time): 14.1 ps per head-width element "
        "(heads x (nope + rope): the queries' and keys' concatenations, the values' padding), 2.0 per output "
        "element, 2.5 per latent element, and the rope's share inseparable from the heads' (0 by the fit); the "
        "six shapes are priced within 3% from 8,192 tokens. The tables above are with these costs; these "
        "measurements were seen before the term was written.\n",
        "\n**And a check after the fact** (device call 29, `h200-graph-check-call29.csv`, "
        "`h200-graph-moe-check-call29.csv`, measured after the elementwise kinds were committed, on points nothing "
        "had seen: a model of every elementwise kind at prompts 2,048 and 8,192, and two MoE models at 512 and "
        "4,096; qwen3-30b-a3b's MoE terms were fitted at 128 and 2,048 only):\n\n",
        per_model_context(check29),
        "\nTTFT from batch 16 is within 1.6-6.1% on every dense model and qwen3-30b-a3b; deepseek-v2-lite's prompt "
        "of 4,096 is priced 21% slow (its decompressed MLA prefill: attention and the per-head copies, counted as an "
        "MHA layer of 192-wide heads, not probed). qwen2.5-0.5b's decode at 2,048 + 16, batch 256, is priced 15.5% "
        "fast, where its neighbours (512 + 32 and 4,096 + 32 at batch 256) are within 4%. Device call 30 measured it "
        "again (5.654 ms against 5.65; a fitted model beside it, qwen2.5-1.5b, within 2.6%) and profiled the step: "
        "past a score row of 2,048 elements the softmax leaves PyTorch's persistent warp kernel for the block one "
        "(44.6 -> 75.7 us for two layers) and cuBLAS picks a slower QK kernel (83.6 -> 131.4 us), +14% on the step "
        "over the straight line from 2,048 to 4,128 positions (`h200-probe-kernels-call30.json`). The attention "
        "probe's contexts are powers of two (2,048, then 8,192), so the fitted attention terms are smooth across "
        "that step; 64-wide heads feel it most (llama-3.2-1b: 5-8% fast at batches 64-256 there).\n",
        "\n**And one more** (device call 32, `h200-graph-check-call32.csv`, `h200-graph-moe-check-call32.csv`, "
        "after the MoE prefill's grouped-GEMM rate and MLA's decompressed prompt pairs were committed: four MoE "
        "models at prompts 1,024 and 4,096, phi-3-mini-4k at 1,024 and qwen2.5-14b at 2,048, none measured "
        "there before):\n\n",
        per_model_context(check32),
        "\nphi-3-mini-4k's decode at 1,024 + 16 ran 16-23% slower than priced from batch 16 up, where its rows "
        "at 528, 2,064 and 4,112 positions are within 5-8%. The kernels probe (device call 33, "
        "`h200-probe-kernels-call33.json`) names it: the engine's decode attention is cuBLAS batched matmuls over "
        "the whole static cache, and for an MHA model's QK product cuBLAS picks a tile ~1.9x slower at 1,040, "
        "1,056 and 1,088 positions (388-392 us for two layers at batch 64) than at 1,024 (209 us) or 1,536 (293 "
        "us); llama-2-7b (MHA, 128-wide heads) pays it too (+14% on its step at 1,040), a GQA model hardly (its "
        "QK product is a few percent of the step). The step model has one attention family, smooth in the "
        "context; a cache length's kernel choice is not in it.\n",
        "\nA last check (device call 34, `h200-graph-moe-check-call34.csv`, after gpt-oss's expert biases were "
        "priced): gpt-oss-20b and deepseek-v2-lite at prompts 6,144 and 16,384, mixtral-8x7b at 6,144, never "
        "measured there (TTFT timed at batches 1 and 4 only at these lengths):\n\n",
        per_model_context(check34),
        "\n**Where it still misses.** With the elementwise kinds every dense model's TTFT from batch 16 is within "
        "10% MAPE per context (falcon-7b the worst at 8%: its 71 query heads share one KV head). "
        "phi-3-mini-4k's TPOT stays 8-9% MAPE at prompts 4,096 and 8,192 (MHA with 96-wide heads, priced ~10% "
        "fast up to batch 16; the kernels probe shows its down projection at batch 16 on a split-K kernel at half "
        "the bandwidth: a per-shape cuBLAS choice, where the model has one matmul efficiency), falcon-7b's worst point is +16% (batch 256 at prompt 512: 71 query heads on one "
        "KV head, whose score traffic the fitted models' 4-7 heads a KV head over-price), and at 1,000 + 50 "
        "llama-3.2-3b and mistral-7b-v0.3 are priced 8-10% fast from batch 64 up, where their 3,000 + 50 rows are "
        "within 6% (a cuBLAS kernel choice at that length, as the attention probe's mid-range misses). gpt-oss-20b's "
        "prefill is still 8-24% fast (see the MoE section).\n",
        "\n## Prompt 128 / gen 128 on models the fit never saw\n\n",
        "The v0.1 measurements (`h200-graph.csv`, `h200-graph-qwen2.5-32b.csv`; the harness then leaked cuBLAS "
        "workspaces, so their peak memory is up to 1 GiB high: TPOT is what they check):\n\n",
        per_model_context(old128) + "\n" + per_model_context(old32),
        "\nMeasured again with the current harness on another lent H200 (device call 4, "
        "`h200-graph-128-call4.csv`: four models the fit never saw and qwen2.5-1.5b, a fitted model, as the "
        "control of the day's machine):\n\n",
        per_model(new128),
        "\nqwen2.5-0.5b stays the miss at prompt 128 (over-predicted at batches 1-64), and qwen2.5-3b is just "
        "over 3%. llama-3.2-1b (16 layers) was the other miss (5.1%) while the fit put 220 us of the fixed time in "
        "the step: with the layers probe's split it is at 2.7%. After the refit, device call 17 measured the same "
        "three held-out models and two fitted ones as controls again, on another machine (`h200-graph-128-call17.csv`, "
        "not seen by any fit):\n\n",
        per_model(call17),
        "\nqwen2.5-3b is within 3% here (3.3% in call 4), qwen2.5-0.5b is not (6.0%): a machine moves these "
        "figures by about a percent. The same call repeated the layers probe (`h200-probe-layers-call17.json`): "
        "its cut steps took 1.005x call 16's time (median; 0.995-1.025x). Call 4 measured llama-3.2-1b and "
        "llama-3.2-3b at the held-out contexts (`h200-graph-heldout-call4.csv`, prompts 512, 4096, 16384):\n\n",
        per_model_context(llama32),
        "\nOther overhead forms were refitted and held out (`.venv/bin/python benchmarks/overhead_variants.py`, "
        "with the layers probe): the overhead added to the kernels' time (exponent 1) takes qwen2.5-0.5b's "
        "prompt-128 error to 4.8% and leaves the rest as shipped; no step overhead at all, 4.7%, but qwen2.5-3b's "
        "rises to 4.0%; a step overhead pinned at 0.10-0.15 ms fits the fitted models' steps worse (in-sample "
        "2.7-3.3%) and the held-out ones no better. None reaches 3% on qwen2.5-0.5b, so the shipped form stays as "
        "fitted.\n",
        "\n## Attention: the probe against the calibrated attention family\n\n",
        "`calibrate/probes.py` times one layer of the graph engine's decode attention (the baddbmm of scores, the "
        "softmax, the bmm of values, in a CUDA graph) over batches x cached tokens at two head shapes. The fit takes "
        "these timings as extra residuals, which is what pins the per-byte, per-score and per-sequence costs "
        "([method.md](method.md#attention)). A sample (the model's time = the calibrated attention family plus the "
        "probe's fixed floor, its smallest timing):\n\n",
        probe_section(),
        "\nBelow ~8 MiB of K+V a layer the time is launches and tile scheduling (the model's floor); the mid-range "
        "misses at one or four sequences (2,048 cached tokens, -30 to -40%) are the cuBLAS heuristic switching to a "
        "split-K kernel, which no smooth term follows; they cost little in a whole step, where these layers are "
        "a few percent of the time.\n",
        "\nThe fitted models have 4-7 query heads a KV head. The attention-groups probe (device call 31, "
        "`python3 -m calibrate.probes --what attention-groups`, `h200-probe-attention-groups.json`) times the same "
        "op at generic shapes from MHA's 1 to MQA's 64 (none a catalog model's), fitted with the attention probe; "
        "its mean error at batches 64 and 256:\n\n",
        groups_probe_section(),
        "\nThe family prices the middle well; MHA from 2,048 cached tokens comes out 9-13% slow (its K and V "
        "stream at ~4.3 TB/s, above the copy ceiling), and 32-64 heads on one KV head 14-24% slow at 512 cached "
        "tokens and 9-18% fast at 8,192: the score matrix of a layer (batch x heads x tokens x 2 bytes) fits the "
        "50 MB L2 at the short contexts, so its re-reads by the softmax and the values' matmul are cheap, and does "
        "not at the long ones. One cost per score element cannot follow that (falcon-7b, 71 heads on one: +16% at "
        "batch 256, prompt 512); a score cost by whether the layer's scores fit L2 would, and is not in the model.\n",
        "\n## Mixtures of experts (MoE terms fitted on qwen3-30b-a3b only)\n\n",
        "`h200-graph-moe.csv`: four MoE models at prompts 128 and 2048, batches 1 to 512. The dense terms come from "
        "the dense fit. The MoE probe (`python3 -m calibrate.probes --what moe`, device call 19, "
        "`h200-probe-moe.json`) times each stage of the engine's MoE layer alone (`calibrate.graph_engine.moe_forward`: "
        "route, sort the (token, expert) rows by expert, gather them, two grouped matmuls, activation, weighted "
        "`index_add_` back into the tokens) at seven catalog MoE models' shapes. At 16,384 tokens, a prefill's size:\n\n",
        moe_probe_section(),
        "\n**Large decode batches** (device call 52, `h200-graph-moe-check-call52.csv`): the four MoE models at "
        "prompt 256 + gen 16, at batches of 32-192 routed rows an expert (batch x k / experts; qwen3-30b-a3b's "
        "MoE fit stops at 64). `torch._grouped_mm` runs a 64-row tile up to 128 rows an expert (averaged over "
        "all experts) and a 128 x 256 one above; the MoE probe's matmuls turn compute-bound near 128 rows. A "
        "rule that priced 65-128 rows at the probe's compute-bound rate (275 TFLOP/s) was committed before this "
        "check and failed it (mixtral-8x7b at batch 384, 96 rows an expert: +41%; its step does not rise from "
        "batch 256), so it was reverted. Without it, past 64 rows an expert qwen3-30b-a3b's, deepseek-v2-lite's "
        "and gpt-oss-20b's steps were priced 6-21% fast. What fits is a count of tiles: an expert's r rows compute "
        "ceil(r / 64) tiles of 64 (96 rows cost what 128 do), and the experts' bytes and tiles combine by max "
        "beside the dense matmuls (docs/method.md, section 4, \"The grouped GEMM, by tiles\"); the table is the "
        "calibration with it (before it: qwen3-30b-a3b 9.7%, deepseek-v2-lite 6.2%, gpt-oss-20b 13.0%, "
        "mixtral-8x7b 4.0% TPOT MAPE). These batches were seen before the tile form was chosen:\n\n",
        per_model_context(compare(f"{M}/h200-graph-moe-check-call52.csv", GRAPH)),
        "\n**The tiles' check after the fact** (device call 53, `h200-graph-moe-check-call53.csv`, its script committed "
        "with the tile form and run after it): the four MoE models at two contexts none was measured at, prompt 192 + "
        "gen 16 at batches of 64-256 routed rows an expert none had run (both sides of the switch to the large tiles), "
        "and prompt 768 + gen 16 at batches 1-256. With the calibration before the tiles: qwen3-30b-a3b 8.5% and "
        "1.5%, mixtral-8x7b 8.4% and 2.9%, deepseek-v2-lite 9.2% and 0.8%, gpt-oss-20b 18.6% and 8.1% TPOT MAPE "
        "(6.4% over the 34 points; gpt-oss-20b at batches 1,024 and 2,048 -24%, mixtral-8x7b at 1,024 -16%). With "
        "the tiles:\n\n",
        per_model_context(compare(f"{M}/h200-graph-moe-check-call53.csv", GRAPH)),
        "\nThe grouped matmuls run near the dense matmuls' rate (qwen3-30b-a3b: 620 TFLOP/s). What the model lacked "
        "is the routed rows' gather and combine: the weighted scatter-add is bf16 atomic adds at ~90 G elements/s, "
        "more time than the matmuls for many small experts. It costs the same ~12 ps per (row x hidden) element at "
        "every shape, so it is one term, `expert_row_traffic_coeff` (bytes per routed row, in units of hidden x act "
        "bytes, at the calibrated bandwidth). It is set from qwen3-30b-a3b's probe points only (the median over "
        "4,096 tokens and more) and held, as are the grouped GEMM's two tile rates (the same probe's matmuls at "
        "qwen3-30b-a3b's shape, every token count: 360 and 649 TFLOP/s per tile FLOP); then the two other MoE terms "
        "(routing overhead per MoE layer, grouped-GEMM traffic factor) were fitted on qwen3-30b-a3b's rows. The "
        "traffic factor came out at 1.36: the grouped matmuls read a touched expert's bytes at ~3 TB/s, as the "
        "probe times them at 256-1,024 tokens. Since device call 72 the grouped matmuls of experts of up to 32 "
        "rows each are priced from the grouped-mm probe instead (`h200-probe-grouped-mm-call72.json`: "
        "`torch._grouped_mm` alone at generic shapes, none a catalog model's; blended into the tiles from 32 "
        "rows, the tiles alone from 128: docs/method.md section 4, \"The grouped GEMM, as measured\"), held, "
        "and the routing overhead refitted with it (86 -> 64 us a MoE layer; the traffic factor kept from the fit "
        "without the table, for the tiles). The other three models are held out: deepseek-v2-lite (MLA "
        "attention, 64 experts + 2 shared), gpt-oss-20b (32 experts, sliding windows on half the layers, attention "
        "sinks), mixtral-8x7b (8 experts, top-2):\n\n",
        per_model(moe),
        "\n" + per_model_context(moe),
        "\nBefore the row term, this table's TTFT MAPE (batch 16 and up) was 26-58% on qwen3-30b-a3b, "
        "deepseek-v2-lite and gpt-oss-20b and 12-13% on mixtral-8x7b. Device call 19 then measured the three "
        "held-out models at prompts 512 and 8,192 (`h200-graph-moe-call19.csv`, unseen by every fit):\n\n",
        per_model_context(moe19),
        "\n**TTFT after the seventh session.** Three changes, each from a probe or the engine's code: the "
        "prefill's elementwise work priced by kind (section \"The prefill's elementwise kernels\" above; "
        "qwen3-30b-a3b's 4,096-wide queries on a 2,048-wide model and the norm of every query and key head, "
        "gpt-oss's clamped activation, and its experts' biases: gathered per routed row and added, two one-pass "
        "kernels at the plain MLP's GELU cost each, 2.7 ps per element, where the prefill-kernels probe's gpt-oss "
        "layer shows the gather and the add at 2.9); a prompt's routed-expert matmuls priced at the grouped GEMMs' rate, "
        f"{graph.expert_prefill_flop_per_s / 1e12:.0f} TFLOP/s, the MoE probe's at qwen3-30b-a3b's shape from "
        "16,384 tokens up (`expert_prefill_flop_per_s`; the dense prefill matmuls run at ~765, and the probe's "
        "other shapes' grouped GEMMs at 540-690); and an MLA layer's prompt pairs counted decompressed, as every "
        "engine prefills MLA (4 x heads x (nope + rope) FLOPs a pair, values padded to the keys' width, against "
        "the absorbed decode's 2 x heads x (2 x 512 + 64): 2.8x fewer). TTFT MAPE from batch 16 per model and "
        "context: qwen3-30b-a3b 17-24% -> 2-8%, mixtral-8x7b 3-7% -> 1-5%, gpt-oss-20b 14-33% -> 0-10%, "
        "deepseek-v2-lite 1-14% (fast) -> 1-7% (6-26% slow with the GQA elementwise kinds alone and the MLA pairs "
        "still counted absorbed, 9-12% slow with the MLA layer counted as MHA of 192-wide heads, before its own "
        "kinds were probed). The prefill-kernels probe's gpt-oss layer (16 x 2,048 tokens) is now priced "
        "within 1% (it was 12% under). "
        "gpt-oss-20b's "
        "decode at prompt 8,192 was priced 22% fast in call 19: the engine's sinks softmax had a row of T + 1, "
        "which cuBLAS ran as a GEMV kernel (the kernels probe, call 21); with the row padded to a multiple of 8 "
        "it is within 6% (call 22, `h200-graph-call22.csv`). The expected error `predict` shows for an MoE TTFT is these files' mean "
        f"({pct(val['moe']['ttft_mape_fraction_batch_64_up'])} from batch 64 up).\n",
        "\n**A check after the fact on the mixtures of experts** (device call 51, `h200-graph-moe-check-call51.csv`, "
        "after the load curve and the refitted prefill efficiency were committed): deepseek-v2-lite, mixtral-8x7b, "
        "gpt-oss-20b and qwen3-30b-a3b at prompts 1,536 and 12,288, lengths none was measured at (TTFT timed "
        "up to 65,536 prompt tokens a batch: batch 16 and up at 1,536 only). gpt-oss-20b at 1,536 is the one "
        "context over 6% TPOT (its batches 1-4 priced 9-10% fast: docs/method.md, section 13, the grouped "
        "GEMMs' tiles):\n\n",
        per_model_context(compare(f"{M}/h200-graph-moe-check-call51.csv", GRAPH)),
        "\n## Tensor parallelism over two H200s (predicted from the single-GPU fit + the measured link)\n\n",
        "`h200-graph-tp2.csv`: TP2 decode with NCCL (NVLink multicast off), prompts 128 and 2048. Nothing of it was "
        "fitted: the step model's collectives use the all-reduce latency and bandwidth measured by "
        "`h200-collectives-tp2.json` (15.2 us a call, 229 GB/s per GPU).\n\n",
        per_model(tp2),
        "\nTTFT from batch 64 was 1.5-9.6% per model before the prefill's elementwise work was priced by kind "
        "(calls 27-28); it is 1.3-8.1%, priced fast on the larger models: a TP rank's matmuls are half as wide, "
        "and the prefill's one matmul efficiency, refitted with the elementwise kinds, is now the single GPU's "
        "(the hidden state's norms and residual adds, which every rank runs whole, are counted so). "
        "llama-3.1-8b is one of the single-GPU fit models (its TP2 rows were not fitted either). TP4 and TP8 are "
        "predicted from the same terms (the link's per-call latency grows with the GPU count in NCCL's ring, which "
        "the 2-GPU measurement cannot show): extrapolations, and `predict` says so.\n",
        "\n## Engine `hf-eager` (transformers eager decode, dynamic cache, cuDNN attention off)\n\n",
        fit_section(EAGER),
        "\nHost-bound: a Python loop on a shared VM CPU, about 20 ms of fixed cost a step; the noise of the host is "
        "larger than any GPU term at small batch.\n",
        "\nIts TTFT by the prefill's length (its three files, every model and batch) shows no trend like the graph "
        "engine's before the load curve (section \"A prefill's clock\"), so it is fitted without the curve. Why "
        "its prefills do not show the clock's fall is not established: its harness times the prefill right after "
        "an untimed prefill and a few host-bound decode steps, and launches every kernel eagerly.\n\n",
        ttft_by_length(EAGER, [f"{M}/h200-hf-eager-nocudnn.csv", f"{M}/h200-hf-eager-grid.csv", f"{M}/h200-hf-eager.csv"]),
        "\n## The lesson's table (RTX 3060, HF eager): in-sample\n\n",
        run(["compare", "--calibration", LESSON, f"{M}/rtx3060-hf-eager-lesson.csv"]),
        "\n## Which batch bends: measured vs predicted\n\n",
        bend_section(),
        "\n## The pure roofline (no calibration): a floor\n\n",
        "A card without a calibration is predicted from its datasheet ceilings alone. Against every committed "
        "measurement (`benchmarks/floor_errors.py` -> `hardware_profiles/measurements/floor-errors.json`; pred / "
        "measured - 1):\n\n",
        floor_section(),
        "\n`predict` on an uncalibrated card says its times are floors and quotes this record.\n",
        f"\n_Report generated in {{elapsed:.0f}} s on {time.strftime('%Y-%m-%d')}._\n",
    ]
    text = "".join(doc).replace("{elapsed:.0f}", f"{time.perf_counter() - t0:.0f}")
    from roofline.atomic import write_text_atomic

    write_text_atomic(ROOT / "docs" / "calibration.md", text)
    print(f"wrote docs/calibration.md in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
