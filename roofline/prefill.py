"""The prefill: time to first token for a static batch whose prompts are processed together.

A prefill of ``batch`` prompts of ``prompt_tokens`` each runs every weight matmul on
batch x prompt rows, causal attention over the prompt (prompt(prompt+1)/2 query-key pairs per
sequence and head), and the LM head only for the positions whose logits are kept
(``logits="last"``: one per sequence, as ``logits_to_keep=1``; ``"all"``: every position).
It reads the weights once and writes the prompt's KV cache.
"""

from __future__ import annotations

import numpy as np

from roofline.decode import StepModel, bound_index
from roofline.errors import RooflineError


def logit_positions(batch, prompt_tokens, logits: str):
    if logits == "last":
        return np.asarray(batch, dtype=float)
    if logits == "all":
        return np.asarray(batch, dtype=float) * np.asarray(prompt_tokens, dtype=float)
    raise RooflineError(f"logits must be 'last' or 'all', not {logits!r}")


def prefill_work(model: StepModel, batch, prompt_tokens, logits: str = "last"):
    """(bytes, linear FLOPs, attention FLOPs) of the prefill."""
    spec = model.spec
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    tokens = batch * prompt
    linear = tokens * spec.body_linear_flop_per_token + 2.0 * spec.lm_head_params * logit_positions(
        batch, prompt, logits
    )
    pairs = batch * prompt * (prompt + 1.0) / 2.0
    attention = pairs * spec.attention_flop_per_context_token
    bytes_ = model.weight_read_bytes + tokens * model.kv_bytes_per_token
    return bytes_, linear, attention


def prefill(model: StepModel, batch, prompt_tokens, logits: str = "last"):
    """TTFT of a static batch: the prefill's time, components and the largest term."""
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    tokens = batch * prompt
    bytes_, linear, attention = prefill_work(model, batch, prompt, logits)
    overhead = np.full(np.shape(bytes_), model.calibration.prefill_overhead_s)
    total, overhead, memory_s, compute_s = model.pass_time(
        overhead,
        model.weight_read_bytes,
        0.0,
        tokens * model.kv_bytes_per_token,
        0.0,
        0.0,
        gemm_flop_prefill=linear,
        attention_flop_prefill=attention,
        prefill_act_tokens=tokens,
    )
    return {
        "ttft_s": total,
        "overhead_s": overhead,
        "memory_s": memory_s,
        "compute_s": compute_s,
        "bytes": bytes_ + tokens * model.prefill_act_bytes_per_token,
        "flop": linear + attention,
        "bound_index": bound_index(overhead, memory_s, compute_s),
    }
