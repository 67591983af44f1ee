"""What each CLI command prints: the result of one library call, rendered as table, JSON or CSV."""

from __future__ import annotations

from pathlib import Path

from roofline import report
from roofline.errors import RooflineError
from roofline.predict import ROW_KEYS, Bend, Prediction, bend
from roofline.units import GB, GiB, TFLOP

PREDICT_CSV_KEYS = list(ROW_KEYS) + ["e2e_s", "ttft_bound", "peak_mem_bytes", "fits_in_memory"]


def _describe_scenario(p: Prediction) -> list[str]:
    meta = p.meta()
    sc = p.scenario
    cal = sc.calibration
    lines = [
        f"{sc.spec.name} on {sc.card.name}: prompt {sc.prompt_tokens}, gen {sc.gen_tokens}, "
        f"weights {sc.model.weight_dtype}, KV {sc.model.kv_dtype} ({sc.kv_cache} cache), logits {sc.logits}",
        f"ceilings: {report.gb_per_s(meta['bandwidth_bytes_per_s'])}, {report.tflop_per_s(meta['peak_flop_per_s'])} bf16 "
        f"({'calibration' if cal.measured_bandwidth_bytes_per_s else sc.card.ceiling_source}); "
        f"balance point {meta['balance_point_flop_per_byte']:.1f} FLOP/byte",
    ]
    if cal.is_uncalibrated:
        lines.append("calibration: none -- predicting from the ceilings alone (no overheads; expect optimistic TPOT)")
    else:
        lines.append(f"calibration: {cal.card}/{cal.engine} -- {cal.source}")
    return lines


def predict_view(p: Prediction, fmt: str) -> str:
    bend_result = bend(p.scenario)
    if fmt == "json":
        return report.to_json({"meta": p.meta(), "rows": p.rows(), "bend": bend_result.as_dict()})
    if fmt == "csv":
        return report.to_csv(p.rows(PREDICT_CSV_KEYS), PREDICT_CSV_KEYS).rstrip("\n")
    headers = [
        "batch", "TTFT (s)", "TPOT (ms)", "per request (tok/s)", "throughput (tok/s)",
        "peak mem (GiB)", "intensity (FLOP/byte)", "% compute", "% bandwidth", "bound",
    ]
    rows = []
    for r in p.rows():
        mem = report.gib(r["peak_mem_bytes"]) + ("" if r["fits_in_memory"] else " OOM")
        rows.append([
            r["batch"], f"{r['ttft_s']:.3f}", report.ms(r["tpot_s"]), report.thousands(r["per_request_tok_s"]),
            report.thousands(r["throughput_tok_s"]), mem, f"{r['intensity_flop_per_byte']:.1f}",
            f"{r['compute_ceiling_pct']:.2f}%", f"{r['bandwidth_ceiling_pct']:.1f}%", r["bound"],
        ])
    lines = _describe_scenario(p) + ["", report.table(headers, rows, "rrrrrrrrrl"), ""]
    lines.append(f"card memory {p.scenario.card.memory_bytes / GiB:.1f} GiB; peak memory in GiB (2^30 bytes), bandwidth in GB/s (1e9)")
    lines.append("bend: " + bend_result.describe())
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


def models_view(fmt: str) -> str:
    from roofline.model_spec import catalog_index, catalog_names, load_model

    rows = []
    for name in catalog_names():
        spec = load_model(name)
        s = spec.summary()
        s["hf_repos"] = catalog_index()[name].get("hf_repos", [])
        rows.append(s)
    if fmt == "json":
        return report.to_json(rows)
    keys = ["model", "params", "weight_bytes", "kv_bytes_per_token", "num_hidden_layers", "hidden_size",
            "num_attention_heads", "num_key_value_heads", "tie_word_embeddings"]
    if fmt == "csv":
        return report.to_csv(rows, keys).rstrip("\n")
    table_rows = [
        [r["model"], f"{r['params']:,}", report.gb(r["weight_bytes"]), f"{r['kv_bytes_per_token'] / 1024:.0f}",
         r["num_hidden_layers"], f"{r['num_attention_heads']}/{r['num_key_value_heads']}", "yes" if r["tie_word_embeddings"] else "no"]
        for r in rows
    ]
    headers = ["model", "params", "bf16 weights (GB)", "KV per token (KiB)", "layers", "heads/kv", "tied"]
    return report.table(headers, table_rows, "lrrrrrl")


def cards_view(fmt: str) -> str:
    from roofline.hardware import all_cards

    rows = [c.summary() for c in all_cards()]
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


def _read_all(paths, models=()) -> list:
    """Every row of the measurement files, only the given models' if any are named."""
    from roofline.measurements import read_measurements

    rows = []
    for p in paths:
        rows.extend(read_measurements(p))
    if models:
        missing = sorted(set(models) - {r.model for r in rows})
        if missing:
            raise RooflineError(f"no measurements of {', '.join(missing)} in {', '.join(map(str, paths))}")
        rows = [r for r in rows if r.model in models]
    return rows


def read_ceilings(path) -> tuple[float | None, float | None]:
    """(bandwidth bytes/s, peak FLOP/s) from a ceilings JSON written by `roofline calibrate`."""
    from roofline.atomic import read_json

    data = read_json(path, "ceilings")
    bw = data.get("read_bandwidth_bytes_per_s") or data.get("bandwidth_bytes_per_s")
    fl = data.get("gemm_bf16_flop_per_s") or data.get("bf16_matmul_flop_per_s") or data.get("peak_flop_per_s")
    if not bw or not fl:
        raise RooflineError(f"{path}: needs read_bandwidth_bytes_per_s and gemm_bf16_flop_per_s")
    return float(bw), float(fl)


def fit_command(measurement_paths, card_name, output, ceilings_path, fmt, label=None, tpot_statistic="mean", models=()) -> str:
    from roofline.calibration import save_calibration
    from roofline.fit import fit_calibration
    from roofline.hardware import load_card

    card = load_card(card_name)
    rows = _read_all(measurement_paths, models)
    bw, fl = read_ceilings(ceilings_path) if ceilings_path else (None, None)
    source = "fitted by `roofline fit` to " + ", ".join(Path(p).name for p in measurement_paths)
    if label:
        source = f"{label} ({source})"
    cal = fit_calibration(
        rows, card, source=source, measured_bandwidth_bytes_per_s=bw, measured_peak_flop_per_s=fl,
        tpot_statistic=tpot_statistic,
    )
    save_calibration(cal, output)
    return fit_view(cal, output, fmt)


def fit_view(cal, output, fmt) -> str:
    if fmt == "json":
        return report.to_json({"calibration_path": str(output), **cal.model_dump()})
    terms = cal.model_dump(exclude={"fit_report", "fitted_on", "source", "card", "engine", "kv_cache", "tpot_statistic"})
    if fmt == "csv":
        return report.to_csv([terms]).rstrip("\n")
    lines = [f"wrote {output} ({cal.card}/{cal.engine}, {cal.kv_cache} cache, fitted on {', '.join(cal.fitted_on)})"]
    lines.append(report.table(["term", "value"], [[k, "-" if v is None else f"{v:.4g}"] for k, v in terms.items()], "lr"))
    rep = cal.fit_report
    err_rows = [["in-sample", *_mapes(rep["in_sample"])]]
    for model, e in rep.get("leave_one_model_out", {}).items():
        err_rows.append([f"held out: {model}", *_mapes(e)])
    lines.append("")
    lines.append(report.table(["fit", "TPOT MAPE", "TTFT MAPE", "TTFT MAPE b>=64", "peak mem MAPE", "points"], err_rows, "lrrrrr"))
    return "\n".join(lines)


def _mapes(e: dict) -> list[str]:
    def pct(v):
        return "-" if v is None else f"{v:.1f}%"
    return [pct(e["tpot_mape_pct"]), pct(e["ttft_mape_pct"]), pct(e.get("ttft_mape_pct_batch_64_up")),
            pct(e["peak_mem_mape_pct"]), str(e["points"])]


def compare_command(measurement_paths, calibration_path, card_name, fmt, tpot_statistic=None, min_batch=1, models=()) -> str:
    from roofline.calibration import load_calibration
    from roofline.fit import compare
    from roofline.hardware import load_card

    cal = load_calibration(calibration_path)
    card = load_card(card_name or cal.card)
    result = compare(cal, _read_all(measurement_paths, models), card, tpot_statistic, min_batch)
    if fmt == "json":
        return report.to_json(result)
    if fmt == "csv":
        return report.to_csv(result["rows"]).rstrip("\n")
    rows = []
    for r in result["rows"]:
        def pair(m, p, f):
            return ("-" if m is None else f(m)) + " / " + f(p)
        rows.append([
            r["model"], r["batch"], pair(r["tpot_measured_s"], r["tpot_predicted_s"], report.ms),
            pair(r["ttft_measured_s"], r["ttft_predicted_s"], lambda x: f"{x:.3f}"),
            pair(r["peak_mem_measured_bytes"], r["peak_mem_predicted_bytes"], report.gib),
        ])
    headers = ["model", "batch", "TPOT ms (meas / pred)", "TTFT s (meas / pred)", "peak GiB (meas / pred)"]
    lines = [f"calibration {result['calibration']} against {len(rows)} measured points on {card.id}", report.table(headers, rows, "lrrrr"), ""]
    err_rows = [[m, *_mapes(e)] for m, e in result["per_model"].items()]
    err_rows.append(["all", *_mapes(result)])
    lines.append(report.table(["model", "TPOT MAPE", "TTFT MAPE", "TTFT MAPE b>=64", "peak mem MAPE", "points"], err_rows, "lrrrrr"))
    return "\n".join(lines)


def calibrate_command(
    card, models, engine, batches, prompt_tokens, gen_tokens, out_dir: Path, device, resume, no_fit, no_cudnn_attention=False
) -> str:
    try:
        from calibrate.runner import disable_cudnn_attention, run_calibration
    except ImportError as exc:
        raise RooflineError(
            f"calibration needs torch and transformers ({exc.name} is missing): pip install 'roofline[calibrate]'"
        ) from None
    if no_cudnn_attention:
        disable_cudnn_attention()
    csv_path = run_calibration(card, models, engine, batches, prompt_tokens, gen_tokens, out_dir, device=device, resume=resume)
    if no_fit:
        return f"measurements written to {csv_path}"
    from roofline.calibration import save_calibration
    from roofline.fit import fit_calibration
    from roofline.hardware import load_card

    ceilings = out_dir / f"ceilings-{card}.json"
    bw, fl = read_ceilings(ceilings) if ceilings.is_file() else (None, None)
    rows = _read_all([csv_path])
    cal = fit_calibration(rows, load_card(card), source=f"`roofline calibrate` run in {out_dir}",
                          measured_bandwidth_bytes_per_s=bw, measured_peak_flop_per_s=fl)
    out = save_calibration(cal, out_dir / f"{card}-{engine}.json")
    return f"measurements written to {csv_path}\n" + fit_view(cal, out, "table")
