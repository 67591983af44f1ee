"""How far two measurements of the same stream are apart: the serving loop's noise floor.

Several streams were served twice on the H200 (same model, configuration, stream and seed; a
different call, often a different machine): calls 5-7 and call 10, calls 11 and 12, the fit
streams in call 12 again, three of call 12's streams in call 13. This prints, for every such pair (prefill-first runs), the second
measurement against the first: throughput, TTFT and TPOT p50 / p99, and the preemptions. No
simulator can be closer to one measurement than the measurements are to each other: the spread
is the floor under the replay's errors (docs/serving.md).

A second table does the same for every stream served twice with the same settings in any later call,
on either card (every folder of measurements/serving but the eager prefill's, calls 2 and 4; the
settings compared are SETTINGS, the pool's size too where a run set it, and the stream file's
bytes): each later measurement
against the first, with the second machine's busy time over the first's -- the same requests'
passes, so how much slower or faster it served them -- and how many of its figures differ by more
than issue 14's bounds. A third table replays both measurements of each such pair as compare-serving
does (the shipped loop terms, leave-one-card-out on the H100) and counts on how many of those
measurements (each once) the replay is beyond a bound, beside on how many pairs the later measurement
is beyond it from the first: the replay against the floor the measurements set. Output of the forty-ninth session:
docs/data/cpu/serving-repeatability.txt.

    .venv/bin/python benchmarks/serving_repeatability.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVING = ROOT / "hardware_profiles" / "measurements" / "serving"
#: folder -> the calls it holds, in the order they were measured
FOLDERS = (("h200-graph", "5-7"), ("h200-graph-probe", "10"), ("h200-graph-call11", "11"), ("h200-graph-call12", "12"),
           ("h200-graph-call13-sync", "13"))
KEYS = ("throughput_tok_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
#: the settings two runs must share to count as the same stream served twice (with the model's
#: config, and the pool's size where the run set it rather than sizing it from the GPU's memory)
SETTINGS = ("model", "card", "policy", "max_num_seqs", "max_model_len", "block_size", "kv_pool_source",
            "max_num_batched_tokens", "capture_sizes", "cuda_graphs", "prefill_graphs", "chunk_graphs",
            "decode_attention", "prefill_attention", "host_wait", "dtype")
#: folders of the loop's first, eager prefill (calls 2 and 4): another loop, not compared
EAGER = ("h200-graph-eager-x2", "h200-graph-eager-call4")


def pairs() -> list[tuple[str, str, str, dict, dict]]:
    """(run, first call, later call, first summary, later summary) for every stream served twice or more."""
    from roofline.serving_runs import read_run, run_names

    seen: dict[str, list] = {}
    for folder, call in FOLDERS:
        for name in run_names(SERVING / folder):
            run = read_run(SERVING / folder, name)
            if run.config.get("policy", "prefill-first") == "prefill-first":
                seen.setdefault(name, []).append((call, run.summary))
    out = []
    for name, runs in sorted(seen.items()):
        for (c0, s0), (c1, s1) in zip(runs, runs[1:]):
            out.append((name, c0, c1, s0, s1))
    return out


def _call_number(folder: str) -> float:
    """The device call a folder holds, for ordering (h200-graph: calls 5-7; h200-graph-probe: call 10)."""
    if folder == "h200-graph":
        return 5.0
    if folder == "h200-graph-probe":
        return 10.0
    digits = folder.split("call")[-1].split("-")[0]
    return float(digits) + (0.5 if folder.endswith("-spin") else 0.0)


def _settings(config: dict, stream_file: Path) -> str:
    """The run's settings and its request stream (the stream file's bytes), as one comparable key."""
    import hashlib
    import json

    key = {k: config.get(k) for k in SETTINGS}
    key["stream_sha256"] = hashlib.sha256(stream_file.read_bytes()).hexdigest()
    key["model_config"] = config.get("model_config")
    if config.get("kv_pool_source") == "kv_capacity_tokens":
        key["kv_capacity_tokens"] = config.get("kv_capacity_tokens")
    return json.dumps(key, sort_keys=True)


def same_settings_pairs() -> list[tuple[str, str, str, str, dict, dict]]:
    """(card, run, first folder, later folder, first run's summary, later run's) for every stream
    served again with the same settings in a later call: each later one against the first."""
    from roofline.serving_runs import read_run, run_names

    seen: dict[tuple, list] = {}
    folders = sorted((f.name for f in SERVING.iterdir() if f.is_dir() and f.name not in EAGER),
                     key=lambda f: (_call_number(f), f))
    for folder in folders:
        for name in run_names(SERVING / folder):
            run = read_run(SERVING / folder, name)
            key = _settings(run.config, SERVING / folder / f"stream-{name}.csv")
            seen.setdefault((name, key), []).append((run.config["card"], folder, run.summary))
    out = []
    for (name, _), runs in sorted(seen.items()):
        card, f0, s0 = runs[0]
        out.extend((card, name, f0, f1, s0, s1) for _, f1, s1 in runs[1:])
    return out


def main() -> None:
    from roofline.serving_replay import COMPARED as BOUNDS  # issue 14's acceptance bound on each figure of KEYS

    rows = pairs()
    print(f"{'run':40} {'calls':>8} " + " ".join(f"{k.removesuffix('_s'):>13}" for k in KEYS) + "  preemptions")
    worst = dict.fromkeys(KEYS, 0.0)
    for name, c0, c1, s0, s1 in rows:
        errs = {k: s1[k] / s0[k] - 1 for k in KEYS}
        for k in KEYS:
            worst[k] = max(worst[k], abs(errs[k]))
        print(f"{name:40} {c0 + '/' + c1:>8} " + " ".join(f"{100 * errs[k]:+12.1f}%" for k in KEYS)
              + f"  {s0['preemptions']} / {s1['preemptions']}")
    print(f"{len(rows)} pairs; largest difference: " + ", ".join(f"{k.removesuffix('_s')} {100 * v:.1f}%"
                                                              for k, v in worst.items()))
    print()
    print("Every stream served again with the same settings, on either card (later / first; busy: the later "
          "machine's busy time over the first's, the same requests' passes; x: beyond issue 14's bound)")
    later = same_settings_pairs()
    print(f"{'card':9} {'run':40} {'first':28} {'later':34} {'busy':>6} "
          + " ".join(f"{k.removesuffix('_s'):>16}" for k in KEYS) + "  preemptions")
    beyond = dict.fromkeys(KEYS, 0)
    worst = dict.fromkeys(KEYS, 0.0)
    for card, name, f0, f1, s0, s1 in later:
        errs = {k: s1[k] / s0[k] - 1 for k in KEYS}
        cells = []
        for k in KEYS:
            out = abs(errs[k]) > BOUNDS[k]
            beyond[k] += out
            worst[k] = max(worst[k], abs(errs[k]))
            cells.append(f"{100 * errs[k]:+14.1f}%" + ("x" if out else " "))
        busy = s1["busy_s"] / s0["busy_s"] - 1 if s0.get("busy_s") and s1.get("busy_s") else None
        print(f"{card:9} {name:40} {f0:28} {f1:34} " + (f"{100 * busy:+5.1f}%" if busy is not None else f"{'-':>6}")
              + " " + " ".join(cells) + f"  {s0['preemptions']} / {s1['preemptions']}")
    print(f"{len(later)} pairs; beyond the bound: " + ", ".join(
        f"{k.removesuffix('_s')} {beyond[k]} (largest {100 * worst[k]:.1f}%)" for k in KEYS))
    print()
    print("The same pairs replayed (roofline compare-serving as shipped: each measurement's own replay): TTFT "
          "later / first, and the replay's error against the first and against the later measurement")
    print(f"{'card':9} {'run':40} {'first':28} {'later':34} " + " ".join(
        f"{k.removesuffix('_s') + ' ' + what:>22}" for k in ("ttft_p50_s", "ttft_p99_s")
        for what in ("repeat", "replay-first", "replay-later")))
    rows = replayed(later)
    for (card, name, f0, f1, s0, s1), (e0, e1) in zip(later, rows):
        cells = []
        for k in ("ttft_p50_s", "ttft_p99_s"):
            for err in (s1[k] / s0[k] - 1, e0[k], e1[k]):
                cells.append(f"{100 * err:+21.1f}%" + ("x" if abs(err) > BOUNDS[k] else " "))
        print(f"{card:9} {name:40} {f0:28} {f1:34} " + "".join(cells))
    # each measurement once (a stream served n times is in n - 1 pairs, its first measurement in all of them)
    replays = {}
    for (card, name, f0, f1, _, _), (e0, e1) in zip(later, rows):
        replays[(f0, name)], replays[(f1, name)] = e0, e1
    print(f"beyond the bound: the later measurement from the first, of the {len(later)} pairs; the replay from "
          f"the measurement, of the {len(replays)} measurements in them:")
    for k in KEYS:
        repeat = sum(abs(s1[k] / s0[k] - 1) > BOUNDS[k] for *_, s0, s1 in later)
        replay = sum(abs(e[k]) > BOUNDS[k] for e in replays.values())
        print(f"  {k.removesuffix('_s'):15} {repeat:3} of {len(later)} ({100 * repeat / len(later):4.1f}%)   "
              f"{replay:3} of {len(replays)} ({100 * replay / len(replays):4.1f}%)")


def replayed(later) -> list[tuple[dict, dict]]:
    """(the replay's error against the first measurement, against the later one) by figure of KEYS,
    for every pair of ``same_settings_pairs``: each run replayed once, as ``roofline compare-serving``
    replays it with the shipped loop terms of its card."""
    from roofline.pass_costs import load_loop_terms
    from roofline.serving_replay import compare_rows

    terms, errors = {}, {}

    def error(card: str, folder: str, name: str) -> dict:
        if (folder, name) not in errors:
            if card not in terms:
                terms[card] = load_loop_terms(card=card, engine="graph")
            row = compare_rows(SERVING / folder, terms[card], names=[name])[0]
            errors[(folder, name)] = {k: row[k]["error"] for k in KEYS}
        return errors[(folder, name)]

    return [(error(card, f0, name), error(card, f1, name)) for card, name, f0, f1, _, _ in later]


if __name__ == "__main__":
    main()
