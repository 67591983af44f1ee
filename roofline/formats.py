"""Weight and KV-cache storage formats by the names people use.

Each weight format carries its TRUE bits per weight (scales, zeros and other per-group
metadata included) and the matmul path it runs on: the tensor-core dtype whose peak applies
where the hardware has that path (fp8 W8A8 on Ada/Hopper/Blackwell, int8 W8A8, fp4 on
Blackwell), else the activation dtype the weights are dequantised to (weight-only kernels).
``CardProfile.peak_for_format`` (roofline/hardware.py) combines the two.

Bits per weight are derived from block layouts wherever a layout fixes them:
llama.cpp's ``block_q4_0`` is an fp16 scale plus 32 four-bit weights = 18 bytes / 32 weights
= 4.5 bits. Mixed llama.cpp types (Q4_K_M, Q5_K_M, ...) put some tensors at higher precision;
:func:`gguf_tensor_type` reproduces llama.cpp's rule and ``bits_per_weight`` is the whole-file
figure llama.cpp's quantize README reports for Llama-3.1-8B.

Stdlib only: importable from GPU code paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import RooflineError

LLAMA_CPP_COMMON_H = "llama.cpp ggml/src/ggml-common.h, block structs"
LLAMA_CPP_QUANT = "llama.cpp src/llama-quant.cpp, llama_tensor_get_type_impl"
LLAMA_CPP_README = (
    "llama.cpp tools/quantize/README.md, Quantization table for meta-llama/Llama-3.1-8B "
    "(bits/weight of the whole GGUF file)"
)


@dataclass(frozen=True)
class GgufBlock:
    """One llama.cpp block type: ``block_bytes`` of storage for ``block_weights`` weights."""

    name: str
    block_bytes: int
    block_weights: int
    layout: str

    @property
    def bits_per_weight(self) -> float:
        return self.block_bytes * 8 / self.block_weights


#: llama.cpp block types (ggml/src/ggml-common.h). QK_K = 256 for the k-quants.
GGUF_BLOCKS: dict[str, GgufBlock] = {
    b.name: b
    for b in (
        GgufBlock("f32", 4, 1, "one float32"),
        GgufBlock("f16", 2, 1, "one float16"),
        GgufBlock("bf16", 2, 1, "one bfloat16"),
        GgufBlock("q8_0", 34, 32, "fp16 d + 32 x int8 qs"),
        GgufBlock("q4_0", 18, 32, "fp16 d + 16 bytes qs (32 x 4 bit)"),
        GgufBlock("q4_1", 20, 32, "fp16 d + fp16 m + 16 bytes qs"),
        GgufBlock("q5_0", 22, 32, "fp16 d + 4 bytes qh (high bits) + 16 bytes qs"),
        GgufBlock("q5_1", 24, 32, "fp16 d + fp16 m + 4 bytes qh + 16 bytes qs"),
        GgufBlock("q2_k", 84, 256, "16 bytes scales (4-bit scale+min) + 64 bytes qs + fp16 d + fp16 dmin"),
        GgufBlock("q3_k", 110, 256, "32 bytes hmask + 64 bytes qs + 12 bytes scales (6-bit) + fp16 d"),
        GgufBlock("q4_k", 144, 256, "fp16 d + fp16 dmin + 12 bytes scales (8 x 6-bit scale+min) + 128 bytes qs"),
        GgufBlock("q5_k", 176, 256, "fp16 d + fp16 dmin + 12 bytes scales + 32 bytes qh + 128 bytes qs"),
        GgufBlock("q6_k", 210, 256, "128 bytes ql + 64 bytes qh + 16 x int8 scales + fp16 d"),
    )
}


@dataclass(frozen=True)
class WeightFormat:
    """A weight storage format and the matmul path it runs on.

    ``compute`` is the tensor-peak dtype the matmuls run at where the hardware has that path;
    ``fallback`` the dtype they run at otherwise (weights dequantised to the activation dtype).
    ``bits_per_weight`` is the figure for the quantised matrices with every scale and zero
    counted; ``embedding_bits`` / ``lm_head_bits`` are what the token embedding and the output
    projection are stored in (formats that leave them in 16 bits say 16)."""

    name: str
    bits_per_weight: float
    compute: str
    fallback: str
    weight_only: bool
    applies_to: str
    layout: str
    source: str
    aliases: tuple[str, ...] = ()
    linear_bits: float | None = None
    embedding_bits: float = 16.0
    lm_head_bits: float = 16.0
    note: str = ""

    @property
    def bytes_per_weight(self) -> float:
        return self.bits_per_weight / 8

    @property
    def linear_bits_per_weight(self) -> float:
        """Bits per weight of the transformer-block matrices (differs from ``bits_per_weight``
        only for mixes whose headline is a whole-file figure)."""
        return self.linear_bits if self.linear_bits is not None else self.bits_per_weight

    @property
    def stores_embedding(self) -> bool:
        """Whether the format stores an untied token-embedding table itself (llama.cpp's GGUF types:
        token_embd in the file's type); other methods leave it in the model's 16-bit dtype."""
        return self.name in _GGUF_BASE

    def compute_dtype(self, available) -> str:
        """The dtype the matmuls run at on hardware whose matmul paths are ``available``."""
        return self.compute if self.compute in set(available) else self.fallback


@dataclass(frozen=True)
class KvFormat:
    """A KV-cache element format: bits stored per cached element (scales included)."""

    name: str
    bits_per_element: float
    source: str
    engines: str
    aliases: tuple[str, ...] = ()
    note: str = ""

    @property
    def bytes_per_element(self) -> float:
        return self.bits_per_element / 8


def _gguf(name: str) -> float:
    return GGUF_BLOCKS[name].bits_per_weight


_GGUF_COMPUTE_NOTE = (
    "llama.cpp CUDA: ggml_cuda_should_use_mmq picks the MMQ kernels on Turing and newer, which "
    "quantise activations to q8_1 and multiply on int8 tensor cores (ggml/src/ggml-cuda/mmq.cu); "
    "Metal and CPU builds dequantise to f16/f32 or use int8 dot products on the CPU."
)
_HF_EMBED_NOTE = "token embedding and lm_head stay in 16 bits (not quantised by this method)"

WEIGHT_FORMATS: tuple[WeightFormat, ...] = (
    WeightFormat(
        "fp32", 32.0, "fp32", "bf16", False, "all weights", "one float32", "IEEE 754 binary32",
        aliases=("float32", "f32", "float"), embedding_bits=32.0, lm_head_bits=32.0,
    ),
    WeightFormat(
        "bf16", 16.0, "bf16", "bf16", False, "all weights", "one bfloat16", "bfloat16 (8-bit exponent, 7-bit mantissa)",
        aliases=("bfloat16",),
    ),
    WeightFormat(
        "fp16", 16.0, "fp16", "bf16", False, "all weights", "one float16", "IEEE 754 binary16",
        aliases=("float16", "half", "f16"),
    ),
    WeightFormat(
        "fp8", 8.0, "fp8", "bf16", False,
        "linear weights (attention and MLP projections); " + _HF_EMBED_NOTE,
        "one float8 e4m3 per weight + one fp32 scale per tensor (or per output channel)",
        "vLLM docs, Quantization > FP8 W8A8 (per-tensor or per-channel weight scales, dynamic "
        "per-token activation scales; Ampere runs FP8 checkpoints weight-only through Marlin)",
        aliases=("fp8_e4m3", "float8", "float8_e4m3fn", "e4m3", "w8a8_fp8", "fp8_dynamic", "fp8_w8a8"),
        note="a per-channel scale adds 32/in_features bits (0.008 at 4096); not counted",
    ),
    WeightFormat(
        "int8", 8.0, "int8", "bf16", False,
        "linear weights; activations quantised to int8 per token (W8A8); " + _HF_EMBED_NOTE,
        "one int8 per weight + per-channel fp scale",
        "Xiao et al., SmoothQuant (ICML 2023), W8A8; vLLM docs, Quantization > INT8 W8A8",
        aliases=("w8a8", "w8a8_int8", "int8_w8a8", "smoothquant", "sq"),
        note="per-channel scale adds 32/in_features bits; not counted",
    ),
    WeightFormat(
        "int8_wo", 8.0, "bf16", "bf16", True,
        "linear weights; activations stay 16-bit (W8A16, weight-only); " + _HF_EMBED_NOTE,
        "one int8 per weight + per-channel fp scale",
        "TensorRT-LLM docs, weight-only INT8 (W8A16); torchao int8_weight_only",
        aliases=("w8a16", "int8_weight_only", "int8wo", "int8_weight"),
    ),
    WeightFormat(
        "int4", 4.0 + 16 / 128, "bf16", "bf16", True,
        "linear weights, weight-only (W4A16); " + _HF_EMBED_NOTE,
        "4-bit symmetric integers in groups of 128 with one fp16 scale per group: 4 + 16/128",
        "group-wise symmetric INT4 weight-only quantisation (TensorRT-LLM W4A16 groupwise, Marlin kernels)",
        aliases=("4bit", "int4_g128", "w4a16", "int4_wo", "int4_weight_only", "4_bit"),
    ),
    WeightFormat(
        "awq", 4.0 + 16 / 128 + 4 / 128, "fp16", "fp16", True,
        "linear weights, weight-only; " + _HF_EMBED_NOTE,
        "4-bit weights in groups of 128 (qweight, 8 per int32) + one fp16 scale and one 4-bit zero "
        "per group and output column (qzeros packed 8 per int32): 4 + 16/128 + 4/128",
        "Lin et al., AWQ (MLSys 2024), group size 128; AutoAWQ / vLLM AWQ checkpoint layout "
        "(qweight, qzeros, scales tensors)",
        aliases=("awq_int4", "autoawq", "awq_marlin", "awq4"),
    ),
    WeightFormat(
        "gptq", 4.0 + 16 / 128 + 4 / 128, "fp16", "fp16", True,
        "linear weights, weight-only; " + _HF_EMBED_NOTE,
        "4-bit weights in groups of 128 + fp16 scale and 4-bit zero per group and output column "
        "(qweight/qzeros/scales) + g_idx, one int32 per input row",
        "Frantar et al., GPTQ (ICLR 2023); AutoGPTQ / GPTQModel checkpoint layout (qweight, qzeros, "
        "scales, g_idx)",
        aliases=("gptq_int4", "autogptq", "gptq_marlin", "gptq4", "gptq_4bit"),
        note="group size 128 unless the checkpoint says otherwise; g_idx adds 32/out_features bits "
        "(0.008 at 4096), not counted; symmetric checkpoints still store the zeros tensor",
    ),
    WeightFormat(
        "nf4", 4.0 + 32 / 64, "bf16", "bf16", True,
        "linear weights (bitsandbytes Linear4bit), weight-only; " + _HF_EMBED_NOTE,
        "4-bit NormalFloat in blocks of 64 with one fp32 absmax per block: 4 + 32/64",
        "Dettmers et al., QLoRA (NeurIPS 2023) section 3: blocksize 64, 32/64 = 0.5 bits per parameter "
        "for the constants",
        aliases=("bnb_nf4", "bnb_4bit", "bitsandbytes_4bit", "qlora"),
    ),
    WeightFormat(
        "nf4_dq", 4.0 + 8 / 64 + 32 / (64 * 256), "bf16", "bf16", True,
        "linear weights (bitsandbytes Linear4bit with double quantisation), weight-only; " + _HF_EMBED_NOTE,
        "nf4 with the absmax constants quantised to 8 bits in blocks of 256 (one fp32 per block): "
        "4 + 8/64 + 32/(64*256)",
        "Dettmers et al., QLoRA (NeurIPS 2023) section 3, Double Quantization: 0.127 bits per parameter",
        aliases=("bnb_nf4_dq", "nf4_double_quant"),
    ),
    WeightFormat(
        "mxfp4", 4.0 + 8 / 32, "fp4", "bf16", False,
        "the tensors a checkpoint quantises (gpt-oss: MoE expert weights only; attention and "
        "embeddings stay bf16)",
        "FP4 E2M1 elements in blocks of 32 with one shared E8M0 (8-bit power-of-two) scale: 4 + 8/32",
        "OCP Microscaling Formats (MX) Specification v1.0, section 5 (MXFP4: k = 32, E8M0 scale, "
        "E2M1 elements)",
        aliases=("mx_fp4", "mxfp4_e2m1"),
        note="runs on fp4 tensor cores on Blackwell; elsewhere engines dequantise to bf16 (weight-only)",
    ),
    WeightFormat(
        "nvfp4", 4.0 + 8 / 16, "fp4", "bf16", False,
        "linear weights; " + _HF_EMBED_NOTE,
        "FP4 E2M1 elements in blocks of 16 with one FP8 E4M3 scale per block, plus one fp32 scale "
        "per tensor: 4 + 8/16",
        "NVIDIA Technical Blog, 'Introducing NVFP4 for Efficient and Accurate Low-Precision "
        "Inference' (2025): 16-value micro-blocks, E4M3 block scale, FP32 tensor scale",
        aliases=("nv_fp4", "fp4", "nvfp4_e2m1", "w4a4_nvfp4"),
        note="the per-tensor fp32 scale is not counted (32 bits per tensor)",
    ),
    WeightFormat(
        "mxfp8", 8.0 + 8 / 32, "fp8", "bf16", False,
        "linear weights; " + _HF_EMBED_NOTE,
        "FP8 E4M3 elements in blocks of 32 with one E8M0 scale: 8 + 8/32",
        "OCP Microscaling Formats (MX) Specification v1.0, section 5 (MXFP8)",
        aliases=("mx_fp8",),
    ),
    # llama.cpp (GGUF). Pure types: all quantised matrices in one block type; llama.cpp still
    # stores output.weight as q6_k (q8_0 for Q8_0 files), see gguf_tensor_type.
    WeightFormat(
        "q8_0", _gguf("q8_0"), "int8", "fp16", False, "all 2-D weights (norms stay f32)",
        "blocks of 32: fp16 scale + 32 x int8 = 34 bytes / 32 weights",
        f"{LLAMA_CPP_COMMON_H} (block_q8_0); whole-file 8.5008 bpw for Llama-3.1-8B in {LLAMA_CPP_README}",
        aliases=("q8", "gguf_q8_0", "8bit_gguf"), embedding_bits=_gguf("q8_0"), lm_head_bits=_gguf("q8_0"),
        note=_GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q6_k", _gguf("q6_k"), "int8", "fp16", False, "all 2-D weights (norms stay f32)",
        "super-blocks of 256: 128 B low bits + 64 B high bits + 16 int8 scales + fp16 d = 210 bytes",
        f"{LLAMA_CPP_COMMON_H} (block_q6_K); whole-file 6.5633 bpw for Llama-3.1-8B in {LLAMA_CPP_README}",
        aliases=("q6", "gguf_q6_k"), embedding_bits=_gguf("q6_k"), lm_head_bits=_gguf("q6_k"),
        note=_GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q5_k_m", 5.7036, "int8", "fp16", False,
        "q5_k for the matrices, q6_k for attn_v and ffn_down in half the layers (first and last "
        "eighth, every third between) and for output.weight; token_embd q5_k",
        "mix of block_q5_K (5.5 bpw) and block_q6_K (6.5625 bpw)",
        f"{LLAMA_CPP_README}: Q5_K_M 5.7036; mix rule {LLAMA_CPP_QUANT}",
        aliases=("q5_k", "q5km", "gguf_q5_k_m"), linear_bits=5.6532, embedding_bits=_gguf("q5_k"),
        lm_head_bits=_gguf("q6_k"),
        note="linear_bits 5.6532 is the block matrices of Llama-3.1-8B under the mix rule "
        "(gguf_tensor_type); 'Q5_K' is llama-quantize's alias for Q5_K_M. " + _GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q5_k_s", 5.5704, "int8", "fp16", False,
        "q5_k for every matrix except output.weight (q6_k)", "block_q5_K (5.5 bpw)",
        f"{LLAMA_CPP_README}: Q5_K_S 5.5704", aliases=("q5ks",),
        linear_bits=_gguf("q5_k"), embedding_bits=_gguf("q5_k"), lm_head_bits=_gguf("q6_k"),
        note=_GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q4_k_m", 4.8944, "int8", "fp16", False,
        "q4_k for the matrices, q6_k for attn_v and ffn_down in half the layers (first and last "
        "eighth, every third between) and for output.weight; token_embd q4_k",
        "mix of block_q4_K (4.5 bpw) and block_q6_K (6.5625 bpw)",
        f"{LLAMA_CPP_README}: Q4_K_M 4.8944; mix rule {LLAMA_CPP_QUANT}",
        aliases=("q4_k", "q4km", "gguf_q4_k_m"), linear_bits=4.7975, embedding_bits=_gguf("q4_k"),
        lm_head_bits=_gguf("q6_k"),
        note="linear_bits 4.7975 is the block matrices of Llama-3.1-8B under the mix rule "
        "(gguf_tensor_type); 'Q4_K' is llama-quantize's alias for Q4_K_M. " + _GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q4_k_s", 4.6672, "int8", "fp16", False,
        "q4_k; q5_k for attn_v in the first 4 layers and ffn_down in the first eighth; output.weight q6_k",
        "mostly block_q4_K (4.5 bpw)",
        f"{LLAMA_CPP_README}: Q4_K_S 4.6672; mix rule {LLAMA_CPP_QUANT}", aliases=("q4ks",),
        linear_bits=4.5361, embedding_bits=_gguf("q4_k"), lm_head_bits=_gguf("q6_k"),
        note="linear_bits for Llama-3.1-8B under the mix rule. " + _GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q4_0", _gguf("q4_0"), "int8", "fp16", False, "all 2-D weights; output.weight q6_k",
        "blocks of 32: fp16 scale + 16 bytes of 4-bit weights = 18 bytes / 32 weights",
        f"{LLAMA_CPP_COMMON_H} (block_q4_0)", aliases=("gguf_q4_0",),
        embedding_bits=_gguf("q4_0"), lm_head_bits=_gguf("q6_k"), note=_GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q4_1", _gguf("q4_1"), "int8", "fp16", False, "all 2-D weights; output.weight q6_k",
        "blocks of 32: fp16 scale + fp16 min + 16 bytes = 20 bytes / 32 weights",
        f"{LLAMA_CPP_COMMON_H} (block_q4_1)", aliases=("gguf_q4_1",),
        embedding_bits=_gguf("q4_1"), lm_head_bits=_gguf("q6_k"), note=_GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q5_0", _gguf("q5_0"), "int8", "fp16", False, "all 2-D weights; output.weight q6_k",
        "blocks of 32: fp16 scale + 4 bytes high bits + 16 bytes = 22 bytes / 32 weights",
        f"{LLAMA_CPP_COMMON_H} (block_q5_0)", aliases=("gguf_q5_0",),
        embedding_bits=_gguf("q5_0"), lm_head_bits=_gguf("q6_k"), note=_GGUF_COMPUTE_NOTE,
    ),
    WeightFormat(
        "q5_1", _gguf("q5_1"), "int8", "fp16", False, "all 2-D weights; output.weight q6_k",
        "blocks of 32: fp16 scale + fp16 min + 4 bytes high bits + 16 bytes = 24 bytes / 32 weights",
        f"{LLAMA_CPP_COMMON_H} (block_q5_1)", aliases=("gguf_q5_1",),
        embedding_bits=_gguf("q5_1"), lm_head_bits=_gguf("q6_k"), note=_GGUF_COMPUTE_NOTE,
    ),
)

KV_FORMATS: tuple[KvFormat, ...] = (
    KvFormat("bf16", 16.0, "bfloat16", "all (the default where the model is bf16)", aliases=("bfloat16",)),
    KvFormat("fp16", 16.0, "IEEE 754 binary16", "all; llama.cpp's default (--cache-type-k f16)", aliases=("float16", "half", "f16")),
    KvFormat("fp32", 32.0, "IEEE 754 binary32", "llama.cpp (f32), HF eager", aliases=("float32", "f32")),
    KvFormat(
        "fp8", 8.0,
        "vLLM docs, Quantized KV Cache (kv_cache_dtype fp8 / fp8_e4m3 / fp8_e5m2, per-tensor or per-head scales)",
        "vLLM, SGLang, TensorRT-LLM",
        aliases=("fp8_e4m3", "fp8_e5m2", "float8", "e4m3", "e5m2", "float8_e4m3fn"),
        note="scales are per tensor or per head, not per element: not counted",
    ),
    KvFormat(
        "int8", 8.0, "TensorRT-LLM docs, INT8 KV cache; LMDeploy kv int8 (quant_policy=8)",
        "TensorRT-LLM, LMDeploy",
        aliases=("i8", "kv_int8"),
        note="LMDeploy adds an fp16 scale and zero per head and token (32/head_dim bits, 0.25 at 128); not counted",
    ),
    KvFormat(
        "int4", 4.0, "LMDeploy docs, INT4/INT8 KV cache (quant_policy=4: 4-bit asymmetric per head and token)",
        "LMDeploy", aliases=("i4", "kv_int4"),
        note="the fp16 scale and zero per head and token (32/head_dim bits, 0.25 at 128) are not counted",
    ),
    KvFormat(
        "q8_0", _gguf("q8_0"), f"{LLAMA_CPP_COMMON_H} (block_q8_0: 34 bytes / 32 values)",
        "llama.cpp --cache-type-k/--cache-type-v q8_0",
    ),
    KvFormat(
        "q4_0", _gguf("q4_0"), f"{LLAMA_CPP_COMMON_H} (block_q4_0: 18 bytes / 32 values)",
        "llama.cpp --cache-type-k/--cache-type-v q4_0",
    ),
    KvFormat(
        "q4_1", _gguf("q4_1"), f"{LLAMA_CPP_COMMON_H} (block_q4_1: 20 bytes / 32 values)",
        "llama.cpp --cache-type-k/--cache-type-v q4_1",
    ),
    KvFormat(
        "q5_0", _gguf("q5_0"), f"{LLAMA_CPP_COMMON_H} (block_q5_0: 22 bytes / 32 values)",
        "llama.cpp --cache-type-k/--cache-type-v q5_0",
    ),
    KvFormat(
        "q5_1", _gguf("q5_1"), f"{LLAMA_CPP_COMMON_H} (block_q5_1: 24 bytes / 32 values)",
        "llama.cpp --cache-type-k/--cache-type-v q5_1",
    ),
)


def _fold(name: str) -> str:
    """How format names are compared: case-insensitive, '-', '.', ' ' and '_' alike."""
    return "_".join(name.strip().lower().replace("-", " ").replace(".", " ").replace("_", " ").split())


def _index(entries, what: str) -> dict:
    table: dict = {}
    for entry in entries:
        for key in (entry.name, *entry.aliases):
            folded = _fold(key)
            if folded in table and table[folded] is not entry:
                raise AssertionError(f"{what} name {key!r} is given to both {table[folded].name} and {entry.name}")
            table[folded] = entry
    return table


_WEIGHT_INDEX = _index(WEIGHT_FORMATS, "weight format")
_KV_INDEX = _index(KV_FORMATS, "KV format")


def weight_format_names() -> list[str]:
    return [f.name for f in WEIGHT_FORMATS]


def kv_format_names() -> list[str]:
    return [f.name for f in KV_FORMATS]


def weight_format(name: str) -> WeightFormat:
    """A weight format by name or alias (Q4_K_M, q4-k-m, AWQ, 4bit, bfloat16, ...)."""
    try:
        return _WEIGHT_INDEX[_fold(name)]
    except KeyError:
        raise RooflineError(
            f"unknown weight format {name!r}; choose one of {', '.join(weight_format_names())}"
        ) from None


def kv_format(name: str) -> KvFormat:
    """A KV-cache format by name or alias (bf16, fp16, fp8, int8, q8_0, ...)."""
    try:
        return _KV_INDEX[_fold(name)]
    except KeyError:
        raise RooflineError(f"unknown KV-cache format {name!r}; choose one of {', '.join(kv_format_names())}") from None


def bytes_per_weight(name: str) -> float:
    return weight_format(name).bytes_per_weight


def bytes_per_kv_element(name: str) -> float:
    return kv_format(name).bytes_per_element


# --- llama.cpp mixes -------------------------------------------------------------------------

#: Tensor categories :func:`gguf_tensor_type` knows (llama.cpp's tensor_category names).
GGUF_CATEGORIES = (
    "token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output",
    "ffn_gate", "ffn_up", "ffn_down",
)

_GGUF_BASE = {
    "q8_0": "q8_0", "q6_k": "q6_k", "q5_k_m": "q5_k", "q5_k_s": "q5_k", "q4_k_m": "q4_k",
    "q4_k_s": "q4_k", "q4_0": "q4_0", "q4_1": "q4_1", "q5_0": "q5_0", "q5_1": "q5_1",
}


def _more_bits(layer: int, n_layers: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth of the layers and every third between."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def gguf_tensor_type(ftype: str, category: str, layer: int = 0, n_layers: int = 1, *,
                     tied_embeddings: bool = False, seventy_b: bool = False) -> str:
    """The llama.cpp block type ``llama-quantize`` gives a tensor in a file of type ``ftype``.

    Reproduces llama_tensor_get_type_impl (src/llama-quant.cpp) for the types here, dense
    models, no imatrix and no overrides: output.weight (and a tied token embedding) q6_k unless
    the file is q8_0; Q4_K_M/Q5_K_M raise attn_v and ffn_down to q6_k in the use_more_bits
    layers (and a fused attn_qkv to q5_k/q6_k); Q4_K_S raises attn_v in the first 4 layers and
    ffn_down in the first eighth to q5_k; llama.cpp's 70B rule raises a q4_k attn_v to q5_k.
    Falcon and 8-expert (Mixtral) special cases are not reproduced."""
    fmt = weight_format(ftype)
    base = _GGUF_BASE.get(fmt.name)
    if base is None:
        raise RooflineError(f"{ftype!r} is not a llama.cpp type; choose one of {', '.join(_GGUF_BASE)}")
    if category not in GGUF_CATEGORIES:
        raise RooflineError(f"unknown tensor category {category!r}; choose one of {', '.join(GGUF_CATEGORIES)}")
    if category == "output" or (tied_embeddings and category == "token_embd"):
        return "q8_0" if base == "q8_0" else "q6_k"
    kind = fmt.name
    new = base
    if category == "attn_v":
        if kind in ("q4_k_m", "q5_k_m") and _more_bits(layer, n_layers):
            new = "q6_k"
        elif kind == "q4_k_s" and layer < 4:
            new = "q5_k"
        if seventy_b and new == "q4_k":
            new = "q5_k"
    elif category == "ffn_down":
        if kind in ("q4_k_m", "q5_k_m") and _more_bits(layer, n_layers):
            new = "q6_k"
        elif kind == "q4_k_s" and layer < n_layers // 8:
            new = "q5_k"
    elif category == "attn_qkv":
        new = {"q4_k_m": "q5_k", "q5_k_m": "q6_k"}.get(kind, base)
    return new
