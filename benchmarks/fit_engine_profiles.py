"""Rebuild every engine profile from the committed tables (no GPU; deterministic; a few minutes).

    .venv/bin/python benchmarks/fit_engine_profiles.py [--engine llama.cpp ...] [--no-loco]

* Serving engines (llama.cpp, vLLM, TensorRT-LLM, LMDeploy): each variant (the backend: llama.cpp
  on CUDA and on Metal) is fitted by roofline.published_fit on the UNRESERVED rows of
  hardware_profiles/measurements/published/ (a reserved row offered to a fit is an error); its
  leave-one-card-out error is measured by refitting without each card in turn; the reserved rows
  are predicted, never fitted.
* Harness engines (graph, hf-eager): the terms of the calibrations shipped for them
  (hardware_profiles/calibrations/), on datasheet ceilings; hf-eager's cross-card error is each
  of its two cards predicted with the other's terms.

Writes hardware_profiles/engines/<engine>.json (the ``variants`` of each; the hand-written rest is
kept) and hardware_profiles/engines/validation/<engine>.json (per-card tables: in-sample,
leave-one-card-out, reserved rows, rows skipped and why), and docs/engines-tables.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENGINES_DIR = ROOT / "hardware_profiles" / "engines"
TABLES = ROOT / "docs" / "engines-tables.md"

DECODE = ["step_overhead_s", "layer_overhead_s", "bandwidth_efficiency", "compute_efficiency", "roofline_exponent",
          "overhead_exponent"]
PREFILL = ["prefill_overhead_s", "prefill_compute_efficiency"]


def layouts():
    from roofline.published_fit import Layout

    gguf = ("q4_0", "q4_k_m", "q8_0", "mxfp4", "q6_k", "q5_k_m")
    return {
        "llama.cpp": [
            ("cuda", "NVIDIA GPUs (CUDA backend)",
             Layout(shared=DECODE + ["kv_traffic_factor", "split_gpu_overhead_s"] + PREFILL + ["prefill_score_bytes"],
                    by_format={f: ["bandwidth_efficiency", "prefill_compute_efficiency"] for f in gguf},
                    by_class={"hbm": ["bandwidth_efficiency", "layer_overhead_s"],
                              "geforce": ["prefill_compute_efficiency/16-bit"]}),
             "llama-bench one sequence at a time (tgN, ppN); without flash attention (llama-bench's default before "
             "-fa auto) the prefill writes, softmaxes and reads an F32 score matrix per head: prefill_score_bytes per "
             "score element, none for rows run with -fa 1; a layer split over several GPUs pipelines the prompt's "
             "512-token micro-batches (roofline.published_fit.pipeline_factor); the HBM factor: llama.cpp's batch-1 "
             "kernels reach a "
             "smaller share of an A100/H100's bandwidth, and their per-layer launches cost more there; the GeForce "
             "factor: F16 prefill runs cuBLAS with FP16 accumulation, twice the FP32-accumulate rate the card "
             "profile lists"),
            ("metal", "Apple silicon (Metal backend)",
             Layout(shared=DECODE + ["kv_traffic_factor"] + PREFILL,
                    by_format={f: ["bandwidth_efficiency", "compute_efficiency", "prefill_compute_efficiency"]
                               for f in gguf}),
             "llama-bench one sequence at a time; the quantised formats' dequantising kernels have their own "
             "bandwidth and compute efficiencies"),
        ],
        "tensorrt-llm": [
            ("cuda", "NVIDIA GPUs",
             Layout(shared=DECODE + ["attention_efficiency"] + PREFILL,
                    by_format={"fp8": ["compute_efficiency", "prefill_compute_efficiency"]}),
             "static batches (gptSessionBenchmark) of output throughput, prefill included, and batch-1 first-token "
             "latency; rows whose batch the scheduler chose (trtllm-bench offline) cannot be priced"),
        ],
        "lmdeploy": [
            ("cuda", "NVIDIA GPUs",
             Layout(shared=DECODE + ["attention_efficiency", "kv_traffic_factor", "batch_layer_overhead_s"] + PREFILL,
                    by_format={"awq": ["bandwidth_efficiency"]}),
             "the TurboMind static-inference tables (A100, batches 1-64) and two RTX 4090 batch-1 rows"),
        ],
    }


#: vLLM decodes with CUDA graphs since v0.3 (2024); the only fixed-batch vLLM rows in the tables are of
#: a 2023 build without them (llm-perf-bench, acbed3e): fitted on those, every datacenter answer came out
#: about twice as slow as vLLM runs today (llama-3.1-8b on an H100, batch 1: 22 ms a token). The current
#: vLLM's terms are therefore those of roofline's graph engine -- PyTorch decode replayed as CUDA graphs,
#: as vLLM does -- measured on the H200 (vllm_variant); the 2023 rows check the version gap.
VLLM_NOTE = ("vLLM >= 0.3 decodes with CUDA graphs: its terms are those of roofline's graph engine (PyTorch decode "
             "replayed as CUDA graphs) measured on the H200, on datacenter ceilings; no fixed-batch table of a "
             "current vLLM is in the committed data. The 2023 llm-perf-bench rows (vLLM acbed3e, no CUDA graphs) "
             "are predicted as a check of the version gap, not fitted")


def vllm_variant(points) -> tuple[dict, dict]:
    """The vllm profile's CUDA variant: the graph engine's measured terms (VLLM_NOTE); its expected
    error is TensorRT-LLM's leave-one-card-out error, the nearest measured cross-card error of a
    CUDA-graph serving engine (roofline's graph engine ran on one card only, so it has none)."""
    from roofline.engines import Variant, load_engine
    from roofline.published_fit import cases, errors, predict_with

    variants, report = harness_variant("graph")
    v = dict(variants["cuda"])
    trt = load_engine("tensorrt-llm").variants["cuda"].error.get("pooled", {})
    v["note"] = VLLM_NOTE
    v["applies_to"] = "NVIDIA GPUs (and the fallback for others)"
    v["fitted_on"] = {**v["fitted_on"], "sources": [{"url": "https://docs.vllm.ai/en/latest/design/cuda_graphs.html",
                                                     "title": "vLLM docs: CUDA graphs (decode captured per batch size)"}],
                      "engine_versions": ["vLLM >= 0.3 (CUDA-graph decode), stood in for by roofline's graph engine"]}
    v["error"] = {"pooled": {"basis": "TensorRT-LLM's leave-one-card-out error (the nearest cross-card error of a "
                                      "CUDA-graph serving engine; no current vLLM table to measure this one's)",
                             "points": trt.get("points", 0), "tpot_mape_fraction": trt.get("tpot_mape_fraction")
                             or trt.get("run_mape_fraction"), "ttft_mape_fraction": trt.get("ttft_mape_fraction")}}
    old_rows, _ = cases([p for p in points if p.engine == "vllm" and not p.reserved])
    check = {}
    if old_rows:
        pred = predict_with(Variant(**v), "vllm", old_rows)
        check = errors(pred, old_rows)
        v["error"]["vllm_2023_rows"] = {"basis": "llm-perf-bench, vLLM acbed3e (2023, no CUDA graphs): the version gap",
                                        "points": len(old_rows), "mape_fraction": check.get("mape_fraction"),
                                        "mean_signed_fraction": check.get("mean_signed_fraction")}
    report["vllm_2023_rows"] = check
    return {"cuda": v}, report


def fit_serving(points, engine: str, loco: bool) -> tuple[dict, dict]:
    from roofline.engines import Variant, load_engine
    from roofline.published_fit import fit_variant, validate_reserved

    variants, reports = {}, {}
    for backend, applies_to, layout, note in layouts()[engine]:
        t0 = time.time()
        variant, report = fit_variant(points, engine, backend, layout, applies_to, loco=loco, note=note)
        variants[backend] = json.loads(variant.model_dump_json())
        reports[backend] = report  # no wall times in it: a rerun writes the same bytes
        pooled = variant.error["pooled"]
        print(f"{engine}/{backend}: {report['in_sample']['points']} rows, LOCO TPOT MAPE "
              f"{_pct(pooled.get('tpot_mape_fraction'))} ({time.time() - t0:.1f} s)", file=sys.stderr)
    fallback = load_engine(engine).fallback_variant
    val = validate_reserved(points, engine, {k: Variant(**v) for k, v in variants.items()}, fallback)
    reports["reserved"] = val
    e = val["errors"]
    if e:
        print(f"{engine} reserved: {val['priced']}/{val['points']} rows priced, MAPE {_pct(e['mape_fraction'])}, "
              f"signed {_pct(e['mean_signed_fraction'])}; decode {_pct(e.get('tpot', {}).get('mape_fraction'))}",
              file=sys.stderr)
    return variants, reports


def harness_variant(engine: str) -> tuple[dict, dict]:
    """The terms of a harness engine's shipped calibrations on datasheet ceilings, and (hf-eager,
    two cards) each card predicted with the other's terms."""
    from roofline.calibration import load_calibration
    from roofline.engines import Fact, Variant, grouped_terms
    from roofline.fitting import compare
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements

    cal_dir = ROOT / "hardware_profiles" / "calibrations"
    measured = {"h200": ROOT / "hardware_profiles" / "measurements" / f"h200-{engine}{'-nocudnn' if engine == 'hf-eager' else ''}.csv",
                "rtx3060": ROOT / "hardware_profiles" / "measurements" / "rtx3060-hf-eager-lesson.csv"}
    cals = {p.stem.split("-", 1)[0]: load_calibration(p) for p in sorted(cal_dir.glob(f"*-{engine}.json"))}
    home = "h200" if "h200" in cals else sorted(cals)[0]

    def as_terms(card_id):
        cal, card = cals[card_id], load_card(card_id)
        bw = (cal.measured_bandwidth_bytes_per_s or card.bandwidth_bytes_per_s) / card.datasheet_bandwidth.base
        pk = (cal.measured_peak_flop_per_s or card.peak_flop_per_s) / card.datasheet_bf16_flops.base
        out = {}
        for k, v in cal.model_dump().items():
            if k in ("card", "engine", "kv_cache", "source", "fitted_on", "fit_report", "tpot_statistic",
                     "measured_bandwidth_bytes_per_s", "measured_peak_flop_per_s", "mla_latent_passes",
                     "sink_score_bytes", "prefill_chunk_tokens", "decode_logits_buffers", "decode_score_buffers", "allreduce_latency_s", "allgather_latency_s",
                     "allreduce_bandwidth_bytes_per_s") or v is None:
                continue
            if k == "matmul_load_curve":
                # how this card's clock falls under load is its own (power limit, boost): not carried;
                # its prefill efficiency is carried at a half-second prefill's average (below)
                continue
            if k in ("attention_context_factors", "attention_score_row_factors", "attention_kernel_table",
                     "expert_gemm_table", "index_kernel_table"):
                # which cache lengths cuBLAS serves with a slower kernel is this card's library's choice,
                # how much faster the softmax's long-row kernels run is measured on this card, and the
                # grouped matmul's and the small-index kernels' times are this card's seconds: not carried to
                # another card (its experts are priced by the tile rates instead)
                continue
            if k in ("prefill_attention_flop_per_s", "masked_prefill_attention_flop_per_s", "expert_prefill_flop_per_s"):
                # the H200's own prefill-attention rates by head width (absolute FLOP/s, not a fraction of
                # a ceiling): another card's prompt attention is priced at its prefill matmul rate instead
                continue
            if k == "prefill_elementwise_bytes_per_element":
                # bytes per element at the measured ceiling: on the datasheet's, the same seconds here
                # (roofline.engines.grouped_terms gathers the kinds back into the dict)
                out.update({f"{k}.{kind}": float(b) / bw for kind, b in v.items()})
                continue
            if k == "moe_layer_overhead_s" and cal.expert_gemm_table:
                # fitted beside the grouped-mm table, which is not carried: the fit without the table
                # (the tiles' traffic factor's, which is carried) goes with the tiles
                v = cal.fit_report["extra"]["without_expert_gemm_table"]["moe_layer_overhead_s"]
            if k == "layer_feature_overhead_s":
                # seconds per layer of a feature's own kernels (launch-bound): carried as measured
                out.update({f"{k}.{feature}": float(x) for feature, x in v.items()})
                continue
            if k == "bandwidth_efficiency":
                v = v * bw
            elif k in ("compute_efficiency", "attention_efficiency", "prefill_compute_efficiency",
                       "expert_small_tile_efficiency", "expert_large_tile_efficiency"):
                if k == "prefill_compute_efficiency" and cal.matmul_load_curve:
                    # fitted against the boost clock's first tens of ms: a card without its own
                    # curve prices every prefill at a half-second one's average of this card's
                    from roofline.prefill import load_average

                    v = v * float(load_average(cal.matmul_load_curve, 0.5))
                v = min(1.0, v * pk)
            out[k] = float(v)
        return out

    report = {"cross_card": {}}
    for src in cals:
        for dst in cals:
            if src == dst or not measured.get(dst, Path("-")).is_file():
                continue
            card = load_card(dst)
            cal = cals[dst].model_copy(update={**grouped_terms(as_terms(src)),
                                               "measured_bandwidth_bytes_per_s": card.datasheet_bandwidth.base,
                                               "measured_peak_flop_per_s": card.datasheet_bf16_flops.base,
                                               "fit_report": {}})
            rows = [r for r in read_measurements(measured[dst]) if r.ok]
            res = compare(cal, rows, card)
            report["cross_card"][f"{src}->{dst}"] = {k: res[k] for k in ("tpot_mape_fraction", "ttft_mape_fraction", "points")}
    cross = list(report["cross_card"].values())
    if cross:
        pooled = {"basis": f"each of its {len(cals)} cards predicted with the other's terms "
                           f"({', '.join(report['cross_card'])})",
                  "tpot_mape_fraction": sum(c["tpot_mape_fraction"] for c in cross) / len(cross),
                  "ttft_mape_fraction": sum(c["ttft_mape_fraction"] or 0 for c in cross) / len(cross),
                  "points": sum(c["points"] for c in cross)}
    else:
        val = cals[home].fit_report.get("validation", {}).get("dense", {})
        pooled = {"basis": f"one card ({home}): no card could be left out; the error on its held-out models, a "
                           "lower bound for another card",
                  "tpot_mape_fraction": val.get("tpot_mape_fraction"), "ttft_mape_fraction": val.get("ttft_mape_fraction"),
                  "points": val.get("points", 0)}
    src = f"hardware_profiles/calibrations/{home}-{engine}.json, on the {home}'s datasheet ceilings"
    variant = Variant(
        applies_to="NVIDIA GPUs (the harness runs on CUDA)",
        terms={k: Fact(value=v, source=src) for k, v in as_terms(home).items()},
        fitted_on={"cards": sorted(cals), "models": sorted(cals[home].fitted_on),
                   "calibrations": [f"hardware_profiles/calibrations/{c}-{engine}.json" for c in sorted(cals)]},
        error={"pooled": pooled},
        coverage=cals[home].fit_report.get("coverage", {}),
        note=f"a harness engine: its terms are those measured on the {home} (benchmarks/make_calibrations.py)")
    return {"cuda": json.loads(variant.model_dump_json())}, report


def held_out_cards(engine: str) -> dict:
    """The harness engine's checks on cards it has no calibration of (committed
    ``measurements/CARD-ENGINE-check-*.csv``, measured as `roofline calibrate --no-fit` measures):
    each predicted with the engine profile's terms transferred to the card
    (roofline.engines.transferred_calibration, as `predict` answers there), pooled: a true
    leave-one-card-out error, nothing of that card in the terms. {} where there are none."""
    from roofline import engines
    from roofline.calibration import shipped_calibration
    from roofline.fitting import compare
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements

    engines.load_engine.cache_clear()  # the profile just written
    by_card: dict = {}
    for path in sorted((ROOT / "hardware_profiles" / "measurements").glob(f"*-{engine}-check-*.csv")):
        for row in read_measurements(path):
            if row.ok and path.name.startswith(f"{row.card}-") and shipped_calibration(row.card, engine) is None:
                by_card.setdefault(row.card, {}).setdefault(path.name, []).append(row)
    out = {}
    for card_id, files in by_card.items():
        card = load_card(card_id)
        rows = [r for rs in files.values() for r in rs]
        res = compare(engines.transferred_calibration(card, engine), rows, card)
        out[card_id] = {"files": sorted(files), **{k: res[k] for k in ("tpot_mape_fraction", "ttft_mape_fraction",
                                                                        "points")}}
    return out


def with_held_out_cards(engine: str, variants: dict, report: dict) -> dict:
    """``variants`` with the cuda variant's pooled error the held-out cards' (held_out_cards) where
    there are any, the home card's held-out models kept beside as ``home_card_models``."""
    held = held_out_cards(engine)
    if not held:
        return variants
    report["held_out_cards"] = held
    points = sum(h["points"] for h in held.values())
    error = variants["cuda"]["error"]
    error["home_card_models"] = error["pooled"]
    error["pooled"] = {
        "basis": f"leave one card out: the terms transferred to {', '.join(sorted(held))}, cards with no calibration "
                 f"(nothing of them fitted), against {points} held-out points "
                 f"({'; '.join(f for h in held.values() for f in h['files'])})",
        "tpot_mape_fraction": sum(h["tpot_mape_fraction"] * h["points"] for h in held.values()) / points,
        "ttft_mape_fraction": sum((h["ttft_mape_fraction"] or 0) * h["points"] for h in held.values()) / points,
        "points": points}
    return variants


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def write_profile(engine: str, variants: dict) -> None:
    path = ENGINES_DIR / f"{engine}.json"
    data = json.loads(path.read_text())
    data["variants"] = variants
    path.write_text(json.dumps(data, indent=2) + "\n")


def tables(reports: dict) -> str:
    """docs/engines-tables.md: per engine and variant, the leave-one-card-out and reserved tables."""
    lines = ["# Engine profiles: the tables (generated by benchmarks/fit_engine_profiles.py; do not edit)", "",
             "Errors are of predicted / measured time - 1 (TPOT for decode rows, the prefill time for prefill "
             "rows, the whole run's wall time for throughput rows that include the prefill): MAPE = mean |error|, "
             "signed = mean error (negative = predicted too fast).", ""]
    for engine, by_variant in reports.items():
        for backend, rep in by_variant.items():
            if backend == "reserved":
                lines += [f"## {engine}: the reserved rows, as `roofline predict --engine {engine}` answers them", "",
                          f"{rep['priced']} of {rep['points']} reserved rows priced (each with the variant its card "
                          "resolves to).", "", "| card | decode rows | decode MAPE | decode signed | prefill rows | "
                          "prefill MAPE | prefill signed | run rows | run MAPE | run signed |",
                          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
                for card, e in list(rep["per_card"].items()) + [("**all**", rep["errors"])]:
                    cells = [card]
                    for q in ("tpot", "prefill", "run"):
                        x = e.get(q)
                        cells += [str(x["points"]), _pct(x["mape_fraction"]), _pct(x["mean_signed_fraction"])] if x else ["", "", ""]
                    lines.append("| " + " | ".join(cells) + " |")
                if rep.get("on_another_backend"):
                    x = rep["on_another_backend"]
                    lines += ["", f"Of these, {x['points']} rows ran on another backend than the one the card resolves "
                              f"to (llama.cpp's Vulkan build on a Mac): MAPE {_pct(x['mape_fraction'])}, signed "
                              f"{_pct(x['mean_signed_fraction'])}."]
                if rep["unpriced"]:
                    lines += ["", "Reserved rows that cannot be priced:", ""]
                    for why, n in sorted(_count(r["why"] for r in rep["unpriced"]).items()):
                        lines.append(f"- {why}: {n}")
                lines.append("")
                continue
            if "vllm_2023_rows" in rep:
                gap = rep["vllm_2023_rows"]
                lines += [f"## {engine} / {backend}", "", VLLM_NOTE + ".", "",
                          "| check | rows | MAPE | signed |", "|---|---:|---:|---:|",
                          f"| the 2023 vLLM rows (llm-perf-bench, acbed3e, no CUDA graphs) | {gap.get('points', 0)} | "
                          f"{_pct(gap.get('mape_fraction'))} | {_pct(gap.get('mean_signed_fraction'))} |", ""]
                continue
            if "in_sample" not in rep:
                lines += [f"## {engine} / {backend}", "", "Cross-card errors of the harness calibrations:", "",
                          "| from -> to | TPOT MAPE | TTFT MAPE | points |", "|---|---:|---:|---:|"]
                for k, v in rep.get("cross_card", {}).items():
                    lines.append(f"| {k} | {_pct(v['tpot_mape_fraction'])} | {_pct(v['ttft_mape_fraction'])} | {v['points']} |")
                lines.append("")
                continue
            lines += [f"## {engine} / {backend}", ""]
            for what, key, per in (("Leave-one-card-out (each card predicted by a fit without it)", "loco", "loco_per_card"),
                                   ("In-sample", "in_sample", "in_sample_per_card"),
                                   ("Reserved cards (never fitted)", "reserved", "reserved_per_card")):
                if key not in rep:
                    continue
                lines += [f"### {what}", "", "| card | decode rows | decode MAPE | decode signed | prefill rows | "
                          "prefill MAPE | prefill signed | run rows | run MAPE | run signed |",
                          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
                for card, e in list(rep[per].items()) + [("**all**", rep[key])]:
                    cells = [card]
                    for q in ("tpot", "prefill", "run"):
                        x = e.get(q)
                        cells += [str(x["points"]), _pct(x["mape_fraction"]), _pct(x["mean_signed_fraction"])] if x else ["", "", ""]
                    lines.append("| " + " | ".join(cells) + " |")
                lines.append("")
            if rep.get("skipped"):
                lines += ["Rows not priced (this variant's engine), and why:", ""]
                lines += [f"- {why}: {n}" for why, n in rep["skipped"].items()]
                lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", action="append", help="only these engines (default: all)")
    ap.add_argument("--no-loco", action="store_true", help="skip the leave-one-card-out refits")
    args = ap.parse_args(argv)
    from roofline.published import load_published

    points = load_published()
    wanted = args.engine or ["llama.cpp", "tensorrt-llm", "lmdeploy", "vllm", "graph", "hf-eager"]
    reports = {}
    vdir = ENGINES_DIR / "validation"
    vdir.mkdir(exist_ok=True)
    for engine in wanted:
        if engine in layouts():
            variants, rep = fit_serving(points, engine, loco=not args.no_loco)
        elif engine == "vllm":
            variants, r = vllm_variant(points)
            rep = {"cuda": r}
        else:
            variants, r = harness_variant(engine)
            rep = {"cuda": r}
            write_profile(engine, variants)
            variants = with_held_out_cards(engine, variants, r)
        write_profile(engine, variants)
        (vdir / f"{engine}.json").write_text(json.dumps(rep, indent=1, default=float) + "\n")
        reports[engine] = rep
    if not args.engine:
        TABLES.write_text(tables(reports))
    from roofline import engines

    engines.load_engine.cache_clear()


if __name__ == "__main__":
    main()
