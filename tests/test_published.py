"""Published measurements: the reader rejects malformed rows, every shipped CSV validates, the
hold-out split follows its rule, and a few transcribed values match their sources."""

from __future__ import annotations

import csv
import io
import math

import pytest

from roofline.errors import RooflineError
from roofline.published import (
    COLUMNS,
    ENGINES,
    OPTIONAL_COLUMNS,
    PUBLISHED_DIR,
    counts,
    expected_reserved,
    load_published,
    points_to_dicts,
    read_published,
    select,
)

GOOD = {
    "source_url": "https://github.com/ggml-org/llama.cpp/discussions/4167",
    "source_title": "Performance of llama.cpp on Apple Silicon M-series",
    "published": "2026-04-05",
    "engine": "llama.cpp",
    "engine_version": "8e672ef (1550)",
    "card": "apple-m2-max-38c",
    "card_as_named": "M2 Max (38 GPU cores)",
    "model": "llama-2-7b",
    "model_as_named": "LLaMA 7B v2 Q4_0",
    "weight_format": "q4_0",
    "kv_dtype": "fp16",
    "tp": "1",
    "batch": "1",
    "prompt_tokens": "0",
    "gen_tokens": "128",
    "metric": "decode_tok_s_per_seq",
    "value": "65.95",
    "unit": "tok/s",
    "reserved": "no",
    "notes": "tg128",
}


def _csv(tmp_path, rows: list[dict[str, str]], name: str = "llama.cpp.csv", header=None):
    header = header or list(COLUMNS)
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)
    path = tmp_path / name
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def _bad(**changes) -> dict[str, str]:
    return {**GOOD, **changes}


# ---- the reader -----------------------------------------------------------------------------------


def test_good_row_reads_and_converts_to_base_units(tmp_path):
    (p,) = read_published(_csv(tmp_path, [GOOD]))
    assert p.card == "apple-m2-max-38c" and p.tp == 1 and p.batch == 1 and p.gpu_count == 1
    assert p.reserved is False and p.kv_dtype == "fp16" and p.context_depth == 0
    assert p.tpot_s == pytest.approx(1 / 65.95, rel=1e-12)


def test_total_throughput_divides_by_batch_and_ms_become_seconds(tmp_path):
    rows = [
        _bad(metric="decode_tok_s_total", batch="16", value="400", prompt_tokens="512", gen_tokens="32"),
        _bad(metric="tpot_s", unit="ms", value="12.5", prompt_tokens="128"),
        _bad(metric="ttft_s", unit="ms", value="30", prompt_tokens="2048", gen_tokens="1"),
        _bad(metric="output_tok_s_total", unit="tok/s/gpu", value="1000", tp="4", batch="64",
             prompt_tokens="128", gen_tokens="128", card="h100-sxm", reserved="no"),
    ]
    total, tpot, ttft, per_gpu = read_published(_csv(tmp_path, rows))
    assert total.tpot_s == pytest.approx(16 / 400)
    assert tpot.tpot_s == pytest.approx(0.0125) and tpot.base_value == pytest.approx(0.0125)
    assert ttft.base_value == pytest.approx(0.030) and ttft.tpot_s is None
    assert per_gpu.base_value == pytest.approx(4000.0)  # per-GPU figure times the 4 GPUs
    assert per_gpu.tpot_s is None  # prefill is inside a throughput figure: no per-step time


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(metric="decode_tok_s"), "metric: 'decode_tok_s' is not one of"),
        (dict(unit="ms"), "unit: 'ms' is not one of tok/s"),
        (dict(value="-3"), "value: must be a finite number > 0"),
        (dict(value="nan"), "value: must be a finite number > 0"),
        (dict(value="fast"), "value: 'fast' is not a number"),
        (dict(batch="0"), "batch: must be >= 1"),
        (dict(tp="1.5"), "tp: '1.5' is not a whole number"),
        (dict(gen_tokens="0"), "gen_tokens: a decode_tok_s_per_seq row needs gen_tokens > 0"),
        (dict(metric="prefill_tok_s", prompt_tokens="0"), "prompt_tokens: a prefill_tok_s row needs"),
        (dict(metric="decode_tok_s_total", batch=""), "batch: a decode_tok_s_total row needs"),
        (dict(card="Apple M2 Max"), "card: 'Apple M2 Max' must be a lower-case id"),
        (dict(weight_format="Q4_0"), "weight_format: 'Q4_0' is not one of"),
        (dict(published="April 2026"), "published: 'April 2026' is not YYYY"),
        (dict(source_url="discussion 4167"), "source_url: 'discussion 4167' is not an http(s) address"),
        (dict(source_title=" "), "source_title: must not be blank"),
        (dict(reserved="maybe"), "reserved: 'maybe' is not one of yes, no"),
        (dict(reserved="yes"), "reserved: card 'apple-m2-max-38c' from this source must be reserved=no"),
        (dict(card="apple-m2-ultra-76c"), "reserved: card 'apple-m2-ultra-76c' from this source must be reserved=yes"),
        (dict(engine="vllm"), "engine: 'vllm' in a file named for 'llama.cpp'"),
    ],
)
def test_malformed_rows_name_file_line_and_column(tmp_path, changes, message):
    path = _csv(tmp_path, [GOOD, _bad(**changes)])
    with pytest.raises(RooflineError) as err:
        read_published(path)
    text = str(err.value)
    assert text.startswith(f"{path}:3: "), text  # header is line 1, the good row line 2
    assert message in text, text


def test_optional_columns_are_checked_too(tmp_path):
    header = list(COLUMNS) + list(OPTIONAL_COLUMNS)
    ok = _bad(gpus="2", backend="cuda", flash_attn="yes", context_depth="4096", batching="static", value_sd="0.5")
    (p,) = read_published(_csv(tmp_path, [ok], header=header))
    assert (p.gpu_count, p.backend, p.flash_attn, p.context_depth, p.batching) == (2, "cuda", True, 4096, "static")
    for bad, message in [(dict(gpus="1", tp="2"), "gpus: 1 is fewer than tp=2"),
                         (dict(backend="opencl"), "backend: 'opencl' is not one of"),
                         (dict(batching="dynamic"), "batching: 'dynamic' is not one of")]:
        with pytest.raises(RooflineError, match=message):
            read_published(_csv(tmp_path, [_bad(**{**ok, **bad})], header=header))


def test_header_problems(tmp_path):
    with pytest.raises(RooflineError, match=r":1: missing column\(s\) notes"):
        read_published(_csv(tmp_path, [GOOD], header=[c for c in COLUMNS if c != "notes"]))
    with pytest.raises(RooflineError, match=r":1: unknown column\(s\) speed"):
        read_published(_csv(tmp_path, [GOOD], header=list(COLUMNS) + ["speed"]))
    path = tmp_path / "x.csv"
    path.write_text(",".join(COLUMNS) + "\n", encoding="utf-8")
    with pytest.raises(RooflineError, match="no data rows"):
        read_published(path)
    path.write_text(",".join(COLUMNS) + "\n" + ",".join(GOOD[c] for c in COLUMNS[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(RooflineError, match=r"x.csv:2: 19 cells but the header has 20 columns"):
        read_published(path)


def test_duplicate_point_is_rejected(tmp_path):
    with pytest.raises(RooflineError, match=r":3: metric: the same point as line 2"):
        read_published(_csv(tmp_path, [GOOD, _bad(value="66.0", notes="copied twice")]))


def test_hold_out_rule():
    assert expected_reserved("rtx3090", "https://example.org/")
    assert expected_reserved("l40s", "https://github.com/NVIDIA/TensorRT-LLM/")
    assert expected_reserved("apple-m4-pro-20c", "https://x.org") and expected_reserved("apple-m3-ultra", "https://x.org")
    assert not expected_reserved("apple-m4-max-40c", "https://x.org") and not expected_reserved("apple-m1-7c", "https://x.org")
    assert expected_reserved("h200", "https://buildkite.com/vllm/")
    assert not expected_reserved("h200", "https://github.com/NVIDIA/TensorRT-LLM/blob/main/x.md")
    assert not expected_reserved("h200", "https://developer.nvidia.com/blog/x")
    assert not expected_reserved("h100-sxm", "https://x.org") and not expected_reserved("a100-80gb", "https://x.org")


# ---- the shipped files ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    return load_published()


def test_every_shipped_csv_validates_and_is_named_for_its_engine(shipped):
    files = sorted(PUBLISHED_DIR.glob("*.csv"))
    assert {f.stem for f in files} <= set(ENGINES)
    assert sum(len(read_published(f)) for f in files) == len(shipped)
    assert len(shipped) >= 250
    for p in shipped:
        assert math.isfinite(p.base_value) and p.base_value > 0
        if p.metric in ("decode_tok_s_per_seq", "tpot_s"):
            assert 1e-4 < p.tpot_s < 10, p  # a decode step between 0.1 ms and 10 s


def test_counts_per_reserved_class(shipped):
    held = select(shipped, reserved=True)
    assert len(held) + len(select(shipped, reserved=False)) == len(shipped)
    # floors, not exact totals: adding sources must not break the test, losing them must
    assert len(held) >= 350
    tally = counts(shipped)
    assert sum(tally.values()) == len(shipped)
    assert tally[("llama.cpp", "rtx3090", True)] >= 90
    assert tally[("llama.cpp", "apple-m2-ultra-76c", True)] >= 30
    assert tally[("tensorrt-llm", "l40s", True)] >= 60
    assert tally[("llama.cpp", "apple-m4-max-40c", False)] == 6  # #4167: F16/Q8_0/Q4_0 x PP/TG
    # every Apple Pro/Ultra point is held out, every Max/base point is not
    for p in select(shipped, engine="llama.cpp"):
        if p.card.startswith("apple-"):
            assert p.reserved == ("-pro" in p.card or "-ultra" in p.card), p.card
    engines = {p.engine for p in shipped}
    assert {"llama.cpp", "vllm", "tensorrt-llm", "lmdeploy"} <= engines


def test_dicts_carry_base_units(shipped):
    d = points_to_dicts(select(shipped, engine="lmdeploy", metric="ttft_s")[:1])[0]
    assert d["unit"] == "s" and d["base_value"] == d["value"] and d["tpot_s"] is None


# ---- golden values, each checked against the source row named in the comment ------------------------


def _one(points, **want):
    hits = [p for p in points if all(getattr(p, k) == v for k, v in want.items())]
    assert len(hits) == 1, (want, len(hits))
    return hits[0]


def test_golden_apple_silicon_4167(shipped):
    # discussion #4167 summary table, row "M2 Ultra | 800 | 76": F16 PP 1401.85, F16 TG 41.02, Q4_0 TG 94.27
    m2u = dict(source_url="https://github.com/ggml-org/llama.cpp/discussions/4167", card="apple-m2-ultra-76c")
    assert _one(shipped, **m2u, weight_format="fp16", metric="prefill_tok_s").value == 1401.85
    tg = _one(shipped, **m2u, weight_format="fp16", metric="decode_tok_s_per_seq")
    assert tg.value == 41.02 and tg.reserved and tg.gen_tokens == 128 and tg.prompt_tokens == 0
    assert _one(shipped, **m2u, weight_format="q4_0", metric="decode_tok_s_per_seq").tpot_s == pytest.approx(1 / 94.27)
    # row "M1 | 68 | 7": no F16 columns; Q8_0 TG 7.92
    m1 = dict(source_url=m2u["source_url"], card="apple-m1-7c")
    assert _one(shipped, **m1, weight_format="q8_0", metric="decode_tok_s_per_seq").value == 7.92
    assert not [p for p in shipped if p.source_url == m1["source_url"] and p.card == "apple-m1-7c" and p.weight_format == "fp16"]


def test_golden_cuda_scoreboard_15013(shipped):
    # discussion #15013, no-FA table, row "RTX 5090": pp512 14073.41 ± 115.16, tg128 290.02 ± 1.1, commit 8cf6b42
    p = _one(shipped, card="rtx5090", metric="decode_tok_s_per_seq", flash_attn=False)
    assert (p.value, p.value_sd, p.engine_version) == (290.02, 1.1, "8cf6b42")
    # with-FA table, row "H100 80 GB": tg128 280.74
    assert _one(shipped, card="h100-80gb-unstated", metric="decode_tok_s_per_seq", flash_attn=True).value == 280.74


def test_golden_xiongjiedai_llama3(shipped):
    # XiongjieDai README, NVIDIA Gaming GPUs table, row "4090 24GB | 8B Q4_K_M": tg 512 = 130.58 (notebook: ± 0.66)
    src = "https://github.com/XiongjieDai/GPU-Benchmarks-on-LLM-Inference"
    p = _one(shipped, source_url=src, card="rtx4090", gpus=None, model="llama-3-8b", weight_format="q4_k_m",
             metric="decode_tok_s_per_seq", gen_tokens=512)
    assert (p.value, p.value_sd, p.engine_version) == (130.58, 0.66, "4426e298 (2824)")
    # row "H100 PCIe 80GB * 4 | 70B Q4_K_M": tg 8192 = 23.68, four GPUs in llama.cpp's layer split
    q = _one(shipped, source_url=src, card="h100-pcie", gpus=4, model="llama-3-70b", weight_format="q4_k_m",
             metric="decode_tok_s_per_seq", gen_tokens=8192)
    assert q.value == 23.68 and q.tp == 1 and q.reserved


def test_golden_tensorrt_llm_perf_tables(shipped):
    # perf-overview v0.9.0, "H200 GPUs (FP8)", row "LLaMA 70B | 512 | 2 | 128 | 2048 | 3,963" out tok/s/GPU
    p = _one(shipped, engine="tensorrt-llm", engine_version="v0.9.0", card="h200", model="llama-2-70b",
             metric="output_tok_s_total", prompt_tokens=128, gen_tokens=2048)
    assert (p.value, p.unit, p.tp, p.batch) == (3963, "tok/s/gpu", 2, 512)
    assert p.base_value == 2 * 3963 and not p.reserved  # NVIDIA's own H200 point is for fitting
    # v0.9.0 "Low Latency", "L40S GPUs (FP8)", row "LLaMA 70B | 1 | 4 | 2048 | 673.3" ms
    t = _one(shipped, engine_version="v0.9.0", card="l40s", model="llama-2-70b", metric="ttft_s", prompt_tokens=2048)
    assert (t.value, t.unit, t.tp, t.base_value) == (673.3, "ms", 4, pytest.approx(0.6733))


def test_golden_lmdeploy_static_table(shipped):
    # lmdeploy a100_fp16.md (v0.1.0), "llama2-70b" table, row "64 | 4 | 2048 | 2048 | 930.46 | ... | 0.055 (50%)"
    base = dict(engine="lmdeploy", model="llama-2-70b", batch=64, prompt_tokens=2048, gen_tokens=2048)
    assert _one(shipped, **base, metric="output_tok_s_total").value == 930.46
    assert _one(shipped, **base, metric="tpot_s").tpot_s == 0.055
