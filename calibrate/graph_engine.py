"""Engine ``graph``: the floor a tuned engine reaches. Own decoder, static KV cache, CUDA graphs.

A minimal decoder with the same shapes as the Hugging Face model (embedding, RMSNorm, RoPE, GQA
attention, SwiGLU MLP, qkv bias when the model has one (qwen2), tied or untied lm_head) and random
bf16 weights. q/k/v and gate/up are fused into one weight each: the same bytes and FLOPs as the
HF model's separate projections, in fewer launches (as serving engines do).

* The KV cache is preallocated for prompt + gen tokens (filled with random values, never read
  unmasked). Every decode step reads the WHOLE cache with a validity mask, so its bytes do not
  depend on how far decoding has got: kv_cache column ``static``.
* Prefill runs eagerly (SDPA, causal). TTFT = prefill + argmax of the first token, synchronised.
* The decode step (embedding -> layers -> lm_head -> argmax, written back into the token buffer)
  is captured in ONE CUDA graph per batch size. The position is a device tensor updated in place
  before each replay; the validity mask and the RoPE angles are computed from it inside the graph.
  Each replay is timed with CUDA events around it; tpot_s is the mean replay.
* On the CPU the same step runs without capture, so CI exercises this code.

RoPE is the plain rotary embedding: ``rope_scaling`` (llama3, yarn...) only changes the angles,
not the work or the bytes, so timing does not depend on it and it is ignored.

We write our own decoder because capturing transformers' StaticCache in a manual CUDA graph hit
a device-side index assert on the H200 in an earlier probe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

WARMUP_DECODE_STEPS = 3


@dataclass(frozen=True)
class Shapes:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    eps: float
    rope_theta: float
    qkv_bias: bool
    tied: bool

    @classmethod
    def from_config(cls, config: dict) -> "Shapes":
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        rope = config.get("rope_parameters") or {}
        theta = config.get("rope_theta") or rope.get("rope_theta") or 10000.0
        model_type = config.get("model_type", "")
        return cls(
            hidden=hidden,
            layers=int(config["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            inter=int(config["intermediate_size"]),
            vocab=int(config["vocab_size"]),
            eps=float(config.get("rms_norm_eps", 1e-6)),
            rope_theta=float(theta),
            qkv_bias=bool(config.get("attention_bias", model_type == "qwen2")),
            tied=bool(config.get("tie_word_embeddings", False)),
        )

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


@dataclass
class LayerWeights:
    in_norm: object
    wqkv: object
    bqkv: object | None
    wo: object
    post_norm: object
    wgu: object  # gate rows first, then up rows
    wdown: object


@dataclass
class Weights:
    embed: object
    layers: list[LayerWeights]
    final_norm: object
    lm_head: object  # the embedding itself when tied


def random_weights(s: Shapes, device, dtype, seed: int = 0, std: float = 0.02) -> Weights:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, device=device, dtype=dtype, generator=gen) * std

    def norm():
        return 1.0 + rnd(s.hidden)

    layers = [
        LayerWeights(
            in_norm=norm(),
            wqkv=rnd(s.q_dim + 2 * s.kv_dim, s.hidden),
            bqkv=rnd(s.q_dim + 2 * s.kv_dim) if s.qkv_bias else None,
            wo=rnd(s.hidden, s.q_dim),
            post_norm=norm(),
            wgu=rnd(2 * s.inter, s.hidden),
            wdown=rnd(s.hidden, s.inter),
        )
        for _ in range(s.layers)
    ]
    embed = rnd(s.vocab, s.hidden)
    return Weights(embed=embed, layers=layers, final_norm=norm(),
                   lm_head=embed if s.tied else rnd(s.vocab, s.hidden))


def weights_from_hf(model, s: Shapes) -> Weights:
    """The same weights as a transformers Llama/Qwen2 model (for the equivalence test)."""
    import torch

    m = model.model
    layers = []
    for layer in m.layers:
        att, mlp = layer.self_attn, layer.mlp
        bias = None
        if s.qkv_bias:
            bias = torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]).detach()
        layers.append(LayerWeights(
            in_norm=layer.input_layernorm.weight.detach(),
            wqkv=torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]).detach(),
            bqkv=bias,
            wo=att.o_proj.weight.detach(),
            post_norm=layer.post_attention_layernorm.weight.detach(),
            wgu=torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach(),
            wdown=mlp.down_proj.weight.detach(),
        ))
    return Weights(embed=m.embed_tokens.weight.detach(), layers=layers,
                   final_norm=m.norm.weight.detach(), lm_head=model.lm_head.weight.detach())


def rope_tables(s: Shapes, max_len: int, device, dtype):
    """cos, sin of shape (max_len, head_dim), computed in fp32 then cast (as HF does)."""
    import torch

    inv_freq = 1.0 / (s.rope_theta ** (torch.arange(0, s.head_dim, 2, device=device, dtype=torch.float32)
                                       / s.head_dim))
    pos = torch.arange(max_len, device=device, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rope(x, cos, sin):
    """Rotary embedding, half-split layout (HF's rotate_half): x*cos + rotate_half(x)*sin."""
    import torch

    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rope_matrix(cos, sin, eye, swap):
    """The (hd, hd) matrix R with x @ R == _rope(x, cos, sin) for one position (cos, sin: (1, hd)).

    One small matmul per layer instead of five elementwise kernels in the decode step.
    ``eye`` is the identity, ``swap`` the signed permutation of rotate_half (see rope_swap).
    """
    return eye * cos + swap * sin


def rope_swap(head_dim: int, device, dtype):
    """P with x @ P == rotate_half(x) == cat(-x2, x1)."""
    import torch

    half = head_dim // 2
    p = torch.zeros(head_dim, head_dim, device=device, dtype=dtype)
    idx = torch.arange(half, device=device)
    p[idx + half, idx] = -1.0  # out[j] = -x[j + half] for j < half
    p[idx, idx + half] = 1.0  # out[j + half] = x[j]
    return p


def _rms(x, weight, eps):
    """RMSNorm (one fused kernel where torch has one); same function as HF's Qwen2/LlamaRMSNorm."""
    import torch.nn.functional as F

    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _mlp(x, lw: LayerWeights, s: Shapes):
    import torch.nn.functional as F

    gate, up = F.linear(_rms(x, lw.post_norm, s.eps), lw.wgu).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, lw.wdown)


def prefill(w: Weights, s: Shapes, ids, cache_k, cache_v, cos, sin):
    """Eager prefill of ``ids`` (B, P): fills cache[:, :, :, :P], returns last-position logits (B, V)."""
    import torch.nn.functional as F

    batch, plen = ids.shape
    x = F.embedding(ids, w.embed)
    cos_p, sin_p = cos[:plen][None, :, None, :], sin[:plen][None, :, None, :]
    for i, lw in enumerate(w.layers):
        qkv = F.linear(_rms(x, lw.in_norm, s.eps), lw.wqkv, lw.bqkv)
        q, k, v = qkv.split([s.q_dim, s.kv_dim, s.kv_dim], dim=-1)
        q = _rope(q.view(batch, plen, s.heads, s.head_dim), cos_p, sin_p).transpose(1, 2)
        k = _rope(k.view(batch, plen, s.kv_heads, s.head_dim), cos_p, sin_p).transpose(1, 2)
        v = v.view(batch, plen, s.kv_heads, s.head_dim).transpose(1, 2)
        cache_k[i][:, :, :plen].copy_(k)
        cache_v[i][:, :, :plen].copy_(v)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + F.linear(attn.transpose(1, 2).reshape(batch, plen, s.q_dim), lw.wo)
        x = _mlp(x, lw, s)
    return F.linear(_rms(x[:, -1], w.final_norm, s.eps), w.lm_head)


@dataclass
class StepState:
    """The static buffers one decode step reads and writes (fixed addresses for graph replay)."""

    tok: object  # (B,) int64: input token; the step writes the next token here
    pos: object  # (1,) int64: position of ``tok``; updated in place before each replay
    key_pos: object  # (T,) int64: 0..T-1
    cache_k: object  # (L, B, kv_heads, T, head_dim)
    cache_v: object
    cos: object  # (T, head_dim)
    sin: object
    eye: object = None  # (head_dim, head_dim) identity, for rope_matrix
    swap: object = None  # (head_dim, head_dim) rotate_half permutation, for rope_matrix
    logits: object | None = None


def decode_step(w: Weights, s: Shapes, st: StepState) -> None:
    """One decode step over the whole static cache; writes the greedy next token into st.tok.

    Per layer: RMSNorm, fused qkv (+bias), RoPE as one (hd x hd) matmul, cache write at ``pos``,
    scores = scale * q K^T + mask over ALL T cache slots (one baddbmm), softmax, P V, o proj,
    residual, RMSNorm, fused gate_up, SiLU * up, down, residual. Query heads are grouped by their
    KV head (GQA) so each cache byte is read once.
    """
    import torch
    import torch.nn.functional as F

    batch, total = st.tok.shape[0], st.key_pos.shape[0]
    group = s.heads // s.kv_heads
    if st.eye is None:
        st.eye = torch.eye(s.head_dim, device=st.cos.device, dtype=st.cos.dtype)
        st.swap = rope_swap(s.head_dim, st.cos.device, st.cos.dtype)
    x = F.embedding(st.tok, w.embed)  # (B, H)
    rot = rope_matrix(st.cos.index_select(0, st.pos), st.sin.index_select(0, st.pos), st.eye, st.swap)
    neg_inf = torch.full((), float("-inf"), device=x.device, dtype=x.dtype)
    bias = torch.where(st.key_pos <= st.pos, torch.zeros((), device=x.device, dtype=x.dtype), neg_inf)
    scale = s.head_dim ** -0.5
    for i, lw in enumerate(w.layers):
        qkv = F.linear(_rms(x, lw.in_norm, s.eps), lw.wqkv, lw.bqkv)  # (B, q+2kv)
        qk = torch.matmul(qkv[:, : s.q_dim + s.kv_dim].view(batch, s.heads + s.kv_heads, s.head_dim), rot)
        q = qk[:, : s.heads].reshape(batch * s.kv_heads, group, s.head_dim)  # grouped by kv head
        k = qk[:, s.heads:].unsqueeze(2)  # (B, kv, 1, hd)
        v = qkv[:, s.q_dim + s.kv_dim:].view(batch, s.kv_heads, 1, s.head_dim)
        ck, cv = st.cache_k[i], st.cache_v[i]  # (B, kv, T, hd)
        ck.index_copy_(2, st.pos, k)
        cv.index_copy_(2, st.pos, v)
        scores = torch.baddbmm(bias, q, ck.view(batch * s.kv_heads, total, s.head_dim).transpose(1, 2),
                               alpha=scale)  # (B*kv, g, T)
        probs = torch.softmax(scores, dim=-1)
        attn = torch.bmm(probs, cv.view(batch * s.kv_heads, total, s.head_dim))  # (B*kv, g, hd)
        x = x + F.linear(attn.view(batch, s.q_dim), lw.wo)
        x = _mlp(x, lw, s)
    logits = F.linear(_rms(x, w.final_norm, s.eps), w.lm_head)
    st.tok.copy_(logits.argmax(dim=-1))
    st.logits = logits


class GraphEngine:
    """One model's weights built once; ``measure`` runs one (batch, prompt, gen) point."""

    name = "graph"
    kv_cache = "static"

    def __init__(self, config: dict, device: str = "cuda", seed: int = 0, use_graph: bool | None = None):
        import torch

        self.device = torch.device(device)
        self.dtype = torch.bfloat16
        self.shapes = Shapes.from_config(config)
        self.seed = seed
        self.use_graph = (self.device.type == "cuda") if use_graph is None else use_graph
        self.weights = random_weights(self.shapes, self.device, self.dtype, seed)

    def extra_columns(self) -> dict[str, str]:
        return {"attn_implementation": "own-gqa-matmul", "cuda_graph": str(self.use_graph).lower()}

    def new_state(self, batch: int, max_len: int) -> StepState:
        import torch

        s, dev = self.shapes, self.device
        gen = torch.Generator(device=dev).manual_seed(self.seed + 1)
        shape = (s.layers, batch, s.kv_heads, max_len, s.head_dim)
        cos, sin = rope_tables(s, max_len, dev, self.dtype)
        return StepState(
            tok=torch.zeros(batch, dtype=torch.long, device=dev),
            pos=torch.zeros(1, dtype=torch.long, device=dev),
            key_pos=torch.arange(max_len, device=dev),
            cache_k=torch.randn(shape, dtype=self.dtype, device=dev, generator=gen),
            cache_v=torch.randn(shape, dtype=self.dtype, device=dev, generator=gen),
            cos=cos,
            sin=sin,
        )

    def _prefill(self, st: StepState, batch: int, prompt_tokens: int) -> float:
        """Prefill random prompts into ``st``; returns TTFT in seconds (synchronised)."""
        import torch

        from calibrate.timing import synchronize

        gen = torch.Generator(device=self.device).manual_seed(self.seed + batch)
        ids = torch.randint(0, self.shapes.vocab, (batch, prompt_tokens), device=self.device, generator=gen)
        synchronize(self.device)
        t0 = time.perf_counter()
        logits = prefill(self.weights, self.shapes, ids, st.cache_k, st.cache_v, st.cos, st.sin)
        st.tok.copy_(logits.argmax(dim=-1))
        synchronize(self.device)
        return time.perf_counter() - t0

    def _capture(self, st: StepState, prompt_tokens: int):
        """Warm the step up on a side stream, then capture it in one CUDA graph."""
        import torch

        step = lambda: decode_step(self.weights, self.shapes, st)  # noqa: E731
        if not self.use_graph:
            return step
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for j in range(WARMUP_DECODE_STEPS):
                st.pos.fill_(prompt_tokens + j)
                step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        self._graph = graph
        return graph.replay

    def measure(self, batch: int, prompt_tokens: int, gen_tokens: int) -> dict:
        import torch

        from calibrate.timing import Marks, peak_gib, reset_peak, synchronize

        synchronize(self.device)
        reset_peak(self.device)
        max_len = prompt_tokens + gen_tokens
        with torch.inference_mode():
            st = self.new_state(batch, max_len)
            self._prefill(st, batch, prompt_tokens)  # warm-up prefill (untimed)
            replay = self._capture(st, prompt_tokens)
            for j in range(WARMUP_DECODE_STEPS):  # warm-up replays (untimed)
                st.pos.fill_(prompt_tokens + j)
                replay()
            t0 = time.perf_counter()
            ttft_s = self._prefill(st, batch, prompt_tokens)
            marks = Marks(self.device, 2 * gen_tokens)
            for j in range(gen_tokens - 1):
                st.pos.fill_(prompt_tokens + j)  # position of the token fed in this step
                marks.mark()
                replay()
                marks.mark()
            synchronize(self.device)
            e2e_s = time.perf_counter() - t0
            step_s = marks.pairs()
        peak, reserved = peak_gib(self.device)
        self._graph = None
        del st, replay
        return {"ttft_s": ttft_s, "step_s": step_s, "e2e_s": e2e_s,
                "peak_mem_gib": peak, "peak_reserved_gib": reserved}

    def close(self) -> None:
        self.weights = None
        self._graph = None
