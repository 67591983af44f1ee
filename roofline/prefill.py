"""The prefill: time to first token for a static batch whose prompts are processed together.

A prefill of ``batch`` prompts of ``prompt_tokens`` each runs every weight matmul on
batch x prompt rows, causal attention over the prompt (prompt(prompt+1)/2 query-key pairs per
sequence and head), and the LM head only for the positions whose logits are kept
(``logits="last"``: one per sequence, as ``logits_to_keep=1``; ``"all"``: every position).
It reads the weights once and writes the prompt's KV cache. Priced by roofline.step.
"""

from __future__ import annotations

import numpy as np

from roofline.step import StepModel, bound_index, prefill_work

LOGITS = ("last", "all")


def logit_positions(batch, prompt_tokens, logits: str):
    """Positions whose logits a prefill computes: one per sequence, or every position."""
    if logits == "last":
        return np.asarray(batch, dtype=float)
    return np.asarray(batch, dtype=float) * np.asarray(prompt_tokens, dtype=float)


def static_prefill_work(batch, prompt_tokens, logits: str = "last"):
    """The PassWork of prefilling ``batch`` prompts of ``prompt_tokens`` each."""
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    return prefill_work(batch * prompt, batch * prompt * (prompt + 1.0) / 2.0, logit_positions(batch, prompt, logits))


def prefill(model: StepModel, batch, prompt_tokens, logits: str = "last") -> dict:
    """TTFT of a static batch: the prefill's time, components, work and the largest term."""
    work = static_prefill_work(batch, prompt_tokens, logits)
    out = model.pass_breakdown(work)
    out["ttft_s"] = out.pop("step_s")
    out["bytes"] = model.bytes_counted(work) + work.prefill_tokens * model.prefill_act_bytes_per_token
    out["flop"] = model.linear_flop(work) + model.attention_flop(work)
    out["bound_index"] = bound_index(out["overhead_s"], out["memory_s"], out["compute_s"])
    return out
