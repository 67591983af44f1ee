"""What `roofline waste`, `simulate` and `choose` print: one API result as a table, JSON or CSV.

JSON and CSV carry the API's raw base-unit numbers (seconds, bytes, tokens, fractions) under
unit-suffixed keys; only the tables show ms, GiB and percentages.
"""

from __future__ import annotations

from roofline import report
from roofline.units import GiB

WASTE_CLASS_KEYS = ["class", "count", "gen_tokens", "ttft_in_batch_s", "e2e_in_batch_s", "alone_batch", "e2e_alone_s", "slowdown"]
WASTE_KEYS = ["source", "requests", "batch", "batches", "tokens_needed", "slots_used", "wasted_slots", "waste_fraction"]
SIMULATE_KEYS = [
    "throughput_tok_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s",
    "mean_occupancy", "waste_fraction", "idle_slot_steps", "slot_steps", "passes", "makespan_s",
    "generated_tokens", "requests",
]
SIMULATE_EXTRA_KEYS = [
    "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "kv_capacity_tokens", "max_running", "preemptions",
    "preempted_requests", "rejected", "slo_ttft_s", "slo_tpot_s", "slo_attainment", "goodput_req_s", "goodput_tok_s",
]
CHOOSE_KEYS = ["batch", "throughput_tok_s", "ttft_s", "tpot_s", "per_user_tok_s", "peak_mem_bytes", "binding"]


def _pct(fraction: float) -> str:
    """43.75%, 91.875%, 0.794%: up to three decimals, trailing zeros dropped."""
    return f"{100.0 * fraction:.3f}".rstrip("0").rstrip(".") + "%"


def _s(seconds: float) -> str:
    return f"{seconds:.3f}"


# ---- waste ----------------------------------------------------------------------------------
def waste_view(result: dict, fmt: str) -> str:
    if fmt == "json":
        return report.to_json(result)
    timed = "return_policy" in result
    extra = ["return_policy", "short_request_slowdown", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "e2e_mean_s", "card", "model"]
    overall = {k: result[k] for k in WASTE_KEYS + extra if k in result}
    if fmt == "csv":
        classes = result.get("classes")
        if not classes:
            return report.to_csv([overall]).rstrip("\n")
        keys = [k for k in WASTE_CLASS_KEYS if k in classes[0]] + list(overall)
        return report.to_csv([{**c, **overall} for c in classes], keys).rstrip("\n")
    n_batches = result["batches"]
    head = (
        f"{result['source']}: {result['requests']:,} requests in {n_batches:,} static "
        f"batch{'es' if n_batches != 1 else ''} of {result['batch']:,}"
    )
    if "prompt_tokens" in result:
        head += f" (prompt {result['prompt_tokens']})"
    rows = [
        ["tokens needed", f"{result['tokens_needed']:,}"],
        ["slots used (batch x longest gen)", f"{result['slots_used']:,}"],
        ["wasted slots", f"{result['wasted_slots']:,}"],
        ["waste", _pct(result["waste_fraction"])],
    ]
    for q in (50, 90, 99):
        if f"e2e_p{q}_s" in result:
            rows.append([f"E2E p{q} (s)", _s(result[f"e2e_p{q}_s"])])
    lines = [head, report.table(["", "value"], rows, "lr")]
    if timed and result.get("classes"):
        crow = [
            [c["class"], c["gen_tokens"], _s(c["ttft_in_batch_s"]), _s(c["e2e_in_batch_s"]), c["alone_batch"],
             _s(c["e2e_alone_s"]), f"{c['slowdown']:.2f}x"]
            for c in result["classes"]
        ]
        headers = ["class", "gen", "TTFT (s)", "E2E in batch (s)", "alone: batch", "E2E alone (s)", "slowdown"]
        lines += ["", report.table(headers, crow, "lrrrrrr"), ""]
        lines.append(
            f"{result['model']} on {result['card']}, return policy {result['return_policy']}: the shortest requests are "
            f"{result['short_request_slowdown']:.2f}x slower in the mixed batch than in a batch of their own"
        )
    elif timed:
        lines.append(f"{result['model']} on {result['card']}, return policy {result['return_policy']}; batches run back to back")
    return "\n".join(lines)


# ---- simulate -------------------------------------------------------------------------------
def _ms_trio(d, name):
    vals = [d.get(f"{name}_p{q}_s") for q in (50, 90, 99)]
    return " / ".join("-" if v is None else f"{v * 1e3:.2f}" for v in vals)


def server_line(server: dict) -> str:
    """One line saying how the continuous server is configured (schedule, budget, pool, costs)."""
    parts = [server["schedule"]]
    if server["max_num_batched_tokens"] is not None:
        parts.append(f"max {server['max_num_batched_tokens']:,} batched tokens")
    if server["kv_pool_source"] == "unlimited":
        parts.append("KV pool unlimited")
    else:
        pool = f"KV pool {server['kv_capacity_tokens']:,} tokens"
        if server["kv_pool_source"] == "gpu_memory_utilization":
            b = server["kv_pool_bytes"]
            pool += f" ({b['gpu_memory_utilization']:g} x {b['memory_bytes'] / GiB:.1f} GiB)"
        parts.append(pool)
    if server["max_model_len"] is not None:
        parts.append(f"max_model_len {server['max_model_len']:,}")
    scale = server.get("pass_time_scale")
    parts.append(f"{server['pass_cost']} passes" + (f" at {scale:g}x their GPU time" if scale else ""))
    moved = (server.get("loop_terms") or {}).get("transferred_from")
    if moved:  # roofline.pass_costs.transferred_loop_terms: say that no run on this card set them
        parts.append(f"the loop's terms fitted on {moved}, carried over (with this card's probe tables where "
                     "committed; docs/serving.md, \"Leave one card out\")")
    return "continuous server: " + ", ".join(parts)


def simulate_view(result: dict, fmt: str) -> str:
    names = [n for n in ("static", "continuous") if n in result]
    if fmt == "json":
        return report.to_json({k: v for k, v in result.items() if k != "per_request"})
    if fmt == "csv":
        keys = SIMULATE_KEYS + [k for k in SIMULATE_EXTRA_KEYS if k in result["continuous"]]
        rows = [{"server": name, **{k: result[name].get(k) for k in keys}} for name in names]
        return report.to_csv(rows, ["server"] + keys).rstrip("\n")
    meta = result["meta"]

    def trio(d, name):
        return " / ".join("-" if d[f"{name}_p{q}_s"] is None else _s(d[f"{name}_p{q}_s"]) for q in (50, 90, 99))

    def row(label, fn):
        return [label] + [fn(result[n], n) for n in names]

    co = result["continuous"]
    rows = [
        row("throughput (tok/s)", lambda d, n: report.thousands(d["throughput_tok_s"])),
        row("TTFT p50 / p90 / p99 (s)", lambda d, n: trio(d, "ttft")),
        row("TPOT p50 / p90 / p99 (ms)", lambda d, n: _ms_trio(d, "tpot")),
        row("E2E p50 / p90 / p99 (s)", lambda d, n: trio(d, "e2e")),
        row("mean slot occupancy", lambda d, n: _pct(d["mean_occupancy"])),
        row("waste (idle slot-steps)", lambda d, n: _pct(d["waste_fraction"])),
        row("idle slot-steps", lambda d, n: f"{d['idle_slot_steps']:,}"),
        row("passes (prefills + steps)", lambda d, n: f"{d['passes']:,}"),
        row("makespan (s)", lambda d, n: _s(d["makespan_s"])),
        row("max running / preemptions",
            lambda d, n: f"{d['max_running']:,} / {d['preemptions']:,}" if n == "continuous" else "-"),
    ]
    if co.get("rejected"):
        rows.append(row("rejected (never servable)", lambda d, n: f"{d['rejected']:,}" if n == "continuous" else "-"))
    if "slo_attainment" in co:
        rows.append(row("requests meeting the SLO", lambda d, n: _pct(d["slo_attainment"])))
        rows.append(row("goodput (req/s)", lambda d, n: f"{d['goodput_req_s']:,.2f}"))
    head = (f"{meta['requests']:,} requests ({meta['source']}, arrivals {meta['arrivals']}) on {meta['model']} / "
            f"{meta['card']}, {meta['batch']} slots")
    if "static" in result:
        head += f"; static return policy {meta['static_return_policy']}"
    lines = [head, server_line(meta["server"]), report.table([""] + names, rows, "l" + "r" * len(names))]
    spread = co.get("pass_time_spread")
    if spread:
        lo, hi = spread["pass_time_scales"]
        nominal = meta["server"].get("pass_time_scale", 1.0)

        def span(key, scale, digits, unit):
            a, b = spread[key]
            return f"{a * scale:,.{digits}f}-{b * scale:,.{digits}f} {unit}"

        lines.append(f"continuous, every pass's GPU time {lo / nominal - 1:+.0%} .. {hi / nominal - 1:+.0%}: "
                     f"TTFT p99 {span('ttft_p99_s', 1, 3, 's')}, TPOT p99 {span('tpot_p99_s', 1e3, 2, 'ms')}, "
                     f"throughput {span('throughput_tok_s', 1, 0, 'tok/s')}, "
                     f"preemptions {spread['preemptions'][0]:,}-{spread['preemptions'][1]:,}")
    if "slo_attainment" in co:
        limits = [f"TTFT <= {co['slo_ttft_s']:g} s" if co["slo_ttft_s"] is not None else None,
                  f"TPOT <= {co['slo_tpot_s'] * 1e3:g} ms" if co["slo_tpot_s"] is not None else None]
        lines.append("SLO: " + " and ".join(x for x in limits if x) + " per request")
    if result.get("classes"):
        def cell(c, key):
            return "-" if c.get(key) is None else _s(c[key])

        crow = [[c["gen_tokens"], f"{c['requests']:,}"] + [cell(c, f"{n}_ttft_p50_s") for n in names]
                + [cell(c, f"{n}_e2e_p50_s") for n in names] for c in result["classes"]]
        if len(names) == 2:
            headers = ["gen", "requests", "TTFT p50 static (s)", "continuous", "E2E p50 static (s)", "continuous"]
        else:
            headers = ["gen", "requests", f"TTFT p50 {names[0]} (s)", f"E2E p50 {names[0]} (s)"]
        lines += ["", report.table(headers, crow)]
    return "\n".join(lines)


# ---- choose ---------------------------------------------------------------------------------
def _limit_text(limits: dict) -> str:
    parts = []
    if limits["ttft_max_s"] is not None:
        parts.append(f"TTFT <= {limits['ttft_max_s']:g} s")
    if limits["tpot_max_s"] is not None:
        parts.append(f"TPOT <= {limits['tpot_max_s'] * 1e3:g} ms")
    if limits["min_user_tok_s"] is not None:
        parts.append(f">= {limits['min_user_tok_s']:g} tok/s per user")
    headroom = limits.get("memory_headroom") or 0.0
    parts.append(f"fits in {100 * (1 - headroom):g}% of memory" if headroom else "fits in memory")
    parts.append(f"batch <= {limits['max_batch']}")
    return ", ".join(parts)


def choose_view(choice, fmt: str) -> str:
    """A Choice, or a TPChoice (several tensor-parallel degrees: a table of each, then the best)."""
    data = choice.as_dict()
    if fmt == "json":
        return report.to_json(data)
    if "tp_options" in data:
        if fmt == "csv":
            rows = [{k: o[k] for k in ("tp", *CHOOSE_KEYS, "throughput_tok_s_per_gpu", "gpu_s_per_token")}
                    for o in data["tp_options"]]
            return report.to_csv(rows).rstrip("\n")
        rows = [[o["tp"], f"{o['batch']:,}", report.thousands(o["throughput_tok_s"]),
                 report.thousands(o["throughput_tok_s_per_gpu"]), f"{o['gpu_s_per_token'] * 1e3:.3f}",
                 report.ms(o["tpot_s"]), _s(o["ttft_s"]), report.gib(o["peak_mem_bytes"]), o["binding"]]
                for o in data["tp_options"]]
        rows += [[int(tp), "-", "-", "-", "-", "-", "-", "-", "no batch meets the limits"]
                 for tp in data["tp_infeasible"]]
        rows.sort(key=lambda r: r[0])
        best = choice.best
        lines = [
            f"{data['meta']['model']} on {data['meta']['card']}, prompt {data['meta']['prompt_tokens']}, gen "
            f"{data['meta']['gen_tokens']}: largest batch with {_limit_text(data['limits'])}, per tensor-parallel degree",
            report.table(["tp", "batch", "throughput (tok/s)", "per GPU (tok/s)", "GPU-ms per token", "TPOT (ms)",
                          "TTFT (s)", "peak mem per GPU (GiB)", "binding"], rows, "rrrrrrrrl"),
            f"best: tp {best.tp} at batch {best.batch:,}, the fewest GPU-seconds per token "
            f"({best.gpu_s_per_token * 1e3:.3f} GPU-ms; the cost of a token is this times a GPU-second's price)",
        ]
        return "\n".join(lines)
    if fmt == "csv":
        row = {k: data[k] for k in CHOOSE_KEYS}
        row.update({k: v for k, v in data["limits"].items()})
        return report.to_csv([row]).rstrip("\n")
    meta = data["meta"]
    rows = [
        ["batch", f"{data['batch']:,}"],
        ["throughput (tok/s)", report.thousands(data["throughput_tok_s"])],
        ["TTFT (s)", _s(data["ttft_s"])],
        ["TPOT (ms)", report.ms(data["tpot_s"])],
        ["per user (tok/s)", report.thousands(data["per_user_tok_s"])],
        ["peak memory (GiB)", report.gib(data["peak_mem_bytes"])],
        ["binding", data["binding"]],
    ]
    lines = [
        f"{meta['model']} on {meta['card']}, prompt {meta['prompt_tokens']}, gen {meta['gen_tokens']}: "
        f"largest batch with {_limit_text(data['limits'])}",
        report.table(["", "value"], rows, "lr"),
    ]
    nxt = data["next"]
    if nxt is not None:
        lines.append(
            f"batch {nxt['batch']} would break {', '.join(data['binding_all'])}: TTFT {_s(nxt['ttft_s'])} s, "
            f"TPOT {report.ms(nxt['tpot_s'])} ms, {report.thousands(nxt['per_user_tok_s'])} tok/s per user, "
            f"{nxt['peak_mem_bytes'] / GiB:.2f} GiB of {meta['memory_bytes'] / GiB:.1f} GiB"
        )
    else:
        lines.append(f"every batch up to --max-batch {data['limits']['max_batch']} meets the limits")
    return "\n".join(lines)


# ---- choose-server --------------------------------------------------------------------------
def _slo_text(slo: dict) -> str:
    q = slo["slo_percentile"]
    parts = []
    if slo["slo_ttft_s"] is not None:
        parts.append(f"TTFT p{q} <= {slo['slo_ttft_s']:g} s")
    if slo["slo_tpot_s"] is not None:
        parts.append(f"TPOT p{q} <= {slo['slo_tpot_s'] * 1e3:g} ms")
    return " and ".join(parts)


def choose_server_view(choice, fmt: str) -> str:
    """A roofline.server_choice.ServerChoice: one row per candidate, then the best."""
    data = choice.as_dict()
    if fmt == "json":
        return report.to_json(data)
    q = data["slo"]["slo_percentile"]
    keys = ["card", "tp", "max_num_seqs", "capacity_req_s", "best_rate_req_s", "best_rate_req_s_per_gpu", "binding"]
    at = [f"ttft_p{q}_s", f"tpot_p{q}_s", "throughput_tok_s", "max_running", "preemptions"]
    if fmt == "csv":
        rows = [{**{k: c[k] for k in keys}, **{k: (c["at_best"] or {}).get(k) for k in at}} for c in data["candidates"]]
        return report.to_csv(rows, keys + at).rstrip("\n")

    def num(x, fmt_="{:,.2f}"):
        return "-" if x is None else fmt_.format(x)

    rows = []
    for c in data["candidates"]:
        b = c["at_best"] or {}
        rows.append([c["card"], c["tp"], f"{c['max_num_seqs']:,}", num(c["capacity_req_s"]), num(c["best_rate_req_s"]),
                     num(c["best_rate_req_s_per_gpu"]), num(b.get(f"ttft_p{q}_s"), "{:.3f}"),
                     num(None if b.get(f"tpot_p{q}_s") is None else b[f"tpot_p{q}_s"] * 1e3),
                     num(b.get("throughput_tok_s"), "{:,.0f}"), c["binding"]])
    lines = [
        f"{data['meta']['model']}, {data['meta']['requests']:,} requests ({data['meta']['source']}, Poisson arrivals "
        f"seed {data['meta']['seed']}): the highest arrival rate with {_slo_text(data['slo'])}",
        report.table(["card", "tp", "max seqs", "capacity (req/s)", "best rate (req/s)", "per GPU", f"TTFT p{q} (s)",
                      f"TPOT p{q} (ms)", "throughput (tok/s)", "next rate breaks"], rows, "lrrrrrrrrl"),
    ]
    best = data["best"]
    if best is None:
        lines.append("no candidate meets the SLOs at any rate swept: relax them, or serve with more GPUs")
    else:
        b = best["at_best"]
        lines.append(
            f"best: {best['card']} tp {best['tp']} max_num_seqs {best['max_num_seqs']:,} at {best['best_rate_req_s']:.3g} "
            f"req/s ({best['best_rate_req_s_per_gpu']:.3g} per GPU, {best['utilization']:.0%} of capacity): TTFT "
            f"p{q} {b[f'ttft_p{q}_s']:.3f} s, TPOT p{q} "
            f"{b[f'tpot_p{q}_s'] * 1e3:.2f} ms, {b['slo_attainment'] * 100:.1f}% of requests within both; the next rate "
            f"breaks {best['binding']}")
        lines.append(server_line(best["server"]))
        spread = data["meta"].get("pass_time_spread")
        if spread:
            x, r = spread["fraction"], best["best_rate_req_s"]

            def rel(v):
                return "none meets the SLOs" if v is None else f"{v:.3g} req/s ({v / r - 1:+.1%})"

            pct = f"{x * 100:g}%"
            lines.append(f"every pass's GPU time {pct} slower: {rel(spread['best_rate_req_s_slower'])}; "
                         f"{pct} faster: {rel(spread['best_rate_req_s_faster'])} (a GPU off its price by that "
                         "much moves the answer this far)")
    return "\n".join(lines)

