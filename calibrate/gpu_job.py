"""The one script the GPU machine runs: ceilings once, then each engine's decode sweep.

    PYTHONUNBUFFERED=1 python3 -m calibrate.gpu_job --out "$OUT" 2>&1 | tee "$OUT/log.txt"

writes ``$OUT/ceilings-<card>.json`` and ``$OUT/measurements-<card>-<engine>.csv`` (rewritten
after every point). ``--resume`` continues files already in ``--out``; ``--budget-s`` stops
cleanly before a point that would start after that many seconds, so a time limit never costs a
half-written file. Ends with a short table of what was measured.

A grid of prompts x batches (each prompt climbs its batches until the first out-of-memory):

    python3 -m calibrate.gpu_job --out "$OUT" --grid default --engines graph \
        --models qwen2.5-1.5b,qwen2.5-7b,llama-3.1-8b \
        --heldout-models qwen2.5-0.5b,qwen2.5-3b --heldout-prompts 512,8192 --budget-s 540

``--prompts 128,2048`` and ``--gen 64`` (one for all) or ``--gen 128,32`` (one per prompt) set it
by hand. Held-out models go to ``$OUT/heldout/`` (same card and engine names, so ``roofline
compare`` reads them as they are). ``--estimate`` prints what the job would cost on an H200 (no
GPU, no torch needed) and exits.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

DEFAULT_MODELS = ["qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-0.5b", "llama-3.1-8b"]
DEFAULT_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    return [int(t) for t in _csv_list(text)]


def _parser() -> argparse.ArgumentParser:
    from calibrate.grid import DEFAULT_TTFT_MAX_TOKENS, DEFAULT_WARMUP_PREFILL_MAX_TOKENS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "calibration-out"))
    ap.add_argument("--card", default="h200")
    ap.add_argument("--engines", default="graph,hf-eager", help="comma list, run in this order")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--hf-models", default=None, help="models for hf-eager only (default: --models)")
    ap.add_argument("--grid", choices=["default"], default=None,
                    help="prompts, gens and batches of calibrate.grid.DEFAULT_GRID (flags below override)")
    ap.add_argument("--batches", default=None, help=f"comma list (default {','.join(map(str, DEFAULT_BATCHES))})")
    ap.add_argument("--prompt", type=int, default=128, help="one prompt length (v0.1 flag)")
    ap.add_argument("--prompts", default=None, help="comma list of prompt lengths (overrides --prompt)")
    ap.add_argument("--gen", default=None, help="tokens generated: one for all prompts, or one per prompt (default 128)")
    ap.add_argument("--heldout-models", default="", help="models measured after --models, into OUT/heldout/")
    ap.add_argument("--heldout-prompts", default=None, help="their prompts (default: the main ones)")
    ap.add_argument("--heldout-gen", default=None, help="their gen lengths (default: the main ones)")
    ap.add_argument("--heldout-batches", default=None, help="their batches (default: the main ones)")
    ap.add_argument("--ttft-max-tokens", type=int, default=DEFAULT_TTFT_MAX_TOKENS,
                    help="time the prefill only while batch x prompt <= this; above, fill the cache without it")
    ap.add_argument("--warmup-prefill-max-tokens", type=int, default=DEFAULT_WARMUP_PREFILL_MAX_TOKENS,
                    help="skip the untimed warm-up prefill above this many tokens")
    ap.add_argument("--max-seconds-per-point", type=float, default=None,
                    help="skip a prompt's larger batches once a point would take longer than this")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--disable-cudnn-sdpa", action="store_true",
                    help="diagnostic: torch.backends.cuda.enable_cudnn_sdp(False) before measuring")
    ap.add_argument("--budget-s", type=float, default=None, help="stop starting new points after this")
    ap.add_argument("--estimate", action="store_true", help="print the estimated cost of the job and exit")
    ap.add_argument("--speeds", default="h200", help="what --estimate assumes: h200, cpu-2core or cpu-2core-loaded")
    return ap


def _phases(args) -> list[dict]:
    """[{name, models, hf_models, prompts, gens, batches, out}]: the main sweep, then the held-out one."""
    from calibrate.grid import DEFAULT_GRID

    grid = DEFAULT_GRID if args.grid == "default" else None
    prompts = _ints(args.prompts) if args.prompts else (list(grid.prompts) if grid else [args.prompt])
    gens = _ints(args.gen) if args.gen else (list(grid.gens) if grid and not args.prompts else [128])
    batches = _ints(args.batches) if args.batches else (list(grid.batches) if grid else DEFAULT_BATCHES)
    out = Path(args.out)
    main = {"name": "main", "models": _csv_list(args.models),
            "hf_models": _csv_list(args.hf_models) if args.hf_models else None,
            "prompts": prompts, "gens": gens, "batches": batches, "out": out}
    phases = [main]
    if _csv_list(args.heldout_models):
        held_prompts = _ints(args.heldout_prompts) if args.heldout_prompts else prompts
        if args.heldout_gen:
            held_gens = _ints(args.heldout_gen)
        elif held_prompts == prompts:
            held_gens = gens
        else:  # the main gen at the same prompt where there is one, else the main gen nearest below
            pairs = dict(zip(prompts, gens if len(gens) == len(prompts) else gens * len(prompts)))
            held_gens = [pairs.get(p) or pairs[max([q for q in pairs if q <= p] or [min(pairs)])] for p in held_prompts]
        phases.append({"name": "held-out", "models": _csv_list(args.heldout_models), "hf_models": None,
                       "prompts": held_prompts, "gens": held_gens,
                       "batches": _ints(args.heldout_batches) if args.heldout_batches else batches,
                       "out": out / "heldout"})
    return phases


def _estimate(args, phases) -> int:
    from calibrate.configs import load_model_config
    from calibrate.grid import SPEEDS, Grid, ModelSize, estimate_grid, format_estimate

    sp = SPEEDS[args.speeds]
    total = 0.0
    for engine in _csv_list(args.engines):
        for ph in phases:
            models = ph["hf_models"] if engine == "hf-eager" and ph["hf_models"] else ph["models"]
            grid = Grid.of(ph["prompts"], ph["gens"], ph["batches"])
            sizes = {m: ModelSize.from_config(m, load_model_config(m)) for m in models}
            rows = estimate_grid(sizes, engine, grid, sp, args.ttft_max_tokens, args.warmup_prefill_max_tokens)
            print(f"--- {ph['name']}: {engine}")
            print(format_estimate(rows, engine, sp))
            total += sum(r["total_s"] for r in rows)
    print(f"=== estimated total {total:.0f} s ({total / 60:.1f} min) of measuring, "
          "plus about 6 s of start-up and the ceilings (5-15 s)")
    if _csv_list(args.engines).count("hf-eager"):
        print("hf-eager is estimated with cuDNN SDPA off (--disable-cudnn-sdpa); with it on (torch 2.11 on "
              "Hopper) every new KV length costs about 35-70 ms more per step")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    phases = _phases(args)
    if args.estimate:
        return _estimate(args, phases)

    from calibrate.runner import run_calibration
    from calibrate.timing import environment, nvidia_smi, torch_device
    from roofline.measurements import read_measurements

    t_start = time.monotonic()
    deadline = None if args.budget_s is None else t_start + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment(torch_device(args.device))
    print("environment:", env, flush=True)
    if args.device.startswith("cuda"):
        print("nvidia-smi:", nvidia_smi("name,driver_version,memory.total,clocks.sm,clocks.max.sm,"
                                        "clocks.mem,power.limit,mig.mode.current"), flush=True)
    if args.disable_cudnn_sdpa:
        from calibrate.runner import disable_cudnn_attention

        disable_cudnn_attention()
        print("diagnostic: cuDNN SDPA backend disabled", flush=True)
    ceilings = not args.no_ceilings
    paths = []
    failed = False
    for engine in _csv_list(args.engines):
        for ph in phases:
            models = ph["hf_models"] if engine == "hf-eager" and ph["hf_models"] else ph["models"]
            t0 = time.monotonic()
            print(f"=== {engine} ({ph['name']}): models {models}, prompts {ph['prompts']}, gen {ph['gens']}, "
                  f"batches {ph['batches']}", flush=True)
            path = ph["out"] / f"measurements-{args.card}-{engine}.csv"
            try:
                path = run_calibration(
                    card=args.card, models=models, engine=engine, batches=ph["batches"],
                    prompt_tokens=ph["prompts"], gen_tokens=ph["gens"], out_dir=ph["out"], device=args.device,
                    resume=args.resume, measure_ceilings=ceilings, deadline=deadline,
                    ttft_max_tokens=args.ttft_max_tokens, warmup_prefill_max_tokens=args.warmup_prefill_max_tokens,
                    max_seconds_per_point=args.max_seconds_per_point,
                )
            except Exception:  # noqa: BLE001 - one engine's failure must not cost the others' run
                traceback.print_exc()
                print(f"=== {engine} ({ph['name']}): FAILED (points measured so far are in {ph['out']})", flush=True)
                failed = True
            ceilings = False  # once per job
            print(f"=== {engine} ({ph['name']}): {time.monotonic() - t0:.1f} s wall", flush=True)
            if path not in paths:
                paths.append(path)
    print(f"=== total {time.monotonic() - t_start:.1f} s wall", flush=True)
    for path in paths:
        if path.exists():
            print(f"\n{path}")
            print(summary_table(read_measurements(path)))
    return 1 if failed else 0


def summary_table(rows) -> str:
    lines = [f"{'model':<16} {'prompt':>6} {'gen':>4} {'batch':>5} {'ttft_s':>8} {'tpot_ms':>8} {'p10':>7} "
             f"{'p90':>7} {'tok/s':>9} {'peak_GiB':>8}"]
    for r in rows:
        head = f"{r.model:<16} {r.prompt_tokens:>6} {r.gen_tokens:>4} {r.batch:>5}"
        if not r.ok:
            lines.append(f"{head} OOM")
            continue
        ttft = "" if r.ttft_s is None else f"{r.ttft_s:.4f}"
        peak = "" if r.peak_mem_gib is None else f"{r.peak_mem_gib:.2f}"
        lines.append(f"{head} {ttft:>8} {r.tpot_s * 1e3:>8.3f} {r.tpot_p10_s * 1e3:>7.3f} "
                     f"{r.tpot_p90_s * 1e3:>7.3f} {r.batch / r.tpot_s:>9,.0f} {peak:>8}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
