"""Write the Apple silicon profiles (hardware_profiles/apple-*.json) from one table.

Run from the repository root: ``python hardware_profiles/tools/apple_silicon.py``. The committed
JSON files are the data; this script only keeps the 30 of them consistent. Every number below
names its source; hardware_profiles/README.md has the resulting table.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent

# --- sources ---------------------------------------------------------------------------------
NEWS = {
    "m1": "Apple Newsroom, 'Introducing M1 Pro and M1 Max' (2021-10-18): M1 Pro 200GB/s, 'nearly 3x M1'; "
          "M1's 68.25 GB/s is its 128-bit LPDDR4X-4266 (4266 MT/s x 16 bytes)",
    "m1-pro": "Apple Newsroom, 'Introducing M1 Pro and M1 Max' (2021-10-18): up to 200GB/s",
    "m1-max": "Apple Newsroom, 'Introducing M1 Pro and M1 Max' (2021-10-18): up to 400GB/s",
    "m1-ultra": "Apple Newsroom, 'Apple unveils M1 Ultra' (2022-03-08): 800GB/s",
    "m2": "Apple Newsroom, 'Apple unveils M2' (2022-06-06): 100GB/s unified memory bandwidth",
    "m2-pro": "Apple Newsroom, 'Apple unveils M2 Pro and M2 Max' (2023-01-17): 200GB/s",
    "m2-max": "Apple Newsroom, 'Apple unveils M2 Pro and M2 Max' (2023-01-17): 400GB/s",
    "m2-ultra": "Apple Newsroom, 'Apple introduces M2 Ultra' (2023-06-05): 800GB/s",
    "m3": "Apple, MacBook Pro (14-inch, M3, Nov 2023) Tech Specs: 100GB/s memory bandwidth",
    "m3-pro": "Apple, MacBook Pro (14-inch, M3 Pro or M3 Max, Nov 2023) Tech Specs: M3 Pro 150GB/s",
    "m3-max": "Apple, MacBook Pro (14-inch, M3 Pro or M3 Max, Nov 2023) Tech Specs: M3 Max with 30-core GPU 300GB/s, "
              "with 40-core GPU 400GB/s",
    "m3-ultra": "Apple, Mac Studio (2025) Tech Specs: M3 Ultra 819GB/s memory bandwidth",
    "m4": "Apple Newsroom, 'Apple introduces M4 chip' (2024-05-07): 120GB/s",
    "m4-pro": "Apple Newsroom, 'Apple introduces M4 Pro and M4 Max' (2024-10-30): M4 Pro 273GB/s",
    "m4-max": "Apple, MacBook Pro (14-inch, M4 Pro or M4 Max, 2024) Tech Specs: M4 Max with 32-core GPU 410GB/s, "
              "with 40-core GPU 546GB/s",
}
CLOCK = {
    "m1-base": (1.278, "philipturner/metal-benchmarks README, Overview table (M1: 1.278 GHz, 2617 GFLOPS F32 = F16)"),
    "m1": (1.296, "philipturner/metal-benchmarks README, Overview table (M1 Pro/Max/Ultra: 1.296 GHz)"),
    "m2": (1.398, "philipturner/metal-benchmarks README, Overview table (M2, M2 Pro, M2 Max: 1.398 GHz; M2: 3579 GFLOPS)"),
    "m3": (1.380, "philipturner/applegpuinfo AppleGPUInfo.swift clock table (M3 generation: 1.380 GHz); sources disagree: "
                  "hmc-tech lists 1.398 GHz for M3 Max, radargit 1.6 GHz"),
    "m4": (1.578, "hoakley, Eclectic Light Company, 'M4 Pro full on: when CPU and GPU draw over 50 W' (2025-01-22): "
                  "powermetrics shows the M4 Pro 20-core GPU at its maximum 1,578 MHz; applied to M4 and M4 Max, which "
                  "were not measured"),
}
ALU = ("128 FP32 ALUs per GPU core, one FMA (2 FLOP) each per clock (philipturner/metal-benchmarks, 'Layout of an M1 GPU "
       "core': 128 ALUs; FP16 issues at the FP32 rate, 'F16 is neither faster nor slower than F32')")
WIRED_SMALL = ("macOS's default GPU working set (MTLDevice.recommendedMaxWorkingSetSize) as llama.cpp prints it at start-up "
               "(ggml_metal_init): 11453.25 MB on 16 GB Macs and 22906.50 MB on 32 GB Macs, i.e. 2/3 of memory")
WIRED_LARGE = ("macOS's default GPU working set (MTLDevice.recommendedMaxWorkingSetSize) as llama.cpp prints it at start-up: "
               "28991.03 MB on a 36 GB M3 Max (ollama/ollama issue #2370), 51539.61 MB on a 64 GB M2 Max, 103079.22 MB on "
               "128 GB, i.e. 3/4 of memory")
RAISE_HOW = ("sudo sysctl iogpu.wired_limit_mb=<MiB> (macOS 14 and later; resets at reboot); Metal's "
             "recommendedMaxWorkingSetSize then reports the new limit")
RAISE_SRC = ("AlexsJones/llmfit PR #754 (verified on an M3 16 GB that recommendedMaxWorkingSetSize follows iogpu.wired_limit_mb); "
             "gpustack/gpustack PR #1516 and instructlab/instructlab PR #308 document the sysctl")

# --- the table: (family, tier, gpu cores, bandwidth GB/s, memory type, memory sizes sold GB) ---
CHIPS = [
    ("m1", "", 7, 68.25, "LPDDR4X-4266", [8, 16]),
    ("m1", "", 8, 68.25, "LPDDR4X-4266", [8, 16]),
    ("m1", "pro", 14, 200, "LPDDR5-6400", [16, 32]),
    ("m1", "pro", 16, 200, "LPDDR5-6400", [16, 32]),
    ("m1", "max", 24, 400, "LPDDR5-6400", [32, 64]),
    ("m1", "max", 32, 400, "LPDDR5-6400", [32, 64]),
    ("m1", "ultra", 48, 800, "LPDDR5-6400", [64, 128]),
    ("m1", "ultra", 64, 800, "LPDDR5-6400", [64, 128]),
    ("m2", "", 8, 100, "LPDDR5-6400", [8, 16, 24]),
    ("m2", "", 10, 100, "LPDDR5-6400", [8, 16, 24]),
    ("m2", "pro", 16, 200, "LPDDR5-6400", [16, 32]),
    ("m2", "pro", 19, 200, "LPDDR5-6400", [16, 32]),
    ("m2", "max", 30, 400, "LPDDR5-6400", [32, 64]),
    ("m2", "max", 38, 400, "LPDDR5-6400", [32, 64, 96]),
    ("m2", "ultra", 60, 800, "LPDDR5-6400", [64, 128, 192]),
    ("m2", "ultra", 76, 800, "LPDDR5-6400", [64, 128, 192]),
    ("m3", "", 8, 100, "LPDDR5-6400", [8, 16, 24]),
    ("m3", "", 10, 100, "LPDDR5-6400", [8, 16, 24]),
    ("m3", "pro", 14, 150, "LPDDR5-6400", [18, 36]),
    ("m3", "pro", 18, 150, "LPDDR5-6400", [18, 36]),
    ("m3", "max", 30, 300, "LPDDR5-6400", [36, 96]),
    ("m3", "max", 40, 400, "LPDDR5-6400", [48, 64, 128]),
    ("m3", "ultra", 60, 819, "LPDDR5-6400", [96, 256]),
    ("m3", "ultra", 80, 819, "LPDDR5-6400", [96, 256, 512]),
    ("m4", "", 8, 120, "LPDDR5X-7500", [16, 24]),
    ("m4", "", 10, 120, "LPDDR5X-7500", [16, 24, 32]),
    ("m4", "pro", 16, 273, "LPDDR5X-8533", [24, 48, 64]),
    ("m4", "pro", 20, 273, "LPDDR5X-8533", [24, 48, 64]),
    ("m4", "max", 32, 410, "LPDDR5X-8533", [36]),
    ("m4", "max", 40, 546, "LPDDR5X-8533", [48, 64, 128]),
]
APPLE_TFLOPS = {("m1", "", 8): "Apple Newsroom, 'Apple unleashes M1' (2020-11-10): 2.6 teraflops"}


def _fig(value, unit, source, note=None):
    d = {"value": value, "unit": unit, "source": source}
    if note:
        d["note"] = note
    return d


def profile(family: str, tier: str, cores: int, bw: float, mem_type: str, sizes: list[int]) -> dict:
    chip = f"{family}-{tier}" if tier else family
    top = max(c for f, t, c, *_ in CHIPS if f == family and t == tier)
    label = f"Apple {family.upper()}{(' ' + tier.capitalize()) if tier else ''}"
    ghz, clock_src = CLOCK["m1-base" if chip == "m1" else family]
    tflops = round(cores * 256 * ghz / 1000, 3)
    derivation = f"derived: {cores} GPU cores x 256 FLOP/clk ({ALU}) x {ghz} GHz ({clock_src})"
    if (family, tier, cores) in APPLE_TFLOPS:
        derivation += f"; {APPLE_TFLOPS[family, tier, cores]}"
    short = f"derived as datasheet_bf16_flops: {cores} cores x 256 FLOP/clk x {ghz} GHz"
    memory = max(sizes)
    others = [s for s in sizes if s != memory]
    small = memory <= 32
    aliases = [f"{chip}-{cores}c", f"{label.lower()} {cores}-core gpu"]
    if cores == top:
        aliases += [chip, label.lower()]
    card = {
        "id": f"apple-{chip}-{cores}c",
        "name": f"{label} ({cores}-core GPU, {memory} GB)",
        "aliases": aliases,
        "vendor": "apple",
        "kind": "soc",
        "architecture": f"apple-{family}",
        "memory_type": f"{mem_type} unified memory",
        "memory": _fig(memory, "GiB", f"Apple tech specs: {label} configurations with {', '.join(map(str, sizes))} GB",
                       f"the largest configuration sold with this chip; also sold with {', '.join(map(str, others))} GB"
                       if others else "the only configuration sold with this chip"),
        "usable_memory_fraction": {
            "value": round(2 / 3, 4) if small else 0.75,
            "source": WIRED_SMALL if small else WIRED_LARGE,
            "note": "the GPU may wire this share of unified memory by default (2/3 up to 32 GB, 3/4 above); "
                    "a 128 GB M5 Max on macOS 26 reported 107.52 GiB (0.84, antirez/ds4 issue #890), so newer "
                    "macOS releases may allow more",
            "raise_how": RAISE_HOW,
            "raised_source": RAISE_SRC,
        },
        "datasheet_bandwidth": _fig(bw, "GB/s", NEWS[chip]),
        "datasheet_bf16_flops": _fig(tflops, "TFLOP/s", derivation,
                                     "FP16 = FP32 rate on the GPU's ALUs (no separate matrix units before M5); bf16 is "
                                     "taken at the same rate (converted to fp32 for arithmetic; no separate figure found)"),
        "tensor_peaks": {
            "fp32": _fig(tflops, "TFLOP/s", short, "GPU FP32 FMA rate"),
            "fp16": _fig(tflops, "TFLOP/s", short, "FP16 issues at the FP32 rate (philipturner/metal-benchmarks); "
                                                  "MLX/Metal simdgroup matrix multiply runs on the same ALUs"),
            "bf16": _fig(tflops, "TFLOP/s", short, "assumed at the FP32 rate"),
        },
        "note": f"{cores}-core GPU at {ghz} GHz. Apple silicon has no int8/fp8 matrix path on the GPU: quantised "
                "formats run weight-only at the fp16 rate. The Neural Engine is not counted (LLM engines use the GPU)",
    }
    return card


def main() -> None:
    for row in CHIPS:
        card = profile(*row)
        path = OUT / f"{card['id']}.json"
        path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(CHIPS)} Apple silicon profiles to {OUT}")


if __name__ == "__main__":
    main()
