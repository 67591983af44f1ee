"""Device call 83's probe: where the graph engine's prefill of a batch goes, pass by pass and kernel by
kernel, for a few (model, prompt, batch) points (evidence for TTFT misses: qwen2.5-0.5b at 3,000 +
72, batch 16, measures 0.185 s where 4,096 + 32 measures 0.166 and the model prices 0.125).

    python3 calibrate/runs/prefill_profile.py OUT.json MODEL:PROMPT:BATCH[:MAXLEN] ...

Each point: the engine (calibrate.graph_engine.GraphEngine) at a static cache of MAXLEN (default
PROMPT + 64) positions; the timed prefill as GraphEngine.measure times it (after one untimed warm-up
forward of the first chunk), then the same prefill twice more (warm), each chunk's wall time; then
one prefill under torch.profiler: every kernel's name (shortened), launches and device time.
OUT.json is written after every point.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def short(name: str) -> str:
    name = name.replace("void ", "").replace("at::native::", "").replace("(anonymous namespace)::", "")
    return re.sub(r"<.*", "", name)[:80]


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from calibrate.configs import load_model_config
    from calibrate.graph_engine import GraphEngine, _batch_slice, prefill
    from calibrate.timing import environment, free_memory, synchronize, torch_device

    out = Path(sys.argv[1])
    dev = torch_device("cuda" if torch.cuda.is_available() else "cpu")
    result = {"probe": "prefill-profile", "environment": environment(dev), "method": __doc__, "points": [], "errors": []}
    engines: dict = {}
    for spec in sys.argv[2:]:
        parts = spec.split(":")
        model, prompt, batch = parts[0], int(parts[1]), int(parts[2])
        max_len = int(parts[3]) if len(parts) > 3 else prompt + 64
        try:
            if model not in engines:
                engines.clear()
                free_memory()
                engines[model] = GraphEngine(load_model_config(model), device=str(dev))
            eng = engines[model]
            st = eng.new_state(batch, max_len)
            step = eng.prefill_chunk_seqs(batch, prompt)
            gen = torch.Generator(device=dev).manual_seed(1)
            ids = torch.randint(0, eng.shapes.vocab, (batch, prompt), device=dev, generator=gen)

            def run(chunks: list | None = None):
                for b0 in range(0, batch, step):
                    b1 = min(batch, b0 + step)
                    synchronize(dev)
                    t0 = time.perf_counter()
                    with torch.inference_mode():
                        logits = prefill(eng.weights, eng.shapes, ids[b0:b1], _batch_slice(st.cache_k, b0, b1),
                                         _batch_slice(st.cache_v, b0, b1), st.cos, st.sin)
                        st.tok[b0:b1].copy_(logits.argmax(dim=-1))
                    synchronize(dev)
                    if chunks is not None:
                        chunks.append([b1 - b0, round(time.perf_counter() - t0, 6)])

            with torch.inference_mode():  # the measure's warm-up: one forward of the first chunk
                logits = prefill(eng.weights, eng.shapes, ids[:step], _batch_slice(st.cache_k, 0, step),
                                 _batch_slice(st.cache_v, 0, step), st.cos, st.sin)
            synchronize(dev)
            timed = []
            for _ in range(3):
                chunks: list = []
                run(chunks)
                timed.append(chunks)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                run()
            kernels: dict = {}
            for ev in prof.events():
                if ev.device_type.name != "CUDA":
                    continue
                cell = kernels.setdefault(short(ev.name), [0, 0.0])
                cell[0] += 1
                cell[1] += ev.device_time * 1e-6
            result["points"].append({
                "model": model, "prompt": prompt, "batch": batch, "max_len": max_len, "chunk_seqs": step,
                "runs": timed, "kernels": sorted(([k, n, round(s, 7)] for k, (n, s) in kernels.items()),
                                                 key=lambda x: -x[2])})
            del st
        except Exception as exc:  # noqa: BLE001 - record and go on
            result["errors"].append({"point": spec, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, separators=(",", ":")))
        tmp.replace(out)
        print(f"{spec} done", flush=True)


if __name__ == "__main__":
    main()
