"""Peak device memory of a static batch: weights, KV cache, activations, logits, workspace.

Two moments compete for the peak:
- the end of the prefill: the prompt's KV cache (the whole preallocated cache with a static
  one), the transient activations of the widest layer of one prefill forward (the MLP:
  ``activation_coeff`` tensors of tokens x widest active intermediate, half that for a plain,
  ungated MLP: ``ModelSpec.prefill_transient_width``; a chunked prefill's
  forward holds at most a chunk of sequences), and that forward's kept logits;
- the end of the generation: the full KV cache of prompt + gen tokens per sequence, a step's
  logits, as many buffers of them as the engine holds (``decode_logits_buffers``: the graph
  engine's warm-up step's and its captured graph's), and one layer's decode attention scores,
  batch x query heads x cached slots, as many buffers of them as the engine's decode attention
  holds at once (``decode_score_buffers``: the graph engine's scores and their softmax; the
  slots are the context where any layer attends to all of it, else the window).
The reported breakdown is the one at the larger moment. A windowed layer holds at most its
window of each sequence's KV. With tensor parallelism every figure is one GPU's (the weights and
KV heads split, KV heads replicated where the GPUs outnumber them, the logits gathered whole).
"""

from __future__ import annotations

import numpy as np

from roofline.prefill import chunk_sequences, logit_positions
from roofline.step import StepModel
from roofline.units import dtype_bytes


def kv_held_bytes(model: StepModel, sequences, context_tokens):
    """KV-cache bytes ``sequences`` sequences of ``context_tokens`` each hold, one GPU's share."""
    sequences = np.asarray(sequences, dtype=float)
    c = np.asarray(context_tokens, dtype=float)
    full = model.kv_bytes_per_token - model.kv_window_bytes_per_token
    windowed = c if model.window is None else np.minimum(c, model.window)
    return sequences * (c * full + windowed * model.kv_window_bytes_per_token)


def decode_score_bytes(model: StepModel, sequences, context_tokens):
    """One layer's decode attention scores alive at once, one GPU's share: the calibration's
    ``decode_score_buffers`` x sequences x query heads (split over the GPUs) x the slots a query
    scores (the context where any layer attends to all of it, else the window) x activation bytes.
    The graph engine's decode attention (calibrate.graph_engine.decode_attention) holds two: the
    scores and their softmax; with attention sinks one more, where the engine concatenates the sink
    column to the scores (``sink_score_bytes`` > 0: calibrate.graph_engine._gqa_decode)."""
    cal = model.calibration
    buffers = cal.decode_score_buffers
    if buffers and model.spec.attention_sinks and cal.sink_score_bytes > 0:
        buffers = buffers + 1.0
    sequences = np.asarray(sequences, dtype=float)
    c = np.asarray(context_tokens, dtype=float)
    if not buffers:
        return 0.0 * sequences * c
    full = model.kv_bytes_per_token - model.kv_window_bytes_per_token
    slots = c if full > 0 or model.window is None else np.minimum(c, model.window)
    heads = model.spec.num_attention_heads / model.tp
    return buffers * sequences * heads * slots * dtype_bytes(model.act_dtype)


def peak_memory(model: StepModel, batch, prompt_tokens, gen_tokens, kv_cache: str, logits: str = "last",
                prefill_ran=True):
    """The peak and its breakdown. ``prefill_ran`` (bool or array) False: the prefill did not run
    (a harness that fills the cache without it): only the end moment counts."""
    spec, cal = model.spec, model.calibration
    batch = np.asarray(batch, dtype=float)
    prompt = np.asarray(prompt_tokens, dtype=float)
    gen = np.asarray(gen_tokens, dtype=float)
    act_bytes = dtype_bytes(model.act_dtype)
    weights = spec.weight_bytes(model.weight_dtype, model.act_dtype) / model.tp
    kv_full = kv_held_bytes(model, batch, prompt + gen)
    kv_prompt = kv_full if kv_cache == "static" else kv_held_bytes(model, batch, prompt)
    forward = chunk_sequences(model, batch, prompt)  # sequences in the largest prefill forward
    act_prefill = cal.activation_coeff * forward * prompt * spec.prefill_transient_width / model.tp * act_bytes
    logits_prefill = logit_positions(forward, prompt, logits) * spec.logits_bytes_per_position(model.act_dtype)
    logits_decode = batch * spec.logits_bytes_per_position(model.act_dtype) * cal.decode_logits_buffers
    scores_decode = decode_score_bytes(model, batch, prompt + gen)
    at_prefill = kv_prompt + act_prefill + logits_prefill
    at_end = kv_full + logits_decode + scores_decode
    prefill_wins = (at_prefill >= at_end) & np.asarray(prefill_ran, dtype=bool)
    kv = np.where(prefill_wins, kv_prompt, kv_full)
    activations = np.where(prefill_wins, act_prefill, scores_decode)
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
