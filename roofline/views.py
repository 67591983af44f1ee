"""What each CLI command prints: the result of one library call, rendered as table, JSON or CSV."""

from __future__ import annotations

from roofline import report
from roofline.prediction import FLAT_ERROR_KEYS, ROW_KEYS, Bend, Prediction
from roofline.units import GB, GiB, TFLOP

PREDICT_CSV_KEYS = list(ROW_KEYS) + ["e2e_s", "ttft_bound", "peak_mem_bytes", "fits_in_memory", *FLAT_ERROR_KEYS,
                                     "extrapolation"]


def _describe_scenario(p: Prediction) -> list[str]:
    meta = p.meta()
    sc = p.scenario
    cal = sc.calibration
    lines = [
        f"{sc.model.name} on {sc.card.name}: prompt {sc.prompt_tokens}, gen {sc.gen_tokens}, "
        f"weights {sc.weight_dtype}, KV {sc.kv_dtype} ({sc.kv_cache} cache), logits {sc.logits}"
        + (f", tensor parallel over {sc.tp} GPUs (memory per GPU)" if sc.tp > 1 else "")
        + (f", routing skew {sc.routing_skew:g}" if sc.routing_skew else ""),
        f"ceilings: {report.gb_per_s(meta['bandwidth_bytes_per_s'])}, {report.tflop_per_s(meta['peak_flop_per_s'])} {meta.get('matmul_peak_dtype', 'bf16')} "
        f"({'calibration' if cal.measured_bandwidth_bytes_per_s else sc.card.ceiling_source}); "
        f"balance point {meta['balance_point_flop_per_byte']:.1f} FLOP/byte",
    ]
    if cal.is_uncalibrated:
        lines.append("calibration: none -- predicting from the ceilings alone (no overheads; expect optimistic TPOT)")
    else:
        lines.append(f"calibration: {cal.card}/{cal.engine} -- {cal.source}")
    return lines


BOUND_LEGEND = ("bound: what a step's time is mostly spent on -- memory (bytes / bandwidth), compute (FLOPs / peak) "
                "or overhead (launches and host work); knee: the batch past which one doubling costs over 41% more "
                "TPOT (throughput gains less than 41%)")


def predict_view(p: Prediction, fmt: str) -> str:
    bend_result = p.bend
    if fmt == "json":
        return report.to_json(p.as_dict())
    if fmt == "csv":
        rows = p.rows(PREDICT_CSV_KEYS)
        for r in rows:
            r["extrapolation"] = "; ".join(r["extrapolation"])
        return report.to_csv(rows, PREDICT_CSV_KEYS).rstrip("\n")
    headers = [
        "batch", "TTFT (s)", "TPOT (ms)", "TPOT ±", "per user (tok/s)", "throughput (tok/s)",
        "peak mem (GiB)", "intensity (FLOP/byte)", "% compute", "% bandwidth", "bound",
    ]
    rows = []
    flagged = {}
    for r in p.rows():
        mem = report.gib(r["peak_mem_bytes"]) + ("" if r["fits_in_memory"] else " OOM")
        err = r["expected_error"]["tpot_fraction"]
        mark = "*" if r["extrapolation"] else ""
        for reason in r["extrapolation"]:
            flagged.setdefault(reason, []).append(r["batch"])
        rows.append([
            f"{r['batch']}{mark}", f"{r['ttft_s']:.3f}", report.ms(r["tpot_s"]),
            "?" if err is None else f"{100 * err:.0f}%", report.thousands(r["per_user_tok_s"]),
            report.thousands(r["throughput_tok_s"]), mem, f"{r['intensity_flop_per_byte']:.1f}",
            f"{100 * r['compute_ceiling_fraction']:.2f}%", f"{100 * r['bandwidth_ceiling_fraction']:.1f}%", r["bound"],
        ])
    lines = _describe_scenario(p) + ["", report.table(headers, rows, "rrrrrrrrrrl"), ""]
    lines.append(f"card memory {p.scenario.card.memory_bytes / GiB:.1f} GiB; peak memory in GiB (2^30 bytes), bandwidth in GB/s (1e9)")
    lines.append("TPOT ±: expected error (mean absolute), from " + p.meta()["expected_error_basis"])
    n = len(rows)
    for reason, batches in flagged.items():
        where = "" if len(batches) == n else f" (batch {report.batch_list(batches)})"
        lines.append(f"* extrapolating: {reason}{where}")
    lines.append("bend: " + bend_result.describe())
    lines.append(BOUND_LEGEND)
    return "\n".join(lines)


def bend_view(b: Bend, fmt: str) -> str:
    data = b.as_dict()
    if fmt == "json":
        return report.to_json(data)
    if fmt == "csv":
        return report.to_csv([data]).rstrip("\n")
    def show(x):
        return "-" if x is None else x
    rows = [
        ["balance point (FLOP/byte)", f"{b.balance_point_flop_per_byte:.1f}"],
        ["intensity limit as batch grows (FLOP/byte)", f"{b.intensity_limit_flop_per_byte:.1f}"],
        ["crossing batch (intensity reaches balance)", show(b.crossing_batch)],
        ["TPOT knee batch (doubling costs > 41% TPOT)", show(b.knee_batch)],
        ["region", "-" if b.region_low_batch is None else f"({b.region_low_batch}, {b.region_high_batch}]"],
    ]
    return report.table(["", "value"], rows, "lr") + "\n" + b.describe()


def models_view(rows: list[dict], fmt: str) -> str:
    if fmt == "json":
        return report.to_json(rows)
    keys = ["model", "params", "active_params", "weight_bytes", "kv_bytes_per_token", "num_hidden_layers",
            "hidden_size", "num_attention_heads", "num_key_value_heads", "attention", "windows", "moe_layers",
            "num_experts", "experts_per_token", "tie_word_embeddings"]
    if fmt == "csv":
        flat = [{**r, "windows": " ".join(map(str, r.get("windows") or []))} for r in rows]
        return report.to_csv(flat, keys).rstrip("\n")

    def attention(r):
        kind = "mla" if r["attention"] == "mla" else f"{r['num_attention_heads']}/{r['num_key_value_heads']}"
        return kind + (f", window {'/'.join(map(str, r['windows']))}" if r.get("windows") else "")

    table_rows = [
        [r["model"], f"{r['params'] / 1e9:,.2f}", f"{r['active_params'] / 1e9:,.2f}" if r.get("moe_layers") else "",
         report.gib(r["weight_bytes"]), f"{r['kv_bytes_per_token'] / 1024:.0f}", r["num_hidden_layers"], attention(r),
         f"{r['experts_per_token']} of {r['num_experts']}" if r.get("moe_layers") else ""]
        for r in rows
    ]
    headers = ["model", "params (B)", "active (B)", "bf16 weights (GiB)", "KV per token (KiB)", "layers",
               "heads q/kv", "experts"]
    return report.table(headers, table_rows, "lrrrrrll")


def cards_view(rows: list[dict], fmt: str) -> str:
    if fmt == "json":
        return report.to_json(rows)
    if fmt == "csv":
        return report.to_csv(rows).rstrip("\n")
    table_rows = [
        [r["card"], r["name"], f"{r['memory_bytes'] / GiB:.1f}", f"{r['bandwidth_bytes_per_s'] / GB:,.0f}",
         f"{r['peak_flop_per_s'] / TFLOP:,.1f}", f"{r['balance_point_flop_per_byte']:.1f}", r["ceiling_source"]]
        for r in rows
    ]
    headers = ["card", "name", "memory (GiB)", "bandwidth (GB/s)", "bf16 (TFLOP/s)", "balance (FLOP/byte)", "ceilings"]
    return report.table(headers, table_rows, "llrrrrl")


def fit_view(cal, output, fmt) -> str:
    if fmt == "json":
        return report.to_json({"calibration_path": None if output is None else str(output), **cal.model_dump()})
    terms = cal.model_dump(exclude={"fit_report", "fitted_on", "source", "card", "engine", "kv_cache", "tpot_statistic"})
    if terms.get("expert_gemm_table"):  # the grouped-mm table: its extent, not its 10,000 cells
        t = terms["expert_gemm_table"]
        cells = [x for plane in t["seconds"] for block in plane for row in block for x in row]
        terms["expert_gemm_table"] = (f"K {t['ks'][0]:.0f}-{t['ks'][-1]:.0f} x N {t['ns'][0]:.0f}-{t['ns'][-1]:.0f} x "
                                      f"{t['groups'][0]:.0f}-{t['groups'][-1]:.0f} experts x {t['rows'][0]:.0f}-"
                                      f"{t['rows'][-1]:.0f} rows: {len(cells)} cells, "
                                      f"{min(cells) * 1e6:.3g}-{max(cells) * 1e6:.4g} us")
    if terms.get("index_kernel_table"):  # the index probe's table: its extent
        t = terms["index_kernel_table"]
        cells = [x for e in t["ops"].values() for a in e["small_s"] for b in a for x in b]
        terms["index_kernel_table"] = (f"{len(t['ops'])} ops x 1-{len(t['rows'])} rows: small-index kernels "
                                       f"{min(cells) * 1e6:.3g}-{max(cells) * 1e6:.3g} us")
    if fmt == "csv":
        return report.to_csv([terms]).rstrip("\n")
    where = f"wrote {output}" if output is not None else "fitted"
    lines = [f"{where} ({cal.card}/{cal.engine}, {cal.kv_cache} cache, fitted on {', '.join(cal.fitted_on)})"]
    def shown(v) -> str:
        if v is None:
            return "-"
        if isinstance(v, str):
            return v
        if isinstance(v, dict):  # e.g. a measured rate by head width: "64: 4.527e+14, 128: 5.879e+14"
            return ", ".join(f"{k}: {x:.4g}" for k, x in v.items())
        if isinstance(v, (list, tuple)) and v and all(isinstance(e, dict) for e in v):
            # the kernel table: "64-wide x4: 9 x 110 points, x0.80-1.70"
            return ", ".join(f"{e['head_dim']:.0f}-wide x{e['group']:.0f}: {len(e['matrices'])} x {len(e['contexts'])} "
                             f"points, x{min(min(r) for r in e['factors']):.2f}-{max(max(r) for r in e['factors']):.2f}"
                             for e in v)
        if isinstance(v, (list, tuple)) and all(len(w) == 2 for w in v):  # the load curve: "0.1 s: 0.93"
            return ", ".join(f"{t:.3g} s: {r:.3f}" for t, r in v) or "-"
        if isinstance(v, (list, tuple)):  # windows of cache lengths: "(1024, 1088]: x1.175"
            return ", ".join(f"({w[0]:.0f}, {w[1]:.0f}]: x{w[2]:.4g} (head width {w[3]:.0f}-{w[4]:.0f}, "
                             f"{w[5]:.0f}-{w[6]:.0f} heads a KV head)" for w in v) or "-"
        return f"{v:.4g}"

    lines.append(report.table(["term", "value"], [[k, shown(v)] for k, v in terms.items()], "lr"))
    rep = cal.fit_report
    err_rows = [["in-sample", *_mapes(rep["in_sample"])]]
    for model, e in rep.get("leave_one_model_out", {}).items():
        err_rows.append([f"held out: {model}", *_mapes(e)])
    for context, e in rep.get("leave_one_context_out", {}).items():
        err_rows.append([f"held out: context {context}", *_mapes(e)])
    if "extra" in rep:
        err_rows.append([f"in-sample: {', '.join(rep['extra']['models'])}", *_mapes(rep["extra"]["in_sample"])])
    lines.append("")
    lines.append(report.table(["fit", *MAPE_HEADERS], err_rows, "lrrrrr"))
    return "\n".join(lines)


MAPE_HEADERS = ["TPOT MAPE", "TTFT MAPE", "TTFT MAPE b>=64", "peak mem MAPE", "points"]


MAPE_KEYS = ["tpot_mape_fraction", "ttft_mape_fraction", "ttft_mape_fraction_batch_64_up", "peak_mem_mape_fraction"]


def _mapes(e: dict) -> list[str]:
    return ["-" if e.get(k) is None else f"{100 * e[k]:.1f}%" for k in MAPE_KEYS] + [str(e["points"])]


def compare_view(result: dict, fmt: str) -> str:
    if fmt == "json":
        return report.to_json(result)
    if fmt == "csv":
        return report.to_csv(result["rows"]).rstrip("\n")
    rows = []
    for r in result["rows"]:
        def pair(m, p, f):
            return ("-" if m is None else f(m)) + " / " + f(p)
        rows.append([
            r["model"], f"{r['prompt_tokens']}/{r['gen_tokens']}", r["batch"],
            pair(r["tpot_measured_s"], r["tpot_predicted_s"], report.ms),
            pair(r["ttft_measured_s"], r["ttft_predicted_s"], lambda x: f"{x:.3f}"),
            pair(r["peak_mem_measured_bytes"], r["peak_mem_predicted_bytes"], report.gib),
        ])
    headers = ["model", "prompt/gen", "batch", "TPOT ms (meas / pred)", "TTFT s (meas / pred)",
               "peak GiB (meas / pred)"]
    lines = [f"calibration {result['calibration']} against {len(rows)} measured points on {result['card']}",
             report.table(headers, rows, "lrrrrr"), ""]
    err_rows = [[m, *_mapes(e)] for m, e in result["per_model"].items()]
    if len(result.get("per_context", {})) > 1:
        err_rows += [[f"context {c}", *_mapes(e)] for c, e in result["per_context"].items()]
    err_rows.append(["all", *_mapes(result)])
    lines.append(report.table(["model / context", *MAPE_HEADERS], err_rows, "lrrrrr"))
    return "\n".join(lines)


def calibrate_view(result: dict) -> str:
    lines = [f"measurements written to {result['measurements_path']}"]
    if result.get("card_path"):
        lines.append(f"this CPU's card profile (from its measured ceilings) written to {result['card_path']}: "
                     f"use it as --card {result['card_path']}")
    if result["calibration"] is not None:
        lines.append(fit_view(result["calibration"], result["calibration_path"], "table"))
    return "\n".join(lines)


def serve_summary_lines(result: dict, out_dir) -> list[str]:
    """roofline serve, after the run's own summary line: its device probe and the command that
    compares it with the simulator."""
    probe = result.get("device_probe") or {}
    before, after = probe.get("before") or {}, probe.get("after") or {}
    lines = []
    if before:
        cells = ", ".join(f"{b}: {before[b] * 1e3:.3g}" + (f" / {after[b] * 1e3:.3g}" if b in after else "")
                          for b in before)
        lines.append(f"device probe, a decode step's median ms by running sequences (before / after the run): {cells}")
    lines.append(f"next: roofline compare-serving {out_dir}")
    return lines


def compare_serving_view(result: dict, fmt: str) -> str:
    """roofline compare-serving: each run's measured / simulated summary and the bounds' tally."""
    if fmt == "json":
        return report.to_json(result)
    keys = (("throughput_tok_s", 1.0, 0, "throughput tok/s"), ("ttft_p50_s", 1e3, 1, "TTFT p50 ms"),
            ("ttft_p99_s", 1e3, 1, "TTFT p99 ms"), ("tpot_p50_s", 1e3, 2, "TPOT p50 ms"),
            ("tpot_p99_s", 1e3, 2, "TPOT p99 ms"))

    def cell(entry, scale, digits):
        err = "-" if entry["error"] is None else f"{100 * entry['error']:+.1f}%"
        mark = " x" if entry["within"] is False else ""
        return f"{entry['measured'] * scale:,.{digits}f} / {entry['simulated'] * scale:,.{digits}f} ({err}){mark}"

    if fmt == "csv":
        flat = [{"run": r["run"], **{f"{k}_{side}": r[k][side] for k, *_ in keys for side in ("measured", "simulated", "error")},
                 "preemptions_measured": r["preemptions"]["measured"],
                 "preemptions_simulated": r["preemptions"]["simulated"],
                 "decode_device_ratio": r.get("decode_device_ratio"),
                 "prefill_device_ratio": r.get("prefill_device_ratio"),
                 "decode_probe_ratio": r.get("decode_probe_ratio"),
                 "at_probed_speed": r.get("at_probed_speed", False),
                 **({f"{k}_spread_{end}": r["pass_time_spread"][k][i] for k, *_ in keys
                     for i, end in enumerate(("low", "high")) if k in r["pass_time_spread"]}
                    if "pass_time_spread" in r else {})} for r in result["runs"]]
        return report.to_csv(flat).rstrip("\n")

    def ratio(v):
        return "-" if v is None else f"{v:.3f}"

    probed = any(r.get("decode_probe_ratio") is not None for r in result["runs"])

    def gpu(r):
        decode = ratio(r.get("decode_device_ratio"))
        if probed:
            decode += f" ({ratio(r.get('decode_probe_ratio'))})"
        return f"{decode} / {ratio(r.get('prefill_device_ratio'))}"

    rows = [[r["run"], *(cell(r[k], scale, digits) for k, scale, digits, _ in keys),
             f"{r['preemptions']['measured']} / {r['preemptions']['simulated']}", gpu(r)] for r in result["runs"]]
    at_speed = sum(1 for r in result["runs"] if r.get("at_probed_speed"))
    lines = [f"{len(rows)} serving run(s) in {result['folder']}, measured / simulated (error); x: outside the "
             "acceptance bound"
             + (f"; simulated at each run's probed decode speed ({at_speed} of {len(rows)} carry a device probe)"
                if result.get("at_probed_speed") else ""),
             report.table(["run", *(h for *_, h in keys), "preemptions",
                           "GPU / price: decode (probe) / prefill" if probed else "GPU / price: decode / prefill"],
                          rows, "lrrrrrrr"), ""]
    lines += result["summary"]
    spread = [r for r in result["runs"] if "pass_time_spread" in r]
    if spread:
        lo, hi = spread[0]["pass_time_spread"]["pass_time_scales"]
        lines.append(f"TTFT p99 simulated with every pass's GPU time {lo - 1:+.0%} .. {hi - 1:+.0%}: "
                     f"{sum(r['pass_time_spread']['ttft_p99_s_measured_inside'] for r in spread)} of {len(spread)} "
                     "measured inside the range")
        for r in spread:
            a, b = r["pass_time_spread"]["ttft_p99_s"]
            inside = "inside" if r["pass_time_spread"]["ttft_p99_s_measured_inside"] else "outside"
            lines.append(f"  {r['run']}: {a * 1e3:,.1f}-{b * 1e3:,.1f} ms, measured "
                         f"{r['ttft_p99_s']['measured'] * 1e3:,.1f} ({inside})")
        missed = [(r, k) for r in spread for k, *_ in keys if r[k].get("within") is False]
        explained = [(r, k) for r, k in missed if r["pass_time_spread"]["measured_inside"].get(k)]
        lines.append(f"bounds missed at the price: {len(missed)}, of which {len(explained)} with the measured value "
                     f"inside the range of the GPU time {lo - 1:+.0%} .. {hi - 1:+.0%}"
                     + "".join(f"; {r['run']} {k.removesuffix('_s')}" for r, k in explained))
    lines.append("GPU / price: the run's passes' median device time over their price (prefill: prefill-first runs); "
                 "near saturation a few percent of it moves a TTFT p99 by tens of percent (docs/serving.md)")
    if probed:
        lines.append("(probe): the same ratio foretold by the run's device probe, its decode steps timed before the "
                     "run's clock (--at-probed-speed replays at it)")
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines)
