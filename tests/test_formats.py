"""Weight and KV-cache formats: each bits-per-weight figure re-derived from its block layout."""

import pytest

from roofline.errors import RooflineError
from roofline.formats import (
    GGUF_BLOCKS,
    KV_FORMATS,
    WEIGHT_FORMATS,
    _fold,
    bytes_per_kv_element,
    bytes_per_weight,
    gguf_tensor_type,
    kv_format,
    weight_format,
)

FP16 = 2  # bytes of an fp16 scale
FP32 = 4


@pytest.mark.parametrize(
    "name, bits",
    [
        ("bf16", 16), ("fp16", 16), ("fp32", 32),
        ("fp8", 8),  # e4m3, one scale per tensor/channel (not per weight)
        ("int8", 8), ("int8_wo", 8),
        # plain int4, group 128, symmetric: 4 bits + one fp16 scale per 128 weights
        ("int4", 4 + 16 / 128),
        # AWQ (AutoAWQ layout): 4-bit weights, per group of 128 an fp16 scale and a 4-bit zero
        ("awq", 4 + 16 / 128 + 4 / 128),
        # GPTQ: the same qweight/qzeros/scales per group of 128 (g_idx is per input row, not per weight)
        ("gptq", 4 + 16 / 128 + 4 / 128),
        # QLoRA section 3: NF4 in blocks of 64 with an fp32 absmax; double quantisation: 8-bit absmax,
        # one fp32 per 256 blocks
        ("nf4", 4 + 32 / 64), ("nf4_dq", 4 + 8 / 64 + 32 / (64 * 256)),
        # OCP MX v1.0: 32 E2M1 elements share one 8-bit E8M0 scale
        ("mxfp4", (32 * 4 + 8) / 32), ("mxfp8", (32 * 8 + 8) / 32),
        # NVFP4: 16 E2M1 elements share one FP8 E4M3 scale (the per-tensor fp32 scale is not per weight)
        ("nvfp4", (16 * 4 + 8) / 16),
        # llama.cpp ggml-common.h: block_q8_0 = fp16 d + 32 int8 = 34 bytes / 32 weights
        ("q8_0", (FP16 + 32) * 8 / 32),
        # block_q4_0 = fp16 d + 16 bytes of nibbles = 18 bytes / 32
        ("q4_0", (FP16 + 16) * 8 / 32),
        # block_q4_1 = fp16 d + fp16 m + 16 bytes = 20 / 32; q5_0 adds 4 bytes of high bits; q5_1 both
        ("q4_1", (2 * FP16 + 16) * 8 / 32), ("q5_0", (FP16 + 4 + 16) * 8 / 32), ("q5_1", (2 * FP16 + 4 + 16) * 8 / 32),
        # block_q6_K = 128 B ql + 64 B qh + 16 int8 scales + fp16 d = 210 bytes / 256
        ("q6_k", (128 + 64 + 16 + FP16) * 8 / 256),
    ],
)
def test_bits_per_weight_from_the_block_layout(name, bits):
    assert weight_format(name).bits_per_weight == pytest.approx(bits, abs=1e-12)
    assert bytes_per_weight(name) == pytest.approx(bits / 8, abs=1e-12)


@pytest.mark.parametrize(
    "block, bits",
    [
        # ggml-common.h, QK_K = 256 weights per super-block
        ("q4_k", (2 * FP16 + 12 + 128) * 8 / 256),  # d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles = 4.5
        ("q5_k", (2 * FP16 + 12 + 32 + 128) * 8 / 256),  # + 32 bytes of high bits = 5.5
        ("q6_k", (128 + 64 + 16 + FP16) * 8 / 256),  # 6.5625
        ("q3_k", (32 + 64 + 12 + FP16) * 8 / 256),  # hmask, qs, scales, d = 3.4375
        ("q2_k", (16 + 64 + 2 * FP16) * 8 / 256),  # 2.625
        ("q8_0", (FP16 + 32) * 8 / 32),
    ],
)
def test_gguf_block_types(block, bits):
    assert GGUF_BLOCKS[block].bits_per_weight == pytest.approx(bits, abs=1e-12)


# Llama-3.1-8B: 32 layers, hidden 4096, intermediate 14336, 8 KV heads of 128, vocabulary 128256, untied
LLAMA_8B = dict(layers=32, hidden=4096, inter=14336, kv=8 * 128, vocab=128256)


def _llama_8b_bits(ftype: str) -> tuple[float, float]:
    """(block-matrix bits per weight, whole-file bits per weight) under llama.cpp's mix rule."""
    h, i, kv, L, V = (LLAMA_8B[k] for k in ("hidden", "inter", "kv", "layers", "vocab"))
    shapes = {"attn_q": h * h, "attn_k": h * kv, "attn_v": h * kv, "attn_output": h * h,
              "ffn_gate": h * i, "ffn_up": h * i, "ffn_down": h * i}
    body_n = L * sum(shapes.values())
    body = sum(n * GGUF_BLOCKS[gguf_tensor_type(ftype, c, layer, L)].bits_per_weight
               for layer in range(L) for c, n in shapes.items())
    emb = V * h * GGUF_BLOCKS[gguf_tensor_type(ftype, "token_embd")].bits_per_weight
    out = V * h * GGUF_BLOCKS[gguf_tensor_type(ftype, "output")].bits_per_weight
    norms = (2 * L + 1) * h  # f32 norm weights
    return body / body_n, (body + emb + out + 32 * norms) / (body_n + 2 * V * h + norms)


@pytest.mark.parametrize(
    "ftype, readme_bpw",
    # llama.cpp tools/quantize/README.md, Llama-3.1-8B table (whole-file bits/weight)
    [("q4_k_m", 4.8944), ("q5_k_m", 5.7036), ("q4_k_s", 4.6672), ("q5_k_s", 5.5704), ("q6_k", 6.5633), ("q8_0", 8.5008)],
)
def test_llama_cpp_mix_reproduces_the_readme(ftype, readme_bpw):
    linear, whole = _llama_8b_bits(ftype)
    assert whole == pytest.approx(readme_bpw, abs=2e-4)
    fmt = weight_format(ftype)
    assert fmt.linear_bits_per_weight == pytest.approx(linear, abs=1e-4)
    if fmt.name in ("q4_k_m", "q5_k_m", "q4_k_s", "q5_k_s"):
        assert fmt.bits_per_weight == readme_bpw  # the headline is llama.cpp's reported figure


def test_k_m_mix_keeps_output_and_half_the_v_and_down_tensors_at_q6_k():
    L = 32
    assert gguf_tensor_type("Q4_K_M", "output") == "q6_k"
    assert gguf_tensor_type("Q4_K_M", "token_embd") == "q4_k"
    assert gguf_tensor_type("Q4_K_M", "token_embd", tied_embeddings=True) == "q6_k"
    assert gguf_tensor_type("q8_0", "output") == "q8_0"
    raised = [layer for layer in range(L) if gguf_tensor_type("q4_k_m", "ffn_down", layer, L) == "q6_k"]
    assert raised[:4] == [0, 1, 2, 3] and raised[-4:] == [28, 29, 30, 31] and len(raised) == 16
    assert gguf_tensor_type("q4_k_m", "attn_q", 0, L) == "q4_k"
    assert gguf_tensor_type("q4_k_m", "attn_v", 5, L, seventy_b=True) == "q5_k"
    with pytest.raises(RooflineError, match="not a llama.cpp type"):
        gguf_tensor_type("awq", "attn_q")
    with pytest.raises(RooflineError, match="unknown tensor category"):
        gguf_tensor_type("q4_k_m", "attention")


@pytest.mark.parametrize(
    "alias, name",
    [
        ("Q4_K_M", "q4_k_m"), ("q4-k-m", "q4_k_m"), ("Q4_K", "q4_k_m"),  # llama-quantize: Q4_K is an alias for Q4_K_M
        ("Q5_K", "q5_k_m"), ("AWQ", "awq"), ("4bit", "int4"), ("W4A16", "int4"), ("bfloat16", "bf16"),
        ("float16", "fp16"), ("FP8", "fp8"), ("float8_e4m3fn", "fp8"), ("W8A8", "int8"), ("w8a16", "int8_wo"),
        ("GPTQ", "gptq"), ("MXFP4", "mxfp4"), ("NVFP4", "nvfp4"), ("bnb-nf4", "nf4"), ("Q8_0", "q8_0"),
    ],
)
def test_aliases(alias, name):
    assert weight_format(alias).name == name


def test_every_name_and_alias_is_unique():
    seen = {}
    for fmt in WEIGHT_FORMATS:
        for key in (fmt.name, *fmt.aliases):
            assert _fold(key) not in seen, f"{key} of {fmt.name} is also {seen[_fold(key)]}"
            seen[_fold(key)] = fmt.name
    kv_seen = set()
    for fmt in KV_FORMATS:
        for key in (fmt.name, *fmt.aliases):
            assert _fold(key) not in kv_seen
            kv_seen.add(_fold(key))


def test_unknown_format_lists_the_names():
    with pytest.raises(RooflineError, match=r"unknown weight format 'q3_k_xl'; choose one of fp32, bf16, .*q4_k_m"):
        weight_format("q3_k_xl")
    with pytest.raises(RooflineError, match="unknown KV-cache format 'fp4'"):
        kv_format("fp4")


def test_every_format_has_a_source_and_a_known_compute_path():
    for fmt in WEIGHT_FORMATS:
        assert fmt.source.strip() and fmt.layout.strip() and fmt.applies_to.strip(), fmt.name
        assert fmt.compute in ("fp32", "bf16", "fp16", "fp8", "int8", "fp4"), fmt.name
        assert fmt.fallback in ("bf16", "fp16"), fmt.name
        assert 2 < fmt.bits_per_weight <= 32
        if fmt.weight_only:
            assert fmt.compute in ("bf16", "fp16"), fmt.name  # weight-only: the activation dtype


@pytest.mark.parametrize(
    "name, available, dtype",
    [
        ("fp8", ["bf16", "fp16", "fp8", "int8"], "fp8"),  # Hopper/Ada: W8A8 on fp8 tensor cores
        ("fp8", ["bf16", "fp16", "int8"], "bf16"),  # Ampere: weight-only
        ("nvfp4", ["bf16", "fp8", "fp4"], "fp4"),
        ("nvfp4", ["bf16", "fp8"], "bf16"),
        ("awq", ["bf16", "fp16", "fp8", "fp4"], "fp16"),  # always weight-only
        ("q4_k_m", ["bf16", "fp16"], "fp16"),  # Apple GPU: no int8 tensor path
    ],
)
def test_compute_dtype(name, available, dtype):
    assert weight_format(name).compute_dtype(available) == dtype


def test_hf_formats_leave_embeddings_in_16_bits_and_gguf_does_not():
    assert weight_format("awq").embedding_bits == weight_format("awq").lm_head_bits == 16
    q4 = weight_format("q4_k_m")
    assert q4.embedding_bits == GGUF_BLOCKS["q4_k"].bits_per_weight and q4.lm_head_bits == GGUF_BLOCKS["q6_k"].bits_per_weight


@pytest.mark.parametrize(
    "name, bits",
    [
        ("bf16", 16), ("fp16", 16), ("f16", 16), ("fp32", 32), ("fp8", 8), ("fp8_e5m2", 8), ("int8", 8),
        ("q8_0", (FP16 + 32) * 8 / 32),  # llama.cpp --cache-type-k q8_0: block_q8_0
        ("q4_0", (FP16 + 16) * 8 / 32),
        ("q5_1", (2 * FP16 + 4 + 16) * 8 / 32),
    ],
)
def test_kv_formats(name, bits):
    assert kv_format(name).bits_per_element == pytest.approx(bits)
    assert bytes_per_kv_element(name) == pytest.approx(bits / 8)


# ---- issue 10: the formats wired through the model's bytes, the scenario and the CLI ----
def test_a_gguf_file_size_from_its_blocks_by_hand():
    """llama-2-7b in Q4_0: every layer matrix and the untied token embedding in block_q4_0 (18 bytes per
    32 weights), output.weight in q6_k (210 bytes per 256), the norms in the other dtype (bf16 here)."""
    from roofline.model_spec import load_model

    spec = load_model("llama-2-7b")
    h, inter, layers, vocab = 4096, 11008, 32, 32000
    matrices = layers * (4 * h * h + 3 * h * inter)
    norms = layers * 2 * h + h
    by_hand = matrices * 18 / 32 + vocab * h * 18 / 32 + vocab * h * 210 / 256 + norms * 2
    assert spec.weight_bytes("q4_0") == pytest.approx(by_hand, rel=1e-12)
    assert spec.weight_bytes("Q4_0") == spec.weight_bytes("gguf_q4_0")  # names as people write them
    # a decode step reads all but the embedding table (a row gather)
    assert spec.decode_weight_bytes("q4_0") == pytest.approx(by_hand - vocab * h * 18 / 32, rel=1e-12)
    # TheBloke/Llama-2-7B-GGUF lists llama-2-7b.Q4_0.gguf at 3.83 GB: our count of the same tensors
    assert spec.weight_bytes("q4_0") / 1e9 == pytest.approx(3.83, abs=0.01)


@pytest.mark.parametrize("fmt, linear_bits, head_bits", [
    ("bf16", 16, 16), ("fp8", 8, 16), ("int8", 8, 16),
    ("int4", 4 + 16 / 128, 16),                # fp16 scale per group of 128; LM head left in 16 bits
    ("awq", 4 + 16 / 128 + 4 / 128, 16),      # + a 4-bit zero per group
    ("gptq", 4 + 16 / 128 + 4 / 128, 16),
    ("nvfp4", 4 + 8 / 16, 16),                # E4M3 scale per 16
    ("mxfp4", 4 + 8 / 32, 16),                # E8M0 scale per 32
    ("q8_0", 34 * 8 / 32, 34 * 8 / 32),        # Q8_0 files keep output.weight in q8_0
    ("q6_k", 210 * 8 / 256, 210 * 8 / 256),
    ("q4_k_m", 4.7975, 210 * 8 / 256),        # the mix's block matrices (Llama-3.1-8B), output.weight q6_k
    ("q5_k_m", 5.6532, 210 * 8 / 256),
])
def test_weight_bytes_take_each_formats_bits_per_tensor_category(fmt, linear_bits, head_bits):
    from roofline.model_spec import load_model

    spec = load_model("qwen2.5-1.5b")  # tied: the embedding is the LM head
    matrices = spec.body_linear_params
    other = spec.weight_bytes(fmt) - matrices * linear_bits / 8 - spec.lm_head_params * head_bits / 8
    assert other == pytest.approx(spec.weight_bytes("bf16") - (matrices + spec.lm_head_params) * 2, rel=1e-9)


def test_gpt_oss_in_its_own_mxfp4_quantises_the_experts_only():
    from roofline.model_spec import load_model

    spec = load_model("gpt-oss-20b")
    experts = spec.moe_layers * spec.num_experts * spec.routed_expert_weight_params
    saved = spec.weight_bytes("bf16") - spec.weight_bytes("mxfp4")
    assert saved == pytest.approx(experts * (2 - (4 + 8 / 32) / 8), rel=1e-12)


def test_kv_formats_set_the_cache_bytes():
    from roofline.model_spec import load_model

    spec = load_model("llama-3.1-8b")
    per_token_elements = 32 * 2 * 8 * 128  # layers x (K, V) x KV heads x head width
    assert spec.kv_bytes_per_token("q8_0") == pytest.approx(per_token_elements * 34 / 32)
    assert spec.kv_bytes_per_token("int4") == per_token_elements * 0.5  # LMDeploy quant_policy=4
    assert spec.kv_bytes_per_token("fp8") == per_token_elements


def test_the_cli_takes_every_format_by_the_names_people_use():
    import json

    from click.testing import CliRunner

    from cli import main

    for fmt in ("bf16", "fp16", "fp8", "int8", "int4", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "awq", "gptq",
                "mxfp4", "nvfp4", "Q4_K_M", "4bit", "bfloat16"):
        r = CliRunner().invoke(main, ["predict", "--card", "rtx4090", "--model", "llama-3.1-8b", "--batches", "1",
                                      "--weight-dtype", fmt, "--format", "json"])
        assert r.exit_code == 0, (fmt, r.output)
        assert json.loads(r.output)["meta"]["weight_dtype"] == weight_format(fmt).name
    r = CliRunner().invoke(main, ["predict", "--card", "rtx4090", "--model", "llama-3.1-8b", "--weight-dtype", "q3_x"])
    assert r.exit_code == 2 and "unknown weight format 'q3_x'" in r.output
    r = CliRunner().invoke(main, ["predict", "--card", "rtx4090", "--model", "llama-3.1-8b", "--kv-dtype", "awq"])
    assert r.exit_code == 2 and "unknown KV-cache format 'awq'" in r.output


def test_units_dtype_bytes_defers_to_the_formats():
    from roofline.units import dtype_bytes, kv_dtype_name, weight_dtype_name, weight_storage_bytes

    assert dtype_bytes("q8_0") == 34 / 32 and dtype_bytes("int4") == 0.5  # a 4-bit KV element
    assert weight_storage_bytes("int4").linear == (4 + 16 / 128) / 8  # a 4-bit weight with its group scale
    assert weight_storage_bytes("awq").embedding is None  # left in the model's 16-bit dtype
    assert weight_storage_bytes("q4_0").embedding == 18 / 32
    assert weight_dtype_name("Q5_K_M") == "q5_k_m" and kv_dtype_name("float16") == "fp16"
    with pytest.raises(RooflineError, match="kv_dtype: unknown dtype 'nvfp4' for the KV cache"):
        kv_dtype_name("nvfp4")
