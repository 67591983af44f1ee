"""Does scaling the replay's host terms by the run's host probe help on the whole record, or only on
some machines? (docs/serving.md, "choose-server, checked against the real loop": call 138's
overloaded chunked run replays closer without it.)

    .venv/bin/python benchmarks/host_probe_exponent.py

Replays every held-out run benchmarks/fit_serving_loop.py sums up -- the H200's prefill-first runs
with the host probe and its chunked runs with chunk graphs, and every H100 run (leave one card out)
-- with the host terms scaled by the run's host probe over the fit runs' raised to 1 (as shipped),
0.5 (half the way, in log) and 0 (the terms as fitted), and prints how many runs each acceptance
bound holds on; then, as shipped but with each run's probe replaced by the median of the probes of
every run in its folder (one device call's machine: a steadier read of that machine's host, if a
single probe's noise were what misled the replay). No GPU needed. Its output, redirected, is
docs/data/cpu/host-probe-exponent.txt.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

EXPONENTS = (1.0, 0.5, 0.0)


def held_out_rows():
    """(the H200's held-out rows, the H100's rows) with the shipped terms, as fit_serving_loop counts them."""
    import fit_serving_loop as fsl

    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import compare_rows, shipped_folder

    folder = shipped_folder()
    terms = load_loop_terms(card="h200", engine="graph")
    h200 = [r for r in compare_rows(folder, terms) if not r["fitted"]]
    for sub, _ in fsl.OTHERS:
        if sub in fsl.PROBED:
            more = compare_rows(folder.parent / sub, terms, fitted=())
            h200 += [r for r in more if r["policy"] == "prefill-first"
                     or (r["policy"] == "chunked" and sub in fsl.CHUNK_GRAPHS)]
    h100 = []
    for card, sub, _ in fsl.OTHER_CARDS:
        h100 += compare_rows(folder.parent / sub, load_loop_terms(card=card, engine="graph"), fitted=())
    return h200, h100


def counts(rows) -> dict:
    from roofline.serving_replay import COMPARED

    out = {k: sum(abs(r[k]["error"]) <= b for r in rows) for k, b in COMPARED.items() if b is not None}
    out["same preemption"] = sum(bool(r["same_preemption_behaviour"]) for r in rows)
    return out


def folder_medians() -> dict:
    """{(decode_host_s, prefill_host_s) of a run's probe: (the medians over its folder's runs)}."""
    import json
    import statistics

    from roofline.pass_costs import run_host_probe
    from roofline.serving_replay import shipped_folder

    out = {}
    for folder in sorted(shipped_folder().parent.iterdir()):
        probes = []
        for path in sorted(folder.glob("run-*.json")):
            probe = run_host_probe(json.loads(path.read_text())["config"])
            if probe and "decode_host_s" in probe and "prefill_host_s" in probe:
                probes.append(probe)
        if probes:
            pooled = (statistics.median(p["decode_host_s"] for p in probes),
                      statistics.median(p["prefill_host_s"] for p in probes))
            out.update({(p["decode_host_s"], p["prefill_host_s"]): pooled for p in probes})
    return out


def report(label: str) -> None:
    """One line a card: how many held-out runs each bound holds on, the replay as patched now."""
    h200, h100 = held_out_rows()
    for card, rows in (("h200", h200), ("h100-sxm", h100)):
        c = counts(rows)
        print(f"{label}  {card:8s} {len(rows):3d} runs: " + ", ".join(f"{k} {v}" for k, v in c.items()))


def main() -> None:
    import roofline.pass_costs as pc

    shipped = pc.host_ratios
    try:
        for e in EXPONENTS:
            def ratios(terms, probe, e=e):
                r = shipped(terms, probe)
                return None if r is None else tuple(x ** e for x in r)

            pc.host_ratios = ratios  # scaled_for_host looks it up in the module at each call
            report(f"host probe ratio ^ {e:g}")
    finally:
        pc.host_ratios = shipped
    own = pc.run_host_probe
    medians = folder_medians()

    def pooled(config):
        probe = own(config)
        has = probe and "decode_host_s" in probe and "prefill_host_s" in probe
        m = medians.get((probe["decode_host_s"], probe["prefill_host_s"])) if has else None
        return probe if m is None else {**probe, "decode_host_s": m[0], "prefill_host_s": m[1]}

    try:
        pc.run_host_probe = pooled  # serving_replay imports it from the module at each call
        report("folder's median probe  ")
    finally:
        pc.run_host_probe = own


if __name__ == "__main__":
    main()
