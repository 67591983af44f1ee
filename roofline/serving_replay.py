"""The serving loop's real runs against the simulator: its terms fitted on some runs, every run replayed.

A run of calibrate/serving_loop.py (roofline.serving_runs reads it) records every iteration: its
start and end, the passes' device time (CUDA events), what it ran (kind, bucket, prefill tokens
and pairs). ``fit_loop_terms`` measures the loop's terms (roofline.pass_costs.LoopTerms) from
the runs it is given, each a physical quantity read off those columns:

* ``decode_extra_s_per_layer``: median over the decode iterations of (device_s - the step
  model's decode step at the iteration's bucket, reading bucket x max_model_len cached tokens),
  divided by the layers: what the loop's decode graph adds to the graph engine's.
* ``prefill_floor_s_per_layer`` and ``prefill_elementwise_bytes_per_s`` (runs with CUDA-graph
  prefills, config ``prefill_graphs``, and the card's matmul table): least squares on the
  logarithm of the prefill passes' device_s as floor x layers + the linears from the table +
  the step model's attention + the loop's counted elementwise bytes / their rate, at the padded
  token bucket (roofline.pass_costs.LoopCost). Without the table: ``pnorm(floor x layers, the
  step model's kernel time, exponent)`` (graph prefills) or ``pnorm(floor x layers, the step
  model's prefill, exponent)`` (the eager pass takes the longer of the host's launches and the
  GPU's work), with ``prefill_floor_exponent`` fitted too.
* ``host_decode_s`` (+ ``host_decode_s_per_seq`` x sequences), ``host_prefill_s`` (+ per
  sequence): a robust straight line through (sequences in the pass, next t_start - t_start -
  device_s) of the iterations followed by another without an idle wait and in which no sequence
  finished or was preempted: the host's time per iteration, which grows with the Python work per
  sequence. ``host_finish_s``: the median, over the decode iterations where sequences finished,
  of what their host time exceeds the line by, per sequence that finished.
* When every fit run carries the loop's host probe (config ``host_probe``), each run's host
  times are first brought to the runs' mean probe, which the terms keep (``host_probe``) so a
  replay can scale them to another machine.
* ``wake_s``: median over the iterations that start an idle server of (t_start - the arrival it
  waited for).

``replay`` simulates a run's own stream with its configuration (``pass_cost="serving-loop"``, the
host terms scaled by the run's host probe where it has one) and ``compare_rows`` sets the
simulated summary beside the measured one.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np

from roofline.pass_costs import LoopTerms, Term, padded_prefill
from roofline.serving_runs import ServingRun, read_run, run_names, run_paths
from roofline.step import decode_work, pnorm, prefill_work

#: The summary keys compared, and the acceptance bound on each one's relative error (issue 14).
COMPARED = {
    "throughput_tok_s": 0.05,
    "ttft_p50_s": 0.10,
    "ttft_p99_s": 0.20,
    "tpot_p50_s": 0.10,
    "tpot_p99_s": 0.20,
    "e2e_p50_s": None,
    "e2e_p99_s": None,
}


def run_model(run: ServingRun):
    """The model a run served: its catalog name, or, for a config.json path (which need not exist
    where the run is replayed), the config the run recorded (``model_config``) read as that file
    would be; runs without it, the path itself."""
    from roofline.catalogs import catalog_config_path
    from roofline.model_spec import ModelSpec

    c = run.config
    model = c["model"]
    if catalog_config_path(str(model)) is not None or not isinstance(c.get("model_config"), dict):
        return model
    return ModelSpec.from_config_dict(c["model_config"], str(model))


def _step(run: ServingRun, card: str, engine: str, calibration="auto"):
    from roofline.scenario import make_scenario

    return make_scenario(card=card, model=run_model(run), engine=engine, calibration=calibration).step


def gemm_table_path(card: str) -> str | None:
    """The card's committed matmul table (the gemm probe), relative to hardware_profiles/, if any."""
    from roofline.hardware import profiles_dir

    rel = f"measurements/{card}-probe-gemm.json"
    return rel if (profiles_dir() / rel).is_file() else None


def chunk_table_path(card: str) -> str | None:
    """The card's committed chunk table (the chunk probe), relative to hardware_profiles/, if any."""
    from roofline.hardware import profiles_dir

    rel = f"measurements/{card}-probe-chunk.json"
    return rel if (profiles_dir() / rel).is_file() else None


def chunk_rows_table_path(card: str) -> str | None:
    """The card's chunk probe at other cache rows (``{card}-probe-chunk-rows{N}.json``), relative to
    hardware_profiles/, if any: the one at the most rows (the longest lever on the copy's time a
    row), checked against the card's chunk table here, at fit time, so that a pair that cannot
    price the copy is refused when the terms are made rather than when a server is simulated."""
    import re

    from roofline.hardware import profiles_dir

    found = [(int(m.group(1)), p.name) for p in (profiles_dir() / "measurements").glob(f"{card}-probe-chunk-rows*.json")
             if (m := re.fullmatch(rf"{re.escape(card)}-probe-chunk-rows(\d+)\.json", p.name))]
    base = chunk_table_path(card)
    if not found or base is None:
        return None
    rel = f"measurements/{max(found)[1]}"
    from roofline.chunk_table import copy_s_per_row, load_chunk_table

    table, other = load_chunk_table(base), load_chunk_table(rel)
    for shape in table.shapes:  # every measured shape prices its copy (RooflineError if not)
        copy_s_per_row(table, other, shape)
    return rel


#: the prefill graphs' empty attention tiles, timed on an H100 (device call 96,
#: calibrate/runs/prefill_config_probe.py): a block's launch and exit on the SMs of Hopper's GH100
#: die, the H100 SXM's and the H200's alike (132 SMs at 1,980 MHz)
EMPTY_TILE_PROBE = "measurements/h100-sxm-probe-prefill-slots-call96.json"
#: The kv-repeat probes the shipped terms' K/V repeats' fixed time is measured from (calibrate/runs/
#: kv_repeat_probe.py on two H100 SXMs, device calls 109-110; a kernel's launch and exit on the SMs
#: of Hopper's GH100 die, the H100 SXM's and the H200's alike)
KV_REPEAT_PROBES = ("measurements/h100-sxm-probe-kv-repeat-call109.json",
                    "measurements/h100-sxm-probe-kv-repeat-call110.json")
#: The kernel walks the elementwise launches' fixed time is measured from (calibrate/runs/
#: prefill_kernel_walk.py on three H100 SXMs, device calls 110, 112 and 117: twelve models, launches
#: of 18-25 a layer; a kernel's launch and exit on the GH100 die, the H100 SXM's and the H200's alike)
LAUNCH_WALKS = ("measurements/h100-sxm-probe-kernel-walk-call110.json",
                "measurements/h100-sxm-probe-kernel-walk-call112.json",
                "measurements/h100-sxm-probe-kernel-walk-call117.json")


def _probe_gpus(paths) -> str:
    """The GPUs probe files (relative to hardware_profiles/) were measured on, as their ``gpu`` says."""
    from roofline.hardware import profiles_dir

    return ", ".join(sorted({json.loads((profiles_dir() / p).read_text(encoding="utf-8")).get("gpu", "a GPU")
                             for p in paths}))


def fit_loop_terms(runs: list[ServingRun], card: str | None = None, engine: str = "graph", held_out=(),
                   calibration="auto", gemm_table="auto", empty_tile_probe=None,
                   measured_attention: bool = False, kv_repeat_probes=(), launch_walks=()) -> LoopTerms:
    """The loop's terms measured on ``runs`` (module docstring; ``card``: the runs' own by
    default); ``held_out`` names the runs kept out, for the record. ``gemm_table``: the matmul
    table that prices graph prefills' linears ("auto": the card's committed one; None: the step
    model's matmul terms). ``empty_tile_probe``: a prefill-slots probe (relative to
    hardware_profiles/, e.g. EMPTY_TILE_PROBE) whose time per empty attention tile (roofline.
    pass_costs.empty_tile_s_from_probe) is then priced with the matmul table, not fitted. None, the
    default and the shipped terms: no such term. The
    tiles are real (device calls 96-99 timed them), but priced they made the held-out replays worse
    (docs/serving.md, "The prefill graphs' empty attention tiles"). ``measured_attention``: the
    prefill graphs' attention priced from the card's chunk table (``prefill_attention_measured``,
    roofline.pass_costs.loop_attention_s) while the floor and the elementwise rate are fitted; off
    in the shipped terms for the same reason (docs/serving.md, "The prefill graphs' attention").
    ``kv_repeat_probes``: kv-repeat probes (relative to hardware_profiles/, e.g. KV_REPEAT_PROBES)
    whose K/V repeats' fixed time a layer (roofline.pass_costs.kv_repeat_s_from_probe) is priced for
    grouped-query models beside the floor, not fitted: the floor is then the fixed time of the
    kernels every model runs, full multi-head ones included (with ``launch_walks`` too, of what a
    layer takes beyond its kernels' fixed times). ``launch_walks``: kernel walks (relative
    to hardware_profiles/, e.g. LAUNCH_WALKS) whose time a launch of an elementwise kernel
    (roofline.pass_costs.launch_s_from_walks) is priced for each of the launches a layer runs
    (loop_elementwise_launches), not fitted: the floor is then what a layer takes beyond its
    kernels."""
    from scipy.optimize import least_squares

    from roofline.gemm import load_gemm_table
    from roofline.pass_costs import (empty_attention_tiles, loop_attention_s, loop_elementwise_bytes_per_token,
                                     loop_kernels_fixed_s, loop_layer_gemms, loop_linears_s)

    names = ", ".join(r.name for r in runs)
    cards = {run_card(r) for r in runs}
    if card is None and len(cards) > 1:
        raise ValueError(f"the runs were served on {len(cards)} cards ({', '.join(sorted(cards))}): the loop's terms "
                         "are one card's")
    card = card or cards.pop()
    extra, host_d, host_p, host_f, wake = [], [], [], [], []
    pre_model, pre_device, pre_layers, pre_el = [], [], [], []
    if gemm_table == "auto":
        gemm_table = gemm_table_path(card)
    graph_runs = any(run.config.get("prefill_graphs") for run in runs)
    # the host's speed differs from machine to machine: with every run's host probe, each run's
    # host times are brought to the runs' mean probe before the lines are fitted
    probes = [run.config.get("host_probe") for run in runs]
    ref_probe = None
    if all(probes) and len({p["decode_seqs"] for p in probes}) == 1:
        ref_probe = {"decode_host_s": float(np.mean([p["decode_host_s"] for p in probes])),
                     "prefill_host_s": float(np.mean([p["prefill_host_s"] for p in probes])),
                     "decode_seqs": probes[0]["decode_seqs"]}
    table = load_gemm_table(gemm_table) if gemm_table and graph_runs else None
    tile_s = None
    if empty_tile_probe and table is not None:
        from roofline.hardware import profiles_dir
        from roofline.pass_costs import empty_tile_s_from_probe

        tile_s, tile_points = empty_tile_s_from_probe(profiles_dir() / empty_tile_probe)
    repeat_s = None
    if kv_repeat_probes and table is not None:
        from roofline.hardware import profiles_dir
        from roofline.pass_costs import kv_repeat_s_from_probe

        repeat_s, repeat_points = kv_repeat_s_from_probe([profiles_dir() / p for p in kv_repeat_probes])
        repeat_list = ", ".join(f"{p['fixed_s'] * 1e6:.2f}" for p in repeat_points)
    launch_s = None
    if launch_walks and table is not None:
        from roofline.hardware import profiles_dir
        from roofline.pass_costs import launch_s_from_walks

        launch_s, launch_points = launch_s_from_walks([profiles_dir() / p for p in launch_walks])
        launches = [p["launches"] for p in launch_points]
    attention_table = None
    if measured_attention:
        if table is None or chunk_table_path(card) is None:
            raise ValueError(f"measured attention needs the {card} matmul and chunk tables (the graph loop's prefill)")
        from roofline.chunk_table import load_chunk_table

        attention_table = load_chunk_table(chunk_table_path(card))
    for run in runs:
        step = _step(run, card, engine, calibration)
        layers = step.spec.num_hidden_layers
        shapes = loop_layer_gemms(step.spec) if table is not None else None
        if table is not None and shapes is None:
            raise ValueError(f"{run.name}: {run.config['model']} is not a dense model: the loop's terms are fitted "
                             "on runs of its dense decoder")
        t_len = run.config["max_model_len"]
        buckets = (run.config.get("prefill_token_buckets") or []) if run.config.get("prefill_graphs") else []
        its = run.iterations
        arrivals = sorted(float(r["arrival_s"]) for r in run.requests)
        if ref_probe is not None:
            rd = ref_probe["decode_host_s"] / run.config["host_probe"]["decode_host_s"]
            rp = ref_probe["prefill_host_s"] / run.config["host_probe"]["prefill_host_s"]
        else:
            rd = rp = 1.0
        for i, it in enumerate(its):
            if it["kind"] == "decode":
                b = float(it["bucket"])
                extra.append((it["device_s"] - step.pass_s(decode_work(b, b * t_len))) / layers)
            elif it["kind"] == "prefill":
                work = prefill_work(float(it["prefill_tokens"]), float(it["prefill_pairs"]), float(it["prefill_seqs"]))
                if buckets and table is not None:  # the linears from the matmul table, the rest the step model's
                    work = prefill_work(*padded_prefill(*work[2:5], buckets, run.config["max_num_seqs"]))
                    attention = loop_attention_s(attention_table, step, work, float(it["prefill_tokens"]),
                                                 float(it["prefill_pairs"]))
                    pre_model.append(loop_linears_s(table, step.spec, shapes, work.prefill_tokens, work.logit_rows)
                                     + attention
                                     + (tile_s or 0.0) * empty_attention_tiles(
                                         step.spec, work.prefill_tokens, run.config["max_num_seqs"],
                                         float(it["prefill_seqs"]))
                                     + loop_kernels_fixed_s(step.spec, repeat_s, launch_s))
                    pre_el.append(loop_elementwise_bytes_per_token(step, attention_table is not None)
                                  * work.prefill_tokens)  # bytes
                elif buckets:  # a graph replay: the padded work, no eager overhead
                    work = prefill_work(*padded_prefill(*work[2:5], buckets, run.config["max_num_seqs"]))
                    pre_model.append(step.work_s(work))
                else:
                    pre_model.append(step.pass_s(work))
                pre_device.append(it["device_s"])
                pre_layers.append(layers)
            if i + 1 < len(its) and its[i + 1]["t_start_s"] - it["t_end_s"] < 1e-3 and it["running"] > 0:
                host = its[i + 1]["t_start_s"] - it["t_start_s"] - it["device_s"]
                if it.get("finished", 0) or it.get("preempted", 0):
                    if it["kind"] == "decode" and not it.get("preempted", 0):
                        host_f.append((it["decode_seqs"], it["finished"], host * rd))
                elif it["kind"] == "decode":
                    host_d.append((it["decode_seqs"], host * rd))
                else:
                    host_p.append((it["prefill_seqs"], host * rp))
            if i == 0 or its[i - 1]["running"] == 0:  # an idle server, woken by an arrival while it slept
                idle_from = its[i - 1]["t_end_s"] if i else 0.0
                waited = [a for a in arrivals if idle_from < a <= it["t_start_s"]]
                if waited:
                    wake.append(it["t_start_s"] - waited[-1])
    graphs = {bool(run.config.get("prefill_graphs")) for run in runs}
    buckets_used = True in graphs
    if len(graphs) > 1:
        raise ValueError("the runs mix eager and graph prefill passes: fit the loop's terms on runs of one loop")
    model, device, layers = np.array(pre_model), np.array(pre_device), np.array(pre_layers, dtype=float)
    el_rate = None
    if table is not None:  # additive: floor x layers + linears + attention + elementwise bytes / rate
        el = np.array(pre_el)

        def residual(x):  # x[1]: seconds per TB of elementwise traffic
            return np.log(x[0] * layers + model + x[1] * 1e-12 * el) - np.log(device)

        fit = least_squares(residual, [float(np.median(device / layers)) / 4, 0.5], bounds=([0.0, 0.0], [1.0, 100.0]))
        floor, el_rate, exponent = float(fit.x[0]), 1e12 / float(fit.x[1]), 1.0
    else:
        def residual(x):
            return np.log(pnorm(x[0] * layers, model, x[1])) - np.log(device)

        fit = least_squares(residual, [float(np.median(device / layers)), 4.0], bounds=([0.0, 1.0], [1.0, 400.0]))
        floor, exponent = (float(v) for v in fit.x)
    rms = float(np.sqrt(np.mean(residual(fit.x) ** 2)))

    (hd0, hd1), nd = _robust_line(host_d), len(host_d)
    (hp0, hp1), np_ = _robust_line(host_p), len(host_p)
    # a finishing sequence leaves its slot (the loop's _leave: blocks freed, the last slot's KV
    # copied into the hole): host time beyond the decode line, per sequence that finished
    finish = statistics.median((h - hd0 - hd1 * seqs) / n for seqs, n, h in host_f) if host_f else 0.0

    def term(value, how):
        return Term(value=float(value), source=f"{how}; runs {names}")

    return LoopTerms(
        card=card, engine=engine, loop="calibrate/serving_loop.py",
        decode_extra_s_per_layer=term(statistics.median(extra), f"median over {len(extra)} decode iterations of "
                                      "(device_s - the step model's decode step at the bucket reading bucket x "
                                      "max_model_len tokens) / layers"),
        prefill_floor_s_per_layer=term(floor, f"least squares on log device_s of {len(device)} prefill passes, "
                                       + ("floor x layers + the linears at the padded token bucket from the matmul "
                                          "table + " + ("the chunk table's prefill attention (measured) and the step "
                                                        "model's collectives" if attention_table is not None else
                                                        "the step model's attention and collectives")
                                          + " + the loop's elementwise bytes / their rate (no eager overhead)"
                                          if table is not None else
                                          "pnorm(floor x layers, the step model's prefill work at the padded token "
                                          "bucket without its eager overhead, exponent)" if buckets_used else
                                          "pnorm(floor x layers, step model's prefill, exponent)")
                                       + f"; rms {rms:.3f} in log"),
        prefill_floor_exponent=term(exponent, "1: the floor adds to the kernels' time (not fitted)"
                                    if table is not None else "the same fit"),
        prefill_gemm_table=gemm_table if table is not None else None,
        prefill_attention_measured=attention_table is not None,
        prefill_empty_tile_s=Term(
            value=tile_s, source=f"{empty_tile_probe} ({_probe_gpus([empty_tile_probe])}), "
            "roofline.pass_costs.empty_tile_s_from_probe: least squares through the origin over "
            f"{len(tile_points)} (model, slots, bucket) points of the prefill graphs' extra time at more slots "
            "against their extra empty attention tiles") if tile_s is not None else None,
        prefill_kv_repeat_s_per_layer=Term(
            value=repeat_s, source=f"{', '.join(kv_repeat_probes)} ({_probe_gpus(kv_repeat_probes)}), "
            "roofline.pass_costs.kv_repeat_s_from_probe: the median over "
            f"{len(repeat_points)} measurements of grouped-query models "
            f"({', '.join(p['model'] for p in repeat_points)}) of the "
            "intercept of the prefill graph's time with K/V repeated less with K/V heads as stored, a layer, "
            "against the bytes the repeats add (intercepts "
            f"{repeat_list} us)")
        if repeat_s is not None else None,
        prefill_launch_s=Term(
            value=launch_s, source=f"{', '.join(launch_walks)} ({_probe_gpus(launch_walks)}), "
            "roofline.pass_costs.launch_s_from_walks: least squares through the origin over "
            f"{len(launch_points)} walked models ({', '.join(p['model'] for p in launch_points)}) of the elementwise "
            "kernels' device time a layer, at each walk's smallest bucket, against their launches a layer "
            f"({min(launches):.1f}-{max(launches):.1f}) and their bytes: the launches' coefficient")
        if launch_s is not None else None,
        chunk_attention_table=chunk_table_path(card) if table is not None else None,
        chunk_rows_table=chunk_rows_table_path(card) if table is not None else None,
        host_probe=ref_probe,
        prefill_elementwise_bytes_per_s=term(el_rate, "the same fit: the loop's elementwise bytes (counted from "
                                             "its code, roofline.pass_costs.loop_elementwise_elements) over their "
                                             "time") if el_rate is not None else None,
        host_decode_s=term(hd0, f"robust line (soft L1) through {nd} decode iterations' next t_start - t_start - "
                           "device_s against their decoding sequences (iterations where no sequence finished or was "
                           "preempted): the intercept"),
        host_decode_s_per_seq=term(hd1, "the same line's slope"),
        host_prefill_s=term(hp0, f"robust line (soft L1) through {np_} prefill iterations' next t_start - t_start - "
                            "device_s against their sequences (none finished): the intercept"),
        host_finish_s=term(max(finish, 0.0), f"median over {len(host_f)} decode iterations where sequences finished "
                           "(none preempted) of (host time - the decode line) / sequences finished"),
        host_prefill_s_per_seq=term(hp1, "the same line's slope"),
        wake_s=term(statistics.median(wake) if wake else 0.0, f"median over {len(wake)} iterations starting an idle "
                    "server of t_start - the arrival it waited for"),
        prefill_graphs=graphs.pop(), fitted_on=[r.name for r in runs], held_out=list(held_out),
        note="fitted by roofline.serving_replay.fit_loop_terms (benchmarks/fit_serving_loop.py) on the h200 "
             "graph calibration's step model",
    )


def _robust_line(points) -> tuple[float, float]:
    """(intercept, slope >= 0) of y against x, least squares with a soft-L1 loss (host times have
    a long tail of scheduler hiccups that plain least squares would follow)."""
    from scipy.optimize import least_squares

    x, y = (np.array(v, dtype=float) for v in zip(*points))
    scale = float(np.median(y))
    fit = least_squares(lambda c: (c[0] + c[1] * x - y) / scale, [scale, 0.0], loss="soft_l1", f_scale=0.1,
                        bounds=([0.0, 0.0], [np.inf, np.inf]))
    return float(fit.x[0]), float(fit.x[1])


def run_card(run: ServingRun) -> str:
    """The card a run was served on (its config's ``card``; h200 for a run that does not say)."""
    return str(run.config.get("card") or "h200")


def replay(run: ServingRun, folder, terms, card: str | None = None, engine: str = "graph", calibration="auto",
           pass_time_spread: float | None = None, decode_time_scales=None, scale_host: bool = True) -> dict:
    """Simulate run ``run``'s own stream with its configuration and the loop's terms: the
    continuous server's summary (roofline.api.simulate; with ``pass_time_spread``, its range over
    the GPU times that fraction faster and slower under ``pass_time_spread``; with
    ``decode_time_scales``, {bucket: factor}, each decode bucket's GPU time multiplied: the run's
    probed speed, ``pass_ratios``' ``probe_by_bucket``). ``scale_host`` False: the host terms as
    fitted, not scaled by the run's host probe (benchmarks/serving_tail_sensitivity.py)."""
    from roofline import api

    from roofline.pass_costs import run_host_probe, scaled_for_host

    c = run.config
    card = card or run_card(run)
    if scale_host:
        terms = scaled_for_host(terms, run_host_probe(c))
    result = api.simulate(
        card, run_model(run), engine=engine, calibration=calibration, batch=c["max_num_seqs"],
        requests=run_paths(folder, run.name)["stream"], static=False,
        schedule="prefill-first" if c["policy"] == "prefill-first" else "decode-first",
        max_num_batched_tokens=c["max_num_batched_tokens"], max_model_len=c["max_model_len"],
        kv_capacity_tokens=c["num_blocks"] * c["block_size"], block_size=c["block_size"],
        pass_cost="serving-loop", loop_terms=terms, pass_time_spread=pass_time_spread,
        decode_time_scales=decode_time_scales or None,
    )
    return result["continuous"]


def iteration_ratios(run: ServingRun, terms: LoopTerms, card: str | None = None, engine: str = "graph",
                     calibration="auto") -> tuple:
    """(the run's LoopCost, [device_s / price of each prefill pass], [(bucket, device_s / price) of
    each decode step]) in the run's order: its passes against the loop's price, the host aside."""
    from roofline.pass_costs import LoopCost

    c = run.config
    card = card or run_card(run)
    cost = LoopCost(_step(run, card, engine, calibration), terms, c["max_model_len"], c["max_num_seqs"],
                    c["max_num_batched_tokens"])
    prefill, decode = [], []
    for it in run.iterations:
        if it["kind"] == "decode":
            n = int(it["decode_seqs"])
            decode.append((cost.bucket[n], it["device_s"] / cost.decode_device_s[n]))
        elif it["kind"] == "prefill":
            prefill.append(it["device_s"] / cost.prefill_device_s(
                float(it["prefill_tokens"]), float(it["prefill_pairs"]), float(it["prefill_seqs"])))
    return cost, prefill, decode


def pass_ratios(run: ServingRun, terms: LoopTerms, card: str | None = None, engine: str = "graph",
                calibration="auto") -> dict:
    """How fast ``run``'s GPU ran the loop's passes against their price: the median of device_s /
    the price (roofline.pass_costs.LoopCost, the host terms aside) over its decode steps
    (``decode``, and per bucket under ``decode_by_bucket``) and, for a prefill-first run, over its
    prefill passes (``prefill``; None for a chunked run, whose prefill iterations carry its decode
    step). A replay's tails follow these: near saturation a few percent of device time moves a
    TTFT p99 by tens of percent (docs/serving.md, "Why the remaining tails miss").

    Where the run carries a device probe (calibrate/serving_loop.device_probe: its decode steps
    timed before its clock), ``probe_by_bucket`` is the probe's device time over the price per
    bucket (roofline.pass_costs.probed_decode_scales) and ``probe`` their mean weighted by the
    run's decode steps per bucket: the decode ratio the probe foretells for this run, beside the
    ``decode`` it measured. Both None without a probe."""
    from collections import defaultdict

    from roofline.pass_costs import bucket_factor, probed_decode_scales, run_device_probe

    c = run.config
    cost, prefill, decode_steps = iteration_ratios(run, terms, card, engine, calibration)
    if c.get("policy", "prefill-first") != "prefill-first":
        prefill = []
    decode, by_bucket = [r for _, r in decode_steps], defaultdict(list)
    for bucket, r in decode_steps:
        by_bucket[bucket].append(r)
    probed = probed_decode_scales(cost, run_device_probe(c))
    probe = None
    if probed and decode:
        probe = sum(len(v) * bucket_factor(probed, b) for b, v in by_bucket.items()) / len(decode)
    return {"decode": float(np.median(decode)) if decode else None,
            "prefill": float(np.median(prefill)) if prefill else None,
            "decode_by_bucket": {b: float(np.median(v)) for b, v in sorted(by_bucket.items())},
            "decode_steps_by_bucket": {b: len(v) for b, v in sorted(by_bucket.items())},
            "probe": probe, "probe_by_bucket": probed}


def compare_rows(folder, terms: LoopTerms, names=None, fitted=None, pass_time_spread: float | None = None,
                 at_probed_speed: bool = False, **kw) -> list[dict]:
    """One row per run of ``folder`` (or ``names``): measured and simulated summaries, relative
    errors, whether the run set any term (``fitted``: its name among ``fitted``, by default the
    terms' ``fitted_on``; pass () for a folder the terms were not fitted on) and whether each bound
    of COMPARED holds. ``at_probed_speed``: each run that carries a device probe is replayed with
    its decode steps at the probed speed (``at_probed_speed`` in the row says whether it was)."""
    fitted = terms.fitted_on if fitted is None else fitted
    rows = []
    for name in names or run_names(folder):
        run = read_run(folder, name)
        ratios = pass_ratios(run, terms, **kw)
        scales, why_not = probed_speed(ratios) if at_probed_speed else (None, None)
        sim = replay(run, folder, terms, pass_time_spread=pass_time_spread, decode_time_scales=scales, **kw)
        meas = run.summary
        row = {"run": name, "fitted": name in fitted, "requests": meas["requests"],
               "policy": run.config.get("policy", "prefill-first")}
        for key, bound in COMPARED.items():
            m, s = meas[key], sim[key]
            err = (s - m) / m if m else None
            row[key] = {"measured": m, "simulated": s, "error": err,
                        "within": None if bound is None or err is None else abs(err) <= bound}
        for key in ("preemptions", "max_running"):
            row[key] = {"measured": meas[key], "simulated": sim[key]}
        row["same_preemption_behaviour"] = (meas["preemptions"] > 0) == (sim["preemptions"] > 0)
        if "pass_time_spread" in sim:
            spread = sim["pass_time_spread"]
            inside = {key: spread[key][0] <= meas[key] <= spread[key][1] for key in COMPARED if key in spread}
            row["pass_time_spread"] = {**spread, "measured_inside": inside,
                                       "ttft_p99_s_measured_inside": inside["ttft_p99_s"]}
        row["decode_device_ratio"], row["prefill_device_ratio"] = ratios["decode"], ratios["prefill"]
        row["decode_probe_ratio"] = ratios["probe"]
        row["at_probed_speed"] = bool(scales)
        if why_not:
            row["probed_speed_not_used"] = why_not
        rows.append(row)
    return rows


#: The probed decode speeds (device time / price) a replay at the probed speed takes: beyond them
#: the run's GPU is not the card the terms price (a CPU run recorded under a GPU's name, say).
PROBE_RANGE = (0.5, 2.0)


def probed_speed(ratios: dict) -> tuple[dict | None, str | None]:
    """(the decode scales a replay at the probed speed takes, None) from ``pass_ratios``' figures:
    the probe's ratio at each bucket the run's decode steps used; or (None, why not): no probe, no
    decode step, or a used bucket's ratio beyond PROBE_RANGE."""
    probe = ratios.get("probe_by_bucket")
    if not probe:
        return None, "no device probe (runs before device call 89 carry none)"
    used = [b for b, n in ratios.get("decode_steps_by_bucket", {}).items() if n > 0]
    if not used:
        return None, "no decode step to replay at the probed speed"
    from roofline.pass_costs import bucket_factor

    scales = {b: bucket_factor(probe, b) for b in used}
    off = {b: v for b, v in scales.items() if not PROBE_RANGE[0] <= v <= PROBE_RANGE[1]}
    if off:
        cells = ", ".join(f"bucket {b} at {v:.2f}x" for b, v in sorted(off.items()))
        return None, (f"its device probe ran decode steps beyond {PROBE_RANGE[0]:g}-{PROBE_RANGE[1]:g}x their price "
                      f"({cells}): not the card the terms price")
    return scales, None


#: What summary_lines reports, with the bound it checks (the keys of COMPARED that carry one).
SUMMARY = (("throughput_tok_s", "throughput (5%)"), ("ttft_p50_s", "TTFT p50 (10%)"), ("tpot_p50_s", "TPOT p50 (10%)"),
           ("ttft_p99_s", "TTFT p99 (20%)"), ("tpot_p99_s", "TPOT p99 (20%)"))


def summary_lines(rows) -> list[str]:
    """How many of ``rows`` (compare_rows) are within each acceptance bound, and the worst error."""
    out = []
    for key, label in SUMMARY:
        have = [r for r in rows if r[key]["error"] is not None]
        if not have:
            continue
        ok = sum(1 for r in have if r[key]["within"])
        worst = max(have, key=lambda r: abs(r[key]["error"]))
        out.append(f"{label}: {ok} of {len(have)} runs within, worst {100 * worst[key]['error']:+.1f}% ({worst['run']})")
    same = sum(1 for r in rows if r["same_preemption_behaviour"])
    out.append(f"preemption behaviour (none vs some): {same} of {len(rows)} runs the same")
    return out


def compare_folder(folder, loop_terms=None, names=(), pass_time_spread: float | None = None,
                   at_probed_speed: bool = False) -> dict:
    """Every complete run in ``folder`` (written by `roofline serve`) replayed with the loop's terms
    (``loop_terms``: a file, else the shipped ones of each run's card): compare_rows, plus notes
    where a run's loop differs from the one the terms describe (``pass_time_spread``: each run's
    simulated range with the GPU times that fraction faster and slower, beside;
    ``at_probed_speed``: runs with a device probe replayed at its decode speed). Errors name the
    folder."""
    from roofline.errors import RooflineError
    from roofline.pass_costs import host_ratios, load_loop_terms, run_host_probe

    path = Path(folder)
    if not path.is_dir():
        raise RooflineError(f"{folder}: not a folder of serving runs (roofline serve --out writes one)")
    available = run_names(path)
    if not available:
        raise RooflineError(f"{folder}: no complete serving run (run-NAME.json with its requests and iterations CSVs)")
    unknown = [n for n in names if n not in available]
    if unknown:
        raise RooflineError(f"{folder}: no run named {unknown[0]!r}; the runs are {', '.join(available)}", "names")
    rows, notes, terms_of = [], [], {}
    shipped = path.resolve() == shipped_folder().resolve()
    for name in names or available:
        run = read_run(path, name)
        card = str(run.config.get("card"))
        if card not in terms_of:  # read once per card
            terms_of[card] = load_loop_terms(loop_terms, card=card, engine="graph")
            if terms_of[card].transferred_from:
                notes.append(f"runs on {card}: no run on it set the loop's terms; those fitted on "
                             f"{terms_of[card].transferred_from} carried over, with {card}'s own probe tables where "
                             "committed (roofline.pass_costs.transferred_loop_terms): a leave-one-card-out replay")
        terms = terms_of[card]
        if bool(run.config.get("prefill_graphs")) != terms.prefill_graphs:
            notes.append(f"{name}: its prefill ran {'as graphs' if run.config.get('prefill_graphs') else 'eagerly'}, "
                         f"the terms describe {'graph' if terms.prefill_graphs else 'eager'} prefills")
        if run.config.get("policy") == "chunked" and terms.prefill_graphs and not run.config.get("chunk_graphs"):
            notes.append(f"{name}: policy chunked on a loop without chunk graphs: it ran chunks eagerly (Python "
                         "launching every kernel, host-bound); the terms price every prefill as a graph, so this "
                         "run's prefills are priced too fast (docs/serving.md)")
        ratios = host_ratios(terms, run_host_probe(run.config))
        if terms.host_probe and ratios is None:
            notes.append(f"{name}: no host probe comparable with the terms' (a run before the loop measured its "
                         "host): its host terms are not scaled to its machine, whose host speed varied 2x between "
                         "H200 machines")
        elif ratios is not None and not 0.5 <= ratios[0] <= 2.0:
            notes.append(f"{name}: its machine ran the host probe at {ratios[0]:.2f}x the fit runs' time")
        # a run of the terms' own fit is one of the shipped folder's, whatever another folder's runs are named
        rows += compare_rows(path, terms, names=[name], card=card, fitted=terms.fitted_on if shipped else (),
                             pass_time_spread=pass_time_spread, at_probed_speed=at_probed_speed)
        if rows[-1].get("probed_speed_not_used"):
            notes.append(f"{name}: {rows[-1]['probed_speed_not_used']}; replayed at the priced speed")
    return {"folder": str(path), "runs": rows, "notes": notes, "summary": summary_lines(rows),
            "at_probed_speed": at_probed_speed}


def shipped_folder() -> Path:
    from roofline.hardware import profiles_dir

    return profiles_dir() / "measurements" / "serving" / "h200-graph-probe"
