"""The one script the GPU machine runs: ceilings once, then each engine's decode sweep.

    PYTHONUNBUFFERED=1 python3 -m calibrate.gpu_job --out "$OUT" 2>&1 | tee "$OUT/log.txt"

writes ``$OUT/ceilings-<card>.json`` and ``$OUT/measurements-<card>-<engine>.csv`` (rewritten
after every point). ``--resume`` continues files already in ``--out``; ``--budget-s`` stops
cleanly before a point that would start after that many seconds, so a time limit never costs a
half-written file. Ends with a short table of what was measured.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "calibration-out"))
    ap.add_argument("--card", default="h200")
    ap.add_argument("--engines", default="graph,hf-eager", help="comma list, run in this order")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--hf-models", default=None, help="models for hf-eager only (default: --models)")
    ap.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--disable-cudnn-sdpa", action="store_true",
                    help="diagnostic: torch.backends.cuda.enable_cudnn_sdp(False) before measuring")
    ap.add_argument("--budget-s", type=float, default=None, help="stop starting new points after this")
    args = ap.parse_args(argv)

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
    batches = [int(b) for b in _csv_list(args.batches)]
    ceilings = not args.no_ceilings
    paths = []
    failed = False
    for engine in _csv_list(args.engines):
        models = _csv_list(args.hf_models) if engine == "hf-eager" and args.hf_models else _csv_list(args.models)
        t0 = time.monotonic()
        print(f"=== {engine}: models {models}, batches {batches}, prompt {args.prompt}, gen {args.gen}", flush=True)
        try:
            path = run_calibration(
                card=args.card, models=models, engine=engine, batches=batches,
                prompt_tokens=args.prompt, gen_tokens=args.gen, out_dir=out, device=args.device,
                resume=args.resume, measure_ceilings=ceilings, deadline=deadline,
            )
        except Exception:  # noqa: BLE001 - one engine's failure must not cost the others' run
            traceback.print_exc()
            print(f"=== {engine}: FAILED (points measured so far are in {out})", flush=True)
            failed = True
            path = out / f"measurements-{args.card}-{engine}.csv"
        ceilings = False  # once per job
        print(f"=== {engine}: {time.monotonic() - t0:.1f} s wall", flush=True)
        paths.append(path)
    print(f"=== total {time.monotonic() - t_start:.1f} s wall", flush=True)
    for path in paths:
        if not path.exists():
            continue
        print(f"\n{path.name}")
        print(f"{'model':<14} {'batch':>5} {'ttft_s':>8} {'tpot_ms':>8} {'p10':>7} {'p90':>7} {'tok/s':>9} {'peak_GiB':>8}")
        for r in read_measurements(path):
            if not r.ok:
                print(f"{r.model:<14} {r.batch:>5} OOM")
                continue
            peak = "" if r.peak_mem_gib is None else f"{r.peak_mem_gib:.2f}"
            print(f"{r.model:<14} {r.batch:>5} {r.ttft_s:>8.4f} {r.tpot_s * 1e3:>8.3f} "
                  f"{r.tpot_p10_s * 1e3:>7.3f} {r.tpot_p90_s * 1e3:>7.3f} {r.batch / r.tpot_s:>9,.0f} {peak:>8}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
