"""Peak device memory of a static batch: weights, KV cache, activations, logits, workspace.

Two moments compete for the peak:
- the end of the prefill: the prompt's KV cache (the whole preallocated cache with a static
  one), the transient activations of the widest layer (the MLP: ``activation_coeff`` tensors of
  tokens x intermediate_size), and the kept logits;
- the end of the generation: the full KV cache of prompt + gen tokens per sequence and one
  step's logits.
The reported breakdown is the one at the larger moment.
"""

from __future__ import annotations

import numpy as np

from roofline.step import StepModel
from roofline.prefill import logit_positions
from roofline.units import dtype_bytes


def peak_memory(model: StepModel, batch, prompt_tokens, gen_tokens, kv_cache: str, logits: str = "last"):
    spec, cal = model.spec, model.calibration
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    gen = np.asarray(gen_tokens, dtype=float)
    act_bytes = dtype_bytes(model.act_dtype)
    weights = spec.weight_bytes(model.weight_dtype, model.act_dtype)
    kv_full = batch * (prompt + gen) * model.kv_bytes_per_token
    kv_prompt = kv_full if kv_cache == "static" else batch * prompt * model.kv_bytes_per_token
    tokens = batch * prompt
    act_prefill = cal.activation_coeff * tokens * spec.intermediate_size * act_bytes
    logits_prefill = logit_positions(batch, prompt, logits) * spec.logits_bytes_per_position(model.act_dtype)
    logits_decode = batch * spec.logits_bytes_per_position(model.act_dtype)
    at_prefill = kv_prompt + act_prefill + logits_prefill
    at_end = kv_full + logits_decode
    prefill_wins = at_prefill >= at_end
    kv = np.where(prefill_wins, kv_prompt, kv_full)
    activations = np.where(prefill_wins, act_prefill, 0.0)
    logits_b = np.where(prefill_wins, logits_prefill, logits_decode)
    total = weights + kv + activations + logits_b + cal.workspace_bytes
    shape = total.shape
    return {
        "peak_bytes": total,
        "weights_bytes": np.full(shape, weights),
        "kv_bytes": kv + 0 * total,
        "activations_bytes": activations + 0 * total,
        "logits_bytes": logits_b + 0 * total,
        "workspace_bytes": np.full(shape, cal.workspace_bytes),
        "peak_at": np.where(prefill_wins, "prefill", "end"),
    }
