"""The graph engine on the architectures people serve now: MoE, sliding windows, sinks, MLA, qk-norm.

Tiny configs in tests/data/tiny_configs/<name>/config.json (CPU, fp32 where numbers are compared);
the published models' configs in tests/data/tiny_configs/full/<name>/config.json (shapes only, on
the meta device).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from calibrate import graph_engine as ge  # noqa: E402

DATA = Path(__file__).parent / "data" / "tiny_configs"
TINY = ["tiny-qwen3", "tiny-qwen3-moe", "tiny-mixtral", "tiny-gpt-oss", "tiny-deepseek-v2", "tiny-deepseek-v3"]
TINY_MOE = [n for n in TINY if n not in ("tiny-qwen3",)]
TINY_MLA = ["tiny-deepseek-v2", "tiny-deepseek-v3"]
CPU = torch.device("cpu")


def tiny(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


def full(name: str) -> dict:
    return json.loads((DATA / "full" / name / "config.json").read_text())


def rel(a, b) -> float:
    return ((a - b).norm() / b.norm()).item()


def fp32_weights(s: ge.Shapes, seed: int = 0, std: float = 0.1) -> ge.Weights:
    return ge.random_weights(s, CPU, torch.float32, seed=seed, std=std)


def state(s: ge.Shapes, batch: int, total: int, dtype=torch.float32) -> ge.StepState:
    # as GraphEngine.new_state: the slots rounded up to RING_ALIGN, the ones past ``total`` masked
    caches = [s.cache_shapes(i, batch, total) for i in range(s.layers)]
    st = ge.StepState(
        tok=torch.zeros(batch, dtype=torch.long), pos=torch.zeros(1, dtype=torch.long),
        key_pos=torch.arange(ge.aligned(total)),
        cache_k=[torch.randn(k, dtype=dtype) for k, _ in caches],
        cache_v=None if s.mla else [torch.randn(v, dtype=dtype) for _, v in caches], cos=None, sin=None)
    st.cos, st.sin = ge.rope_tables(s, ge.aligned(total), CPU, dtype)
    return st


# ---------------------------------------------------------------------------------------------
# Shapes and configs
# ---------------------------------------------------------------------------------------------


def test_shapes_read_from_the_configs():
    s = ge.Shapes.from_config(full("gpt-oss-20b"))
    assert (s.experts, s.top_k, s.moe_inter, s.router, s.act) == (32, 4, 2880, "topk_softmax", "gpt_oss")
    assert s.windows == (128, 0) * 12 and s.sinks and s.qkv_bias and s.o_bias and s.head_dim == 64
    s = ge.Shapes.from_config(full("qwen3-30b-a3b"))
    assert (s.experts, s.top_k, s.moe_inter, s.norm_topk, s.qk_norm) == (128, 8, 768, True, True)
    assert s.windows == (0,) * 48 and all(s.moe_layers) and not s.qkv_bias
    s = ge.Shapes.from_config(full("mixtral-8x7b"))
    assert (s.experts, s.top_k, s.moe_inter, s.norm_topk, s.head_dim) == (8, 2, 14336, True, 128)
    s = ge.Shapes.from_config(full("deepseek-v2-lite"))
    assert s.mla and (s.kv_lora_rank, s.qk_rope_dim, s.qk_nope_dim, s.v_head_dim) == (512, 64, 128, 128)
    assert s.q_lora_rank == 0
    assert s.moe_layers == (False,) + (True,) * 26 and (s.experts, s.top_k, s.shared_inter) == (64, 6, 2 * 1408)
    mscale = 0.1 * 0.707 * math.log(40) + 1  # yarn, factor 40, mscale_all_dim 0.707
    assert s.rope_interleaved and s.scale == pytest.approx(192 ** -0.5 * mscale**2)
    s = ge.Shapes.from_config(full("deepseek-v3"))
    assert (s.router, s.n_group, s.topk_group, s.routed_scale, s.q_lora_rank) == ("sigmoid_group", 8, 4, 2.5, 1536)
    assert s.moe_layers == (False,) * 3 + (True,) * 58


def test_dense_models_keep_their_shapes():
    from calibrate.configs import load_model_config

    for name in ("tiny-qwen2", "tiny-llama", "qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"):
        s = ge.Shapes.from_config(load_model_config(name))
        assert not (s.experts or s.mla or s.sinks or s.qk_norm or any(s.windows) or s.o_bias), name


def test_unsupported_moe_is_refused():
    from roofline.errors import RooflineError

    cfg = dict(tiny("tiny-qwen3-moe"), model_type="qwen2_moe")
    with pytest.raises(RooflineError, match="qwen2_moe"):
        ge.Shapes.from_config(cfg)


@pytest.mark.parametrize("name, params", [
    # transformers' own parameter counts of the same configs (meta device), equal to the model cards'
    ("qwen3-30b-a3b", 30_532_122_624), ("mixtral-8x7b", 46_702_792_704), ("gpt-oss-20b", 20_914_757_184),
    ("deepseek-v2-lite", 15_706_484_224), ("gpt-oss-120b", 116_829_156_672),
    ("qwen3-235b-a22b", 235_093_634_560), ("deepseek-v3", 671_026_419_200),
])
def test_full_size_weights_have_the_published_parameter_count(name, params):
    s = ge.Shapes.from_config(full(name))
    assert ge.weight_count(ge.random_weights(s, torch.device("meta"), torch.bfloat16)) == params


def test_full_size_weights_match_transformers_tensor_for_tensor():
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModelForCausalLM

    drop = ("architectures", "transformers_version", "torch_dtype", "quantization_config")
    for name in ("gpt-oss-20b", "deepseek-v2-lite"):
        cfg = {k: v for k, v in full(name).items() if k not in drop}
        hf = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16)
        n = sum(p.numel() for p in model.parameters())
        s = ge.Shapes.from_config(full(name))
        assert ge.weight_count(ge.random_weights(s, torch.device("meta"), torch.bfloat16)) == n, name


# ---------------------------------------------------------------------------------------------
# KV cache sizes
# ---------------------------------------------------------------------------------------------


def test_kv_cache_bytes_per_layer():
    b, t = 3, 20
    s = ge.Shapes.from_config(full("gpt-oss-20b"))  # windowed layers hold min(T, 128) slots
    # (slots rounded up to RING_ALIGN = 8: 20 positions hold 24 slots)
    assert ge.kv_cache_bytes(s, b, t)[:2] == [2 * b * 8 * 24 * 64 * 2] * 2
    assert ge.kv_cache_bytes(s, b, 1000)[:2] == [2 * b * 8 * 128 * 64 * 2, 2 * b * 8 * 1000 * 64 * 2]
    s = ge.Shapes.from_config(full("deepseek-v2-lite"))  # latent 512 + rope key 64 per token, one copy
    assert set(ge.kv_cache_bytes(s, b, t)) == {b * 24 * 576 * 2} and len(ge.kv_cache_bytes(s, b, t)) == 27
    s = ge.Shapes.from_config(full("qwen3-30b-a3b"))
    assert set(ge.kv_cache_bytes(s, b, t)) == {2 * b * 4 * 24 * 128 * 2}
    s = ge.Shapes.from_config(full("mixtral-8x7b"))  # one position: 8 slots
    assert set(ge.kv_cache_bytes(s, 1, 1)) == {2 * 8 * 8 * 128 * 2}


@pytest.mark.parametrize("name", TINY)
def test_state_allocates_exactly_the_cache_bytes(name):
    eng = ge.GraphEngine(tiny(name), device="cpu")
    st = eng.new_state(3, 11)
    tensors = [c for c in (st.cache_k if isinstance(st.cache_k, list) else [st.cache_k])]
    if st.cache_v is not None:
        tensors += st.cache_v if isinstance(st.cache_v, list) else [st.cache_v]
    assert sum(t.numel() * t.element_size() for t in tensors) == sum(ge.kv_cache_bytes(eng.shapes, 3, 11))


# ---------------------------------------------------------------------------------------------
# Numerics: the same weights give transformers' logits (fp32), prefill and every decode step
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TINY)
def test_tiny_model_matches_transformers(name):
    pytest.importorskip("transformers")
    from calibrate.hf_eager import build_hf_model

    cfg = tiny(name)
    torch.manual_seed(1)
    model = build_hf_model(cfg, CPU).float()
    model.config._attn_implementation = "eager"
    with torch.no_grad():  # biases, norms, sinks random too, so a wrong one shows
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(1.0 if "norm" in pname else 0.0, 0.1)
        for buf_name, buf in model.named_buffers():
            if "e_score_correction_bias" in buf_name:
                buf.normal_(0.0, 0.1)
    s = ge.Shapes.from_config(cfg)
    w = ge.weights_from_hf(model, s)
    n_hf = sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for n, b in model.named_buffers() if "e_score_correction_bias" in n)
    assert ge.weight_count(w) == n_hf
    batch, plen, gen = 3, 7, 6  # the prompt is longer than the tiny windows (4, 5)
    st = state(s, batch, plen + gen)
    ids = torch.randint(0, s.vocab, (batch, plen))
    with torch.no_grad():
        logits = ge.prefill(w, s, ids, st.cache_k, st.cache_v, st.cos, st.sin)
        assert rel(logits, model(input_ids=ids).logits[:, -1]) < 1e-5
        seq = ids
        st.tok.copy_(logits.argmax(-1))
        for j in range(gen - 1):
            seq = torch.cat([seq, st.tok[:, None].clone()], dim=1)
            st.pos.fill_(plen + j)
            ge.decode_step(w, s, st)
            ref = model(input_ids=seq).logits[:, -1]
            assert rel(st.logits, ref) < 1e-5, j
            assert torch.equal(st.tok, ref.argmax(-1))


# ---------------------------------------------------------------------------------------------
# Sliding windows
# ---------------------------------------------------------------------------------------------


def test_prefill_keeps_the_last_window_positions_in_the_ring():
    s = ge.Shapes.from_config(tiny("tiny-mixtral"))  # window 5 on every layer
    w = fp32_weights(s)
    batch, plen, total = 2, 12, 14
    ids = torch.randint(0, s.vocab, (batch, plen))
    ring = state(s, batch, total)
    slots = ring.cache_k[0].shape[2]
    assert slots == 8  # the window rounded up to RING_ALIGN slots (the extra ones masked in decode)
    wide = state(s, batch, total)  # full-length caches: prefill writes every position
    wide.cache_k = [torch.zeros(batch, s.kv_heads, total, s.head_dim) for _ in range(s.layers)]
    wide.cache_v = [torch.zeros(batch, s.kv_heads, total, s.head_dim) for _ in range(s.layers)]
    a = ge.prefill(w, s, ids, ring.cache_k, ring.cache_v, ring.cos, ring.sin)
    b = ge.prefill(w, s, ids, wide.cache_k, wide.cache_v, wide.cos, wide.sin)
    assert torch.allclose(a, b, atol=1e-6)  # the window mask, not the cache length, decides prefill
    for i in range(s.layers):
        for p in range(plen - slots, plen):
            assert torch.equal(ring.cache_k[i][:, :, p % slots], wide.cache_k[i][:, :, p])
            assert torch.equal(ring.cache_v[i][:, :, p % slots], wide.cache_v[i][:, :, p])


@pytest.mark.parametrize("win", [4, 5, 8, 13])
def test_a_padded_ring_attends_exactly_the_window(win):
    # a ring of the window rounded up to RING_ALIGN slots (8: exactly the window), masked by
    # ring_bias: at every position the attended slots hold exactly the last `win` positions, and the
    # layer's output equals the full history's under an explicit window mask (tiny-gpt-oss: sinks;
    # an odd window as phi-3's)
    s = ge.Shapes.from_config(tiny("tiny-gpt-oss"))
    lw = fp32_weights(s).layers[0]
    slots = -(-win // ge.RING_ALIGN) * ge.RING_ALIGN
    batch, total = 2, 3 * slots + 3
    hist_k = torch.randn(batch, s.kv_heads, total, s.head_dim)
    hist_v = torch.randn(batch, s.kv_heads, total, s.head_dim)
    cos, sin = ge.rope_tables(s, total, CPU, torch.float32)
    rot_parts = torch.eye(s.head_dim), ge.rope_swap(s.head_dim, CPU, torch.float32)
    h = torch.randn(batch, s.hidden)
    key_pos = torch.arange(total)
    for pos in range(total):
        p = torch.tensor([pos])
        bias = ge.ring_bias(key_pos, p, slots, win, torch.float32)
        held = {pos - ((pos - j) % slots) for j in range(slots) if bias[j] == 0}
        assert held == set(range(max(0, pos - win + 1), pos + 1)), pos
        rot = ge.rope_matrix(cos[pos:pos + 1], sin[pos:pos + 1], *rot_parts)
        window_mask = torch.where((key_pos <= pos) & (key_pos > pos - win), 0.0, float("-inf"))
        ref = ge._gqa_decode(h, lw, s, hist_k.clone(), hist_v.clone(), rot, window_mask, p)
        ring_k = torch.randn(batch, s.kv_heads, slots, s.head_dim)  # garbage where never written
        ring_v = torch.randn(batch, s.kv_heads, slots, s.head_dim)
        for q in range(max(0, pos - slots + 1), pos):  # what earlier steps wrote, at q % slots
            ring_k[:, :, q % slots], ring_v[:, :, q % slots] = hist_k[:, :, q], hist_v[:, :, q]
        got = ge._gqa_decode(h, lw, s, ring_k, ring_v, rot, bias, p % slots)
        assert rel(got, ref) < 1e-5, pos


def test_window_wider_than_the_context_is_a_plain_cache():
    s = ge.Shapes.from_config(full("gpt-oss-20b"))
    assert s.cache_slots(0, 96) == 96 and s.cache_slots(0, 129) == 128 and s.cache_slots(1, 129) == 136
    assert s.cache_slots(0, 100) == 104  # rounded up to RING_ALIGN slots, as every cache


# ---------------------------------------------------------------------------------------------
# MLA
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TINY_MLA)
def test_absorbed_mla_decode_equals_naive_decompressed_attention(name):
    s = ge.Shapes.from_config(tiny(name))
    lw = fp32_weights(s).layers[0]
    batch, total, pos = 3, 9, 6
    cache = torch.randn(batch, total, s.kv_lora_rank + s.qk_rope_dim)
    h = torch.randn(batch, s.hidden)
    cos, sin = ge.rope_tables(s, total, CPU, torch.float32)
    rot = ge.rope_matrix(cos[pos:pos + 1], sin[pos:pos + 1], torch.eye(s.rope_dim),
                         ge.rope_swap(s.rope_dim, CPU, torch.float32, interleaved=True))
    mask = torch.where(torch.arange(total) <= pos, 0.0, float("-inf"))
    got = ge._mla_decode(h, lw, s, cache, rot, mask, torch.tensor([pos]))
    # naive: decompress every cached latent into per-head keys and values, then plain attention
    nope, r = s.qk_nope_dim, s.kv_lora_rank
    q, latent, k_rope = ge._mla_project(h, lw.mla, s)
    assert torch.equal(cache[:, pos], torch.cat([latent, k_rope @ rot], dim=-1))  # written at pos
    kv = (cache[..., :r] @ lw.mla.kv_b.reshape(-1, r).T).view(batch, total, s.heads, nope + s.v_head_dim)
    keys = torch.cat([kv[..., :nope], cache[:, :, None, r:].expand(-1, -1, s.heads, -1)], dim=-1)
    query = torch.cat([q[..., :nope], q[..., nope:] @ rot], dim=-1)  # (B, H, qk)
    scores = torch.einsum("bhd,bthd->bht", query, keys) * s.scale + mask
    out = torch.einsum("bht,bthv->bhv", torch.softmax(scores, -1), kv[..., nope:])
    ref = out.reshape(batch, -1) @ lw.wo.T
    assert rel(got, ref) < 1e-5


# ---------------------------------------------------------------------------------------------
# Mixture of experts
# ---------------------------------------------------------------------------------------------


def _moe_layer(name: str):
    s = ge.Shapes.from_config(tiny(name))
    w = fp32_weights(s, std=0.3)
    i = s.moe_layers.index(True)
    if w.layers[i].moe.score_bias is not None:
        w.layers[i].moe.score_bias.normal_(0.0, 0.5)
    return s, w.layers[i].moe


@pytest.mark.parametrize("name", TINY_MOE)
def test_moe_forward_equals_a_per_token_loop(name):
    s, m = _moe_layer(name)
    h = torch.randn(13, s.hidden)
    stats: list = []
    got = ge.moe_forward(h, m, s, stats)
    assert rel(got, ge.moe_reference(h, m, s)) < 1e-5
    _, idx = ge.route(h, m, s)
    assert int(stats[0]) == len(set(idx.flatten().tolist()))


def _has_cpu_grouped_mm() -> bool:
    try:
        x = torch.randn(4, 16)
        torch._grouped_mm(x, torch.randn(2, 8, 16).transpose(1, 2), offs=torch.tensor([1, 4], dtype=torch.int32))
        return True
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


needs_cpu_grouped_mm = pytest.mark.skipif(not _has_cpu_grouped_mm(), reason="torch has no CPU _grouped_mm")


@needs_cpu_grouped_mm
@pytest.mark.parametrize("name", TINY_MOE)
def test_grouped_mm_path_equals_the_expert_loop(name, monkeypatch):
    s, m = _moe_layer(name)
    h = torch.randn(13, s.hidden)
    loop = ge.moe_forward(h, m, s)
    monkeypatch.setattr(ge, "GROUPED_MM_ON_CPU", True)
    assert rel(ge.moe_forward(h, m, s), loop) < 1e-5


def test_routing_rules():
    h = torch.randn(5, 64)
    s, m = _moe_layer("tiny-qwen3-moe")  # softmax, top-k, renormalised
    w, idx = ge.route(h, m, s)
    probs = torch.softmax(h @ m.router.T, -1)
    assert torch.allclose(w.sum(-1), torch.ones(5)) and torch.equal(idx, probs.topk(3).indices)
    s, m = _moe_layer("tiny-deepseek-v2")  # softmax, top-k, not renormalised
    w, idx = ge.route(h, m, s)
    assert torch.allclose(w, torch.softmax(h @ m.router.T, -1).gather(1, idx))
    s, m = _moe_layer("tiny-gpt-oss")  # top-k of biased logits, softmax over those k
    w, idx = ge.route(h, m, s)
    top = (h @ m.router.T + m.router_bias).topk(2)
    assert torch.equal(idx, top.indices) and torch.allclose(w, torch.softmax(top.values, -1))
    s, m = _moe_layer("tiny-deepseek-v3")  # experts only from the best topk_group of n_group groups
    w, idx = ge.route(h, m, s)
    groups = (idx // (s.experts // s.n_group))
    assert all(len(set(g.tolist())) <= s.topk_group for g in groups)
    assert torch.allclose(w.sum(-1), torch.full((5,), s.routed_scale))


class _NoHostSync(torch.utils._python_dispatch.TorchDispatchMode):
    """Fails on any op that reads device data on the host or has a data-dependent shape."""

    SYNCING = ("_local_scalar_dense", "nonzero", "masked_select", "bincount", "unique", "_unique2",
               "repeat_interleave.Tensor", "masked_scatter")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket.__name__) + "." + func._overloadname
        if any(name.startswith(op) for op in self.SYNCING):
            raise AssertionError(f"host sync in the decode step: {name}")
        if func is torch.ops.aten.index.Tensor and any(
                i is not None and i.dtype == torch.bool for i in args[1]):
            raise AssertionError("boolean indexing in the decode step")
        return func(*args, **(kwargs or {}))


META = torch.device("meta")


def meta_state(s: ge.Shapes, batch: int, total: int) -> ge.StepState:
    caches = [s.cache_shapes(i, batch, total) for i in range(s.layers)]
    st = ge.StepState(
        tok=torch.zeros(batch, dtype=torch.long, device=META), pos=torch.zeros(1, dtype=torch.long, device=META),
        key_pos=torch.arange(ge.aligned(total), device=META),
        cache_k=[torch.empty(k, device=META, dtype=torch.bfloat16) for k, _ in caches],
        cache_v=None if s.mla else [torch.empty(v, device=META, dtype=torch.bfloat16) for _, v in caches],
        cos=None, sin=None)
    st.cos, st.sin = ge.rope_tables(s, ge.aligned(total), META, torch.bfloat16)
    return st


@pytest.mark.parametrize("name", TINY + ["full/gpt-oss-20b", "full/deepseek-v2-lite", "full/deepseek-v3"])
def test_decode_step_never_syncs_with_the_host(name):
    """The step as CUDA runs it (grouped mm, not the CPU loop), on meta tensors: any read of device
    data on the host (.item, .tolist, nonzero, boolean indexing, bincount) fails there, and the op
    filter catches the rest. bf16 shapes of the full models also pass _grouped_mm's stride checks."""
    cfg = full(name[5:]) if name.startswith("full/") else tiny(name)
    s = ge.Shapes.from_config(cfg)
    w = ge.random_weights(s, META, torch.bfloat16)
    st = meta_state(s, 4, 300)
    with torch.inference_mode(), _NoHostSync():
        ge.decode_step(w, s, st)
    assert st.logits.shape == (4, s.vocab)


def test_the_meta_check_catches_a_host_read(monkeypatch):
    s = ge.Shapes.from_config(tiny("tiny-mixtral"))
    def reads_offsets(x, w, offs):
        return x.new_zeros(x.shape[0], w.shape[1] + 0 * len(offs.tolist()))

    monkeypatch.setattr(ge, "expert_mm", reads_offsets)
    with pytest.raises(NotImplementedError, match="meta"):
        ge.decode_step(ge.random_weights(s, META, torch.bfloat16), s, meta_state(s, 2, 10))


# ---------------------------------------------------------------------------------------------
# The engine end to end
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TINY)
def test_measure_runs_every_tiny_model(name):
    eng = ge.GraphEngine(tiny(name), device="cpu")
    batch, prompt, gen = 3, 7, 4
    r = eng.measure(batch, prompt, gen)
    assert len(r["step_s"]) == gen - 1 and all(t > 0 for t in r["step_s"]) and r["ttft_s"] > 0
    assert (r["weight_dtype"], r["kv_dtype"]) == ("bf16", "bf16")
    assert r["kv_cache_bytes"] == sum(ge.kv_cache_bytes(eng.shapes, batch, prompt + gen))
    extra = eng.extra_columns()
    s = eng.shapes
    if s.experts:
        assert s.top_k <= r["experts_touched_mean"] <= min(s.experts, batch * s.top_k)
        assert (extra["experts"], extra["top_k"], extra["moe_impl"]) == (str(s.experts), str(s.top_k), "loop")
        assert extra["moe_layers"] == str(sum(s.moe_layers))
    else:
        assert r["experts_touched_mean"] is None and "experts" not in extra
    assert extra["attn_implementation"] == ("own-mla-absorbed" if s.mla else "own-gqa-matmul")
    assert ("window_layers" in extra) == any(s.windows)
    assert ("attention_sinks" in extra) == s.sinks


def test_prefill_in_chunks_equals_one_forward():
    eng = ge.GraphEngine(tiny("tiny-qwen3-moe"), device="cpu")
    eng.weights = fp32_weights(eng.shapes)
    eng.dtype = torch.float32
    one, chunked = eng.new_state(5, 10), eng.new_state(5, 10)
    one.cos, one.sin = chunked.cos, chunked.sin = ge.rope_tables(eng.shapes, 10, CPU, torch.float32)
    for st in (one, chunked):
        st.cache_k, st.cache_v = st.cache_k.float(), st.cache_v.float()
    eng.prefill_chunk_tokens = None
    eng._prefill(one, 5, 6)
    eng.prefill_chunk_tokens = 12  # two sequences per forward: 2 + 2 + 1
    assert eng.prefill_chunk_seqs(5, 6) == 2
    eng._prefill(chunked, 5, 6)
    assert torch.equal(one.tok, chunked.tok)
    assert torch.allclose(one.cache_k[:, :, :, :6], chunked.cache_k[:, :, :, :6], atol=1e-6)


@pytest.mark.parametrize("batch, warm", [(5, [2, 1]), (4, [2]), (1, [1])])
def test_the_warm_up_prefills_every_chunk_shape_the_timed_prefill_runs(batch, warm):
    """A batch of unequal chunks (5 sequences, 2 a forward: 2 + 2 + 1) is warmed at both shapes before
    the timed prefill (a first forward at a shape builds cuDNN's attention plan: 60-85 ms on the H200,
    device call 83), a batch of equal chunks at one."""
    eng = ge.GraphEngine(tiny("tiny-qwen3-moe"), device="cpu")
    eng.prefill_chunk_tokens = 12  # two 6-token prompts a forward
    calls, real = [], eng._prefill

    def spy(st, b, prompt_tokens):
        calls.append(b)
        return real(st, b, prompt_tokens)

    eng._prefill = spy
    r = eng.measure(batch, 6, 3)
    assert calls == warm + [batch] and r["ttft_s"] > 0


def test_every_model_prefills_at_most_a_chunk_of_whole_sequences():
    from calibrate.configs import load_model_config

    for eng in (ge.GraphEngine(load_model_config("tiny-qwen2"), device="cpu"), ge.GraphEngine(tiny("tiny-mixtral"), device="cpu")):
        assert eng.prefill_chunk_seqs(512, 2048) == 16  # 32,768 tokens a forward
        assert eng.prefill_chunk_seqs(8, 128) == 8
        assert eng.prefill_chunk_seqs(4, 65536) == 1  # a prompt longer than a chunk is a forward of its own


def test_runner_sweeps_a_moe_model_from_its_config_folder(tmp_path):
    from calibrate import runner
    from roofline.measurements import read_measurements

    path = runner.run_calibration(
        card="cpu-test", models=[str(DATA / "tiny-gpt-oss")], engine="graph", batches=[1, 2],
        prompt_tokens=6, gen_tokens=3, out_dir=tmp_path, device="cpu", measure_ceilings=False,
        progress=lambda m: None)
    rows = read_measurements(path)
    assert [r.batch for r in rows] == [1, 2] and all(r.ok for r in rows)
    assert rows[0].extra["experts"] == "4" and rows[0].extra["window_layers"] == "1"


# ---------------------------------------------------------------------------------------------
# On a GPU (skipped without one): the captured step, the grouped matmuls, the whole point
# ---------------------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_gpu
@pytest.mark.parametrize("name", TINY)
def test_cuda_graph_replay_equals_the_eager_step_on_gpu(name):
    eng = ge.GraphEngine(tiny(name), device="cuda")
    st = eng.new_state(8, 24)
    with torch.inference_mode():
        eng._prefill(st, 8, 16)
        replay = eng._capture(st, 16)  # warm-up steps at 16, 17, 18, then capture
        keys = st.cache_k if isinstance(st.cache_k, list) else [st.cache_k]
        tok0, keys0 = st.tok.clone(), [c.clone() for c in keys]
        st.pos.fill_(19)
        replay()
        graph_logits = st.logits.float().clone()
        st.tok.copy_(tok0)  # the same inputs again (values are rewritten identically), then eagerly
        for c, c0 in zip(keys, keys0):
            c.copy_(c0)
        ge.decode_step(eng.weights, eng.shapes, st)
    assert rel(graph_logits, st.logits.float()) < 2e-2  # bf16; index_add_ sums in any order


@needs_gpu
@pytest.mark.parametrize("name", TINY_MOE)
def test_grouped_mm_on_gpu_equals_the_expert_loop(name):
    s = ge.Shapes.from_config(tiny(name))
    m = ge.random_weights(s, torch.device("cuda"), torch.bfloat16, std=0.3).layers[s.moe_layers.index(True)].moe
    h = torch.randn(37, s.hidden, device="cuda", dtype=torch.bfloat16)
    got = ge.moe_forward(h, m, s)
    cpu = {k: (v.cpu() if hasattr(v, "cpu") else v) for k, v in vars(m).items()}
    ref = ge.moe_forward(h.cpu(), ge.MoEWeights(**cpu), s)
    assert rel(got.float().cpu(), ref.float()) < 2e-2


@needs_gpu
@pytest.mark.parametrize("name", TINY)
def test_measure_on_gpu(name):
    eng = ge.GraphEngine(tiny(name), device="cuda")
    for batch in (1, 8):
        r = eng.measure(batch, 16, 8)
        assert r["peak_mem_gib"] > 0 and len(r["step_s"]) == 7
        if eng.shapes.experts:
            assert eng.extra_columns()["moe_impl"] == "grouped_mm"
            assert eng.shapes.top_k <= r["experts_touched_mean"] <= eng.shapes.experts


# ---------------------------------------------------------------------------------------------
# The harness measures the model roofline prices: every catalog family, its structure from
# roofline.model_spec's reader
# ---------------------------------------------------------------------------------------------


def _catalog():
    from roofline.model_spec import catalog_names

    return catalog_names(include_test=True)


@pytest.mark.parametrize("name", _catalog())
def test_the_engine_builds_every_catalog_model_as_roofline_prices_it(name):
    # the same weights (within the LayerNorm and MLP biases the engine does not build: <0.02%,
    # pythia-6.9b the most), windows per layer, tied embeddings and MLP kind as the ModelSpec
    # `roofline predict` prices; before, gemma-3, gpt-j and falcon failed with a KeyError, pythia
    # and gpt-neox ran a gated MLP (+25% weights), gemma-2 an untied head and no windows, phi-3 no window
    from calibrate.configs import load_model_config
    from roofline.model_spec import load_model

    spec, s = load_model(name), ge.Shapes.from_config(load_model_config(name))
    built = ge.weight_count(ge.random_weights(s, torch.device("meta"), torch.bfloat16))
    assert built == pytest.approx(spec.param_count, rel=2e-4)
    assert s.windows == tuple(w or 0 for w in (spec.layer_windows or (None,) * spec.num_hidden_layers))
    assert (s.tied, s.gated, s.layers, s.vocab) == (spec.tie_word_embeddings, spec.mlp_gated,
                                                    spec.num_hidden_layers, spec.vocab_size)


def test_a_plain_mlp_model_runs_prefill_and_decode_on_the_cpu():
    # a tiny GPT-NeoX (plain GELU MLP: up then down): the engine's first matrix holds up only, and
    # one point runs end to end with the tokens finite
    cfg = {"model_type": "gpt_neox", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
           "intermediate_size": 128, "vocab_size": 96, "max_position_embeddings": 64, "rotary_pct": 0.25,
           "use_parallel_residual": True, "layer_norm_eps": 1e-5, "tie_word_embeddings": False}
    eng = ge.GraphEngine(cfg, device="cpu")
    assert not eng.shapes.gated and eng.shapes.act == "gelu"
    assert tuple(eng.weights.layers[0].wgu.shape) == (128, 32)
    point = eng.measure(2, 5, 3)
    assert point["ttft_s"] > 0 and len(point["step_s"]) == 2 and min(point["step_s"]) > 0  # gen 3: two decode steps


# ---------------------------------------------------------------------------------------------
# Routing: uniform by the offsets, whatever the hidden states (device call 74)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TINY_MOE)
def test_uniform_routing_spreads_identical_tokens_over_the_experts(name):
    # the worst case of a random model's correlated hidden states: every token of the batch the same
    eng = ge.GraphEngine(tiny(name), device="cpu")
    s = eng.shapes
    layer = next(lw for lw in eng.weights.layers if lw.moe is not None)
    h = torch.randn(1, s.hidden, dtype=torch.bfloat16).expand(16, -1).contiguous()
    _, idx = ge.route(h, layer.moe, s)
    uniform = s.experts * (1 - (1 - s.top_k / s.experts) ** 16)
    assert idx.unique().numel() >= 0.75 * uniform
    layer.moe.route_offsets = None  # the random weights alone: one choice for all
    _, idx = ge.route(h, layer.moe, s)
    assert idx.unique().numel() == s.top_k
    assert eng.routing_in_use() == "weights" and eng.extra_columns()["moe_routing"] == "weights"


def test_uniform_routing_chooses_each_expert_at_k_over_e():
    s = ge.Shapes.from_config(tiny("tiny-qwen3-moe"))
    offsets = ge.routing_offsets(s, CPU, torch.bfloat16)
    assert sorted(offsets) == [i for i in range(s.layers) if s.is_moe(i)]
    for off in offsets.values():
        rows = off[:4096].float()
        counts = torch.bincount(rows.topk(s.top_k, dim=-1).indices.reshape(-1), minlength=s.experts)
        # 4,096 tokens x k / E = 1,024 a expert, binomial sd about 28: 15% is over 5 sd
        assert torch.all((counts - 4096 * s.top_k / s.experts).abs() < 0.15 * 4096 * s.top_k / s.experts)
    a, b = (offsets[i] for i in sorted(offsets)[:2])
    assert not torch.equal(a[:64], b[:64])  # each layer its own draws
    more = ge._offset_rows(a, a.shape[0] + 5)  # past the table: repeated
    assert more.shape[0] == a.shape[0] + 5 and torch.equal(more[-5:], a[:5])


def test_routing_is_checked_and_recorded():
    eng = ge.GraphEngine(tiny("tiny-mixtral"), device="cpu")
    assert eng.routing_in_use() == "uniform" and eng.extra_columns()["moe_routing"] == "uniform"
    eng = ge.GraphEngine(tiny("tiny-mixtral"), device="cpu", routing="weights")
    assert all(lw.moe.route_offsets is None for lw in eng.weights.layers)
    assert eng.extra_columns()["moe_routing"] == "weights"
    with pytest.raises(ge.RooflineError, match="routing must be one of uniform, weights"):
        ge.GraphEngine(tiny("tiny-mixtral"), device="cpu", routing="balanced")
    assert "moe_routing" not in ge.GraphEngine(tiny("tiny-qwen3"), device="cpu").extra_columns()
