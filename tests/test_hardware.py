import json
from collections import Counter

import pytest

from roofline.errors import RooflineError
from roofline.hardware import (
    TENSOR_DTYPES,
    CardProfile,
    Figure,
    _fold,
    all_cards,
    card_from_dict,
    card_ids,
    load_card,
    profiles_dir,
)
from roofline.units import GB, GiB, TFLOP

REQUIRED = ["rtx3060", "rtx3090", "rtx4090", "l4", "l40s", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "mi300x"]
NEW = [
    "rtx5090", "rtx5080", "rtx4080", "rtx-pro-6000", "rtx6000-ada", "rtx-a6000", "a40", "l40", "b200", "h100-nvl",
    "mi325x", "mi250x", "jetson-agx-orin-64gb", "epyc-9654", "xeon-8480", "ryzen-9950x",
]
APPLE = [
    "apple-m1-7c", "apple-m1-8c", "apple-m1-pro-14c", "apple-m1-pro-16c", "apple-m1-max-24c", "apple-m1-max-32c",
    "apple-m1-ultra-48c", "apple-m1-ultra-64c", "apple-m2-8c", "apple-m2-10c", "apple-m2-pro-16c", "apple-m2-pro-19c",
    "apple-m2-max-30c", "apple-m2-max-38c", "apple-m2-ultra-60c", "apple-m2-ultra-76c", "apple-m3-8c", "apple-m3-10c",
    "apple-m3-pro-14c", "apple-m3-pro-18c", "apple-m3-max-30c", "apple-m3-max-40c", "apple-m3-ultra-60c",
    "apple-m3-ultra-80c", "apple-m4-8c", "apple-m4-10c", "apple-m4-pro-16c", "apple-m4-pro-20c", "apple-m4-max-32c",
    "apple-m4-max-40c",
]

#: Plausible ranges per kind: memory (GiB), bandwidth (GB/s), bf16 ceiling (TFLOP/s).
RANGES = {
    "gpu": ((8, 300), (100, 10_000), (10, 3000)),
    "soc": ((8, 512), (50, 1000), (1, 100)),
    "cpu": ((16, 8192), (50, 1000), (1, 300)),
}


def _figures(card: CardProfile):
    """Every Figure in a profile, with where it sits."""
    yield "memory", card.memory
    yield "datasheet_bandwidth", card.datasheet_bandwidth
    yield "datasheet_bf16_flops", card.datasheet_bf16_flops
    for name in ("measured_bandwidth", "measured_bf16_flops"):
        if getattr(card, name):
            yield name, getattr(card, name)
    for i, fig in enumerate(card.other_measurements):
        yield f"other_measurements[{i}]", fig
    for dtype, fig in card.tensor_peaks.items():
        yield f"tensor_peaks.{dtype}", fig
    ic = card.interconnect
    if ic:
        for name in ("gpu_to_gpu", "host"):
            link = getattr(ic, name)
            if link:
                yield f"interconnect.{name}", link.bandwidth_per_direction
        if ic.allreduce_latency:
            yield "interconnect.allreduce_latency", ic.allreduce_latency
        for i, fig in enumerate(ic.measured):
            yield f"interconnect.measured[{i}]", fig


def test_required_cards_exist():
    assert set(REQUIRED + NEW + APPLE) <= set(card_ids())


def test_every_profile_file_loads_and_is_listed():
    files = sorted(profiles_dir().glob("*.json"))
    assert len(files) == len(card_ids()) >= 21
    for path in files:
        card = load_card(str(path))
        assert card.id == path.stem, f"{path.name}: id {card.id!r} differs from the file name"


def test_rtx3060_reproduces_the_lessons_balance_point():
    # lesson 01's balance point, quoted in the static-batching lesson: 86.8 FLOP/byte
    card = load_card("rtx3060")
    assert card.balance_point_flop_per_byte == pytest.approx(86.8, abs=0.05)
    assert card.bandwidth_bytes_per_s / GB == pytest.approx(318, abs=1)
    assert card.peak_flop_per_s / 1e12 == pytest.approx(27.6, abs=0.1)


def test_every_figure_has_a_source_and_sane_ceilings():
    for card in all_cards():
        for where, fig in _figures(card):
            assert fig.source.strip(), f"{card.id}: {where} has no source"
        (m_lo, m_hi), (b_lo, b_hi), (f_lo, f_hi) = RANGES[card.device_kind]
        assert m_lo * GiB <= card.memory_bytes <= m_hi * GiB, card.id
        assert b_lo * GB <= card.bandwidth_bytes_per_s <= b_hi * GB, card.id
        assert f_lo * TFLOP <= card.peak_flop_per_s <= f_hi * TFLOP, card.id


def test_balance_points_are_plausible(capsys):
    rows = sorted(all_cards(), key=lambda c: c.balance_point_flop_per_byte)
    with capsys.disabled():
        print("\ncard                      kind  bandwidth GB/s  bf16 TFLOP/s  balance FLOP/byte")
        for c in rows:
            print(f"{c.id:25s} {c.device_kind:4s} {c.bandwidth_bytes_per_s / GB:14,.1f} "
                  f"{c.peak_flop_per_s / TFLOP:13,.1f} {c.balance_point_flop_per_byte:18.1f}")
    for c in rows:
        assert 10 <= c.balance_point_flop_per_byte <= 600, c.id


def test_ids_and_aliases_are_unique_as_compared():
    # load_card folds case, spaces, '-' and '_': two cards must never fold to the same name
    seen = Counter()
    for card in all_cards():
        names = {_fold(card.id)} | {_fold(a) for a in card.aliases}
        assert len(names) == 1 + len(card.aliases), f"{card.id}: an alias repeats the id or another alias"
        seen.update(names)
    assert [n for n, k in seen.items() if k > 1] == []


@pytest.mark.parametrize(
    "written, card_id",
    [
        ("RTX 4090", "rtx4090"), ("4090", "rtx4090"), ("GeForce RTX 5090", "rtx5090"), ("RTX-3060", "rtx3060"),
        ("A100 80GB SXM", "a100-80gb"), ("H100 PCIe", "h100-pcie"), ("H100", "h100-sxm"), ("H100 NVL", "h100-nvl"),
        ("RTX PRO 6000 Blackwell", "rtx-pro-6000"), ("RTX 6000 Ada", "rtx6000-ada"), ("RTX A6000", "rtx-a6000"),
        ("MI300X", "mi300x"), ("Instinct MI325X", "mi325x"), ("B200", "b200"), ("Jetson AGX Orin", "jetson-agx-orin-64gb"),
        ("M2 Max", "apple-m2-max-38c"), ("Apple M3 Max", "apple-m3-max-40c"), ("m3 max 30c", "apple-m3-max-30c"),
        ("M4 Pro", "apple-m4-pro-20c"), ("M1", "apple-m1-8c"), ("M3 Ultra", "apple-m3-ultra-80c"),
        ("EPYC 9654", "epyc-9654"), ("Xeon 8480+", "xeon-8480"), ("Ryzen 9 9950X", "ryzen-9950x"),
    ],
)
def test_names_as_people_write_them(written, card_id):
    assert load_card(written).id == card_id


def test_unknown_card_suggests():
    with pytest.raises(RooflineError, match="did you mean.*rtx3060"):
        load_card("rtx306")


def test_profile_file_errors(tmp_path):
    bad = tmp_path / "card.json"
    bad.write_text(json.dumps({"id": "x", "name": "x"}))
    with pytest.raises(RooflineError, match="memory"):
        load_card(str(bad))
    bad.write_text('{"id": ')
    load_card.cache_clear()
    with pytest.raises(RooflineError, match="not valid JSON"):
        load_card(str(bad))


def _minimal(**extra) -> dict:
    data = json.loads(load_card("h100-sxm").model_dump_json(exclude_none=True))
    data.update(extra)
    return data


@pytest.mark.parametrize(
    "change, message",
    [
        ({"flops": 1}, "flops: Extra inputs are not permitted"),
        ({"kind": "tpu"}, "kind"),
        ({"tensor_peaks": {"fp6": {"value": 1, "unit": "TFLOP/s", "source": "x"}}}, "unknown dtype 'fp6'"),
        ({"tensor_peaks": {"fp8": {"value": 1, "unit": "GB/s", "source": "x"}}}, "not a FLOP/s unit"),
        ({"tensor_peaks": {"bf16": {"value": 500, "unit": "TFLOP/s", "source": "x"}}}, "differs from datasheet_bf16_flops"),
        ({"memory": {"value": 80, "unit": "GB/s", "source": "x"}}, "memory: unit 'GB/s' is not a bytes unit"),
        ({"usable_memory_fraction": {"value": 1.5, "source": "x"}}, "usable_memory_fraction.value"),
        ({"usable_memory_fraction": {"value": 0.75, "source": "x", "raised_to": 0.5}}, "below the default"),
        ({"interconnect": {"gpu_to_gpu": {"kind": "nvlink", "topology": "mesh",
                                          "bandwidth_per_direction": {"value": 1, "unit": "GB/s", "source": "x"}}}}, "needs 'links'"),
        ({"interconnect": {"speed": 1}}, "interconnect.speed: Extra inputs"),
        ({"interconnect": {"allreduce_latency": {"value": 6, "unit": "GB/s", "source": "x"}}}, "not a s unit"),
    ],
)
def test_schema_rejects(change, message):
    with pytest.raises(RooflineError, match=message):
        card_from_dict(_minimal(**change), "card.json")


def test_old_style_profile_still_loads():
    # a profile written before kind/tensor_peaks/interconnect existed: the bf16 ceiling serves every dtype
    data = {k: v for k, v in json.loads(load_card("rtx3090").model_dump_json(exclude_none=True)).items()
            if k in ("id", "name", "memory", "datasheet_bandwidth", "datasheet_bf16_flops")}
    card = card_from_dict(data, "old.json")
    assert card.device_kind == "gpu" and card.usable_memory_bytes == card.memory_bytes
    peak = card.peak_for("fp8")
    assert peak.fallback and peak.dtype == "bf16" and peak.flop_per_s == card.peak_flop_per_s
    assert card.tp_link_bytes_per_s(2) is None


def test_profiles_round_trip_through_json():
    for card in all_cards():
        again = card_from_dict(json.loads(card.model_dump_json(exclude_none=True)), card.id)
        assert again == card


# --- tensor peaks ---------------------------------------------------------------------------

NO_FP8 = {"ampere", "cdna2", "apple-m1", "apple-m2", "apple-m3", "apple-m4", "zen4", "zen5", "sapphire-rapids"}


def test_tensor_peaks_exist_where_the_hardware_has_the_path():
    for card in all_cards():
        peaks = card.tensor_peaks
        assert set(peaks) <= set(TENSOR_DTYPES)
        assert {"bf16", "fp16"} <= set(peaks), card.id
        arch = card.architecture
        if arch in NO_FP8:
            assert "fp8" not in peaks and "fp4" not in peaks, card.id
        if arch in ("ada", "hopper", "cdna3", "blackwell"):
            assert "fp8" in peaks, card.id
        assert ("fp4" in peaks) == (arch == "blackwell"), card.id


def test_tensor_peaks_are_ordered_sensibly():
    for card in all_cards():
        p = {k: v.base for k, v in card.tensor_peaks.items()}
        if "fp8" in p:
            assert p["fp8"] >= p["bf16"], card.id
        if "fp4" in p:
            assert p["fp4"] >= p["fp8"], card.id
        if "int8" in p:
            assert p["int8"] >= p["bf16"] * 0.99, card.id
        if "fp32" in p:
            assert p["fp32"] <= p["bf16"] * 1.01, card.id
        # GeForce: the FP32-accumulate rate, half the FP16-accumulate rate (in the note) -> int8 is 4x bf16
        if card.name.startswith("NVIDIA GeForce"):
            assert p["int8"] == pytest.approx(4 * p["bf16"], rel=0.01), card.id


def test_apple_gpus_run_fp16_at_the_fp32_rate():
    for cid in APPLE:
        p = load_card(cid).tensor_peaks
        assert set(p) == {"fp32", "fp16", "bf16"}
        assert p["fp16"].base == p["fp32"].base == p["bf16"].base


def test_apple_figures_derive_from_cores_and_clock():
    # metal-benchmarks: 128 FP32 ALUs per core; M1 8-core at 1.278 GHz = 2617 GFLOPS, M2 10-core at 1.398 GHz = 3579
    assert load_card("apple-m1-8c").peak_flop_per_s == pytest.approx(8 * 128 * 2 * 1.278e9, rel=1e-3)
    assert load_card("apple-m2-10c").peak_flop_per_s / 1e9 == pytest.approx(3579, rel=1e-3)
    assert load_card("apple-m2-ultra-76c").peak_flop_per_s / 1e9 == pytest.approx(27200, rel=2e-3)


def test_binned_apple_chips_keep_their_own_bandwidth():
    bw = {cid: load_card(cid).bandwidth_bytes_per_s / GB for cid in APPLE}
    assert bw["apple-m3-max-30c"] == 300 and bw["apple-m3-max-40c"] == 400
    assert bw["apple-m4-max-32c"] == 410 and bw["apple-m4-max-40c"] == 546
    assert bw["apple-m4-pro-16c"] == bw["apple-m4-pro-20c"] == 273
    assert bw["apple-m3-pro-18c"] == 150 and bw["apple-m2-pro-19c"] == 200
    assert bw["apple-m3-ultra-80c"] == 819 and bw["apple-m1-8c"] == 68.25


def test_apple_usable_memory_is_macos_default_wired_limit():
    big = load_card("apple-m2-max-38c")  # 96 GB: 3/4
    assert big.usable_memory_bytes == pytest.approx(0.75 * 96 * GiB)
    small = load_card("apple-m1-8c")  # 16 GB: 2/3 (llama.cpp logs 11453.25 MB = 10922.67 MiB)
    assert small.usable_memory_bytes / 2**20 == pytest.approx(10922.67, abs=1)
    assert "iogpu.wired_limit_mb" in big.usable_memory_fraction.raise_how
    assert load_card("h100-sxm").usable_memory_bytes == load_card("h100-sxm").memory_bytes


def test_cpu_peaks_derive_from_cores_clock_and_flop_per_cycle():
    epyc, xeon, ryzen = load_card("epyc-9654"), load_card("xeon-8480"), load_card("ryzen-9950x")
    assert epyc.tensor_peaks["fp32"].base == pytest.approx(96 * 2.4e9 * 32, rel=1e-3)  # Zen 4: 2 x 256-bit FMA
    assert epyc.tensor_peaks["bf16"].base == pytest.approx(2 * epyc.tensor_peaks["fp32"].base, rel=1e-3)
    assert xeon.tensor_peaks["bf16"].base == pytest.approx(56 * 2.0e9 * 1024, rel=1e-3)  # AMX: 1024 bf16 ops/cycle
    assert xeon.tensor_peaks["int8"].base == pytest.approx(2 * xeon.tensor_peaks["bf16"].base, rel=1e-3)
    assert ryzen.tensor_peaks["fp32"].base == pytest.approx(16 * 4.3e9 * 64, rel=1e-3)  # Zen 5: 2 x 512-bit FMA
    assert ryzen.datasheet_bandwidth.base == pytest.approx(2 * 5600e6 * 8)
    assert epyc.datasheet_bandwidth.base == pytest.approx(12 * 4800e6 * 8)


def test_peak_for_bf16_is_the_models_ceiling():
    h100 = load_card("h100-sxm")
    peak = h100.peak_for("bfloat16")
    assert (peak.flop_per_s, peak.dtype, peak.fallback) == (h100.peak_flop_per_s, "bf16", False)
    assert "measured" in peak.note


def test_peak_for_scales_other_dtypes_by_the_measured_bf16_efficiency():
    h100 = load_card("h100-sxm")  # measured 789.24 of 989.4 bf16
    fp8 = h100.peak_for("float8_e4m3fn")
    assert fp8.dtype == "fp8" and not fp8.fallback
    assert fp8.flop_per_s == pytest.approx(1978.9e12 * 789.24 / 989.4)
    l4 = load_card("l4")  # no measurement: the datasheet figure as is
    assert l4.peak_flop_per_s_for("fp8") == pytest.approx(242.5e12)


def test_peak_for_falls_back_to_bf16_and_says_so():
    a100 = load_card("a100-80gb")
    peak = a100.peak_for("fp8")
    assert peak.fallback and peak.dtype == "bf16" and peak.flop_per_s == a100.peak_flop_per_s
    assert "no fp8 matmul peak" in peak.note
    with pytest.raises(RooflineError, match="unknown compute dtype 'fp7'"):
        a100.peak_for("fp7")


@pytest.mark.parametrize(
    "card_id, fmt, dtype, fallback",
    [
        ("rtx5090", "nvfp4", "fp4", False),
        ("b200", "MXFP4", "fp4", False),
        ("h100-sxm", "nvfp4", "bf16", True),   # no fp4 on Hopper: weight-only, dequantised to bf16
        ("h100-sxm", "fp8", "fp8", False),
        ("a100-80gb", "fp8", "bf16", True),    # Ampere runs FP8 checkpoints weight-only (Marlin)
        ("a100-80gb", "int8", "int8", False),  # W8A8 SmoothQuant on int8 tensor cores
        ("h100-sxm", "AWQ", "fp16", False),    # weight-only by design, not a fallback
        ("rtx4090", "Q4_K_M", "int8", False),  # llama.cpp MMQ: int8 tensor cores
        ("apple-m2-max-38c", "q4_k_m", "fp16", True),
        ("apple-m2-max-38c", "bf16", "bf16", False),
    ],
)
def test_peak_for_format(card_id, fmt, dtype, fallback):
    peak = load_card(card_id).peak_for_format(fmt)
    assert (peak.dtype, peak.fallback) == (dtype, fallback)
    assert peak.flop_per_s == load_card(card_id).peak_flop_per_s_for(dtype)


# --- interconnect ---------------------------------------------------------------------------


def test_tensor_parallel_link_bandwidth_per_topology():
    h100 = load_card("h100-sxm")  # NVSwitch: every peer gets the whole 450 GB/s per direction
    assert h100.tp_link_bytes_per_s(2) == h100.tp_link_bytes_per_s(8) == pytest.approx(450 * GB)
    mi300x = load_card("mi300x")  # full mesh of 7 links: a pair shares one
    assert mi300x.tp_link_bytes_per_s(2) == pytest.approx(64 * GB)
    assert mi300x.tp_link_bytes_per_s(8) == pytest.approx(448 * GB)
    rtx3090 = load_card("rtx3090")  # NVLink bridge for a pair, PCIe 4.0 x16 beyond
    assert rtx3090.tp_link_bytes_per_s(2) == pytest.approx(56.25 * GB)
    assert rtx3090.tp_link_bytes_per_s(4) == pytest.approx(31.5 * GB, rel=0.01)
    assert load_card("rtx4090").tp_link_bytes_per_s(2) == pytest.approx(31.5 * GB, rel=0.01)
    assert load_card("rtx5090").tp_link_bytes_per_s(2) == pytest.approx(63 * GB, rel=0.01)
    assert h100.tp_link_bytes_per_s(1) is None
    assert load_card("apple-m4-max-40c").tp_link_bytes_per_s(2) is None


def test_every_gpu_card_has_an_interconnect_with_sources():
    for card in all_cards():
        if card.device_kind == "gpu":
            assert card.interconnect is not None and card.interconnect.host is not None, card.id
    assert load_card("h100-sxm").interconnect.allreduce_latency_s == pytest.approx(6e-6)


def test_summary_keeps_its_keys_and_adds_kind():
    s = load_card("apple-m3-max-40c").summary()
    assert {"card", "memory_bytes", "bandwidth_bytes_per_s", "peak_flop_per_s", "balance_point_flop_per_byte"} <= set(s)
    assert s["kind"] == "soc" and s["architecture"] == "apple-m3"
    assert s["usable_memory_bytes"] == pytest.approx(0.75 * 128 * GiB)


def test_figure_dimension():
    assert Figure(value=1, unit="ms", source="x").dimension == "s"
    assert Figure(value=1, unit="GiB", source="x").dimension == "bytes"


# ---- issue 10: the weight format picks the matmul peak the step model uses ----
def test_fp8_weights_on_an_h100_run_at_its_fp8_tensor_peak():
    from roofline.calibration import Calibration
    from roofline.model_spec import load_model
    from roofline.step import StepModel

    h100 = load_card("h100-sxm")
    spec = load_model("llama-3.1-8b")
    bf16 = StepModel(spec, h100, Calibration.uncalibrated("h100-sxm"))
    fp8 = StepModel(spec, h100, Calibration.uncalibrated("h100-sxm"), weight_dtype="fp8")
    # datasheet 1,978.9 (fp8) vs 989.4 (bf16) TFLOP/s, both scaled by the measured/datasheet bf16 ratio
    ratio = h100.peak_flop_per_s / h100.datasheet_bf16_flops.base
    assert bf16.peak_flop_per_s == pytest.approx(h100.peak_flop_per_s)
    assert fp8.peak_flop_per_s == pytest.approx(1978.9e12 * ratio, rel=1e-9)


def test_fp8_on_an_rtx3060_falls_back_to_the_bf16_ceiling_and_says_so():
    import roofline

    p = roofline.predict("rtx3060", "qwen2.5-1.5b", [1], weight_dtype="fp8", calibration=None)
    meta = p.meta()
    card = load_card("rtx3060")
    assert meta["peak_flop_per_s"] == pytest.approx(card.peak_flop_per_s)
    assert meta["matmul_peak_dtype"] == "bf16"
    assert meta["matmul_peak_note"].startswith("fp8: no fp8 path on rtx3060, runs weight-only at bf16")


def test_gguf_weights_on_cuda_use_the_int8_path_and_on_apple_the_fp16_one():
    from roofline.hardware import matmul_peak

    assert matmul_peak(load_card("rtx4090"), "q4_k_m").dtype == "int8"  # llama.cpp MMQ kernels
    assert matmul_peak(load_card("rtx4090"), "q4_k_m").flop_per_s == pytest.approx(660.6e12 * 170.1 / 165.2, rel=1e-3)
    apple = matmul_peak(load_card("apple-m2-max-38c"), "q4_0")
    assert apple.dtype == "fp16" and apple.fallback


def test_a_calibrations_measured_bf16_ceiling_scales_every_dtype_alike():
    from roofline.hardware import matmul_peak

    h200 = load_card("h200")
    measured = 700e12
    assert matmul_peak(h200, "bf16", measured).flop_per_s == pytest.approx(measured)
    # fp8 keeps its datasheet ratio to bf16 (1,978.9 / 989.4 on Hopper) over the measured bf16 ceiling
    assert matmul_peak(h200, "fp8", measured).flop_per_s == pytest.approx(
        measured * h200.tensor_peaks["fp8"].base / h200.datasheet_bf16_flops.base)


def test_pcie_only_cards_take_the_measured_pcie_allreduce_latency():
    from roofline.hardware import PCIE_ALLREDUCE_LATENCY

    assert PCIE_ALLREDUCE_LATENCY.base == pytest.approx((42.14 + 40.06) / 2 * 1e-6, rel=1e-3)  # NVIDIA/nccl#1530
    assert load_card("l40s").interconnect.allreduce_latency_s == PCIE_ALLREDUCE_LATENCY.base
    assert load_card("h100-sxm").interconnect.allreduce_latency_s == pytest.approx(6e-6)  # its own NVLink figure
    assert load_card("a100-80gb-pcie").interconnect.allreduce_latency_s is None  # an NVLink bridge: not PCIe only


@pytest.mark.parametrize("card_id, bandwidth_gb_s, bf16_tflop_s", [
    ("a100-80gb-pcie", 1935, 312), ("rtx4000-ada", 360, 76.7), ("rtx5000-ada", 576, 261.1),
    ("rtx3070", 448, 40.6), ("rtx3080", 760, 59.5), ("rtx3080ti", 912, 68.2), ("rtx3090ti", 1008, 80.0),
    ("rtx4070ti", 504, 80.2),
])
def test_cards_added_for_the_published_tables(card_id, bandwidth_gb_s, bf16_tflop_s):
    card = load_card(card_id)
    assert card.datasheet_bandwidth.base == bandwidth_gb_s * 1e9
    assert card.datasheet_bf16_flops.base == pytest.approx(bf16_tflop_s * 1e12)
    if "derived" in card.datasheet_bf16_flops.source and card.vendor == "nvidia" and "GeForce" in card.name:
        # GeForce FP16/BF16 tensor with FP32 accumulate: 512 FLOP per SM per clock (the RTX 3090's 71 TFLOPS)
        assert "512 FLOP/clk/SM" in card.datasheet_bf16_flops.source
