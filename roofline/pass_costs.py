"""What one iteration of a continuous-batching server costs: two executions of the same schedule.

The scheduler (roofline.scheduler) decides what each iteration runs -- ``decoding`` sequences
decoding one token each over ``slots`` occupied slots (their contexts summing to ``kv_read``
tokens), and prefill work of ``prefill_tokens`` tokens in ``chunks`` chunks with
``prefill_pairs`` causal (query, key) pairs -- and asks a cost object for its seconds:

* ``decode_s(slots, decoding, kv_read)``: an iteration that only decodes;
* ``pass_s(slots, decoding, kv_read, prefill_tokens, prefill_pairs, chunks)``: one with a prefill
  (and decodes when ``decoding`` > 0);
* ``wake_s``: what an idle server takes to start after the next arrival.

``FusedCost`` (``pass_cost="fused"``, the default): each iteration is ONE forward pass of the
step model (roofline.step.StepModel.pass_s) over all of it -- ``PassWork(decoding, kv_read,
prefill_tokens, prefill_pairs, chunks)``, logits for every chunk --, as vLLM V1 and SGLang fuse
decodes and prefill chunks into one batch. The decode reads each sequence's context (a dynamic,
paged cache). No host time besides the calibration's overheads; ``wake_s`` 0.

``LoopCost`` (``pass_cost="serving-loop"``): the graph engine's continuous-batching loop
(calibrate/serving_loop.py), as it executes:

* a decode step is one CUDA-graph replay at the bucket of ``slots`` (the smallest capture size
  >= slots: 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, ... and max_num_seqs), reading the whole static
  cache of every bucket slot: ``StepModel.pass_s(decode_work(bucket, bucket x max_model_len))``
  + ``decode_extra_s_per_layer`` x layers (the loop's decode graph has more kernels per layer
  than the graph engine's the calibration was fitted on: per-slot RoPE matrices, the scatter
  of K/V at per-slot positions, the per-slot mask);
* a prefill pass (terms with ``prefill_graphs``, the shipped H200 ones) is one CUDA-graph
  replay of the pass padded to the loop's token bucket (``prefill_token_buckets`` of
  max_num_batched_tokens; ``padded_prefill``): ``pnorm(prefill_floor_s_per_layer x layers,
  StepModel.work_s(the padded work), prefill_floor_exponent)``, the kernels' own time without
  the calibration's eager overhead plus the graph's fixed time a layer. Terms without it
  describe the loop's earlier eager prefill, whose launches came from Python: the longer of
  the GPU's work and the host's launches, ``pnorm(floor x layers, StepModel.pass_s(prefill_work(...)),
  exponent)``;
* a ``chunked`` iteration runs the decode step, then the prefill pass (not fused): the sum;
* every iteration adds the host's time around the passes (scheduling, packing, the token
  sync): ``host_decode_s`` + ``host_decode_s_per_seq`` x decoding sequences for a decode step,
  ``host_prefill_s`` + ``host_prefill_s_per_seq`` x chunks when there is a prefill (a chunked
  iteration: both per-sequence parts); an idle loop wakes ``wake_s`` after the arrival it slept
  for.

The loop's terms are measured, not guessed: roofline.serving_replay fits them to the loop's
committed iteration logs (which runs, and the held-out errors: docs/serving.md); they are
stored as data in hardware_profiles/serving/<card>-<engine>-loop.json (``LoopTerms``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.buckets import capture_sizes, prefill_token_buckets  # noqa: F401 - re-exported
from roofline.errors import RooflineError
from roofline.step import StepModel, decode_work, pnorm, prefill_work

PASS_COSTS = ("fused", "serving-loop")


def padded_prefill(tokens: float, pairs: float, chunks: float, buckets, rows: float) -> tuple:
    """(tokens, pairs, logit rows) a prefill graph computes for a pass of ``tokens`` tokens with
    ``pairs`` causal pairs: the tokens padded to the smallest bucket that holds them, the padding
    one more causal sequence, logits for ``rows`` rows (max_num_seqs). Without buckets (an eager
    pass, or more tokens than the largest bucket) the pass as it is."""
    if not buckets or tokens > buckets[-1]:
        return tokens, pairs, chunks
    for size in buckets:
        if size >= tokens:
            pad = size - tokens
            return float(size), pairs + pad * (pad + 1) / 2.0, float(rows)
    raise AssertionError("unreachable")


class FusedCost:
    """One step-model pass per iteration (module docstring)."""

    wake_s = 0.0

    def __init__(self, step: StepModel):
        self.step = step
        ps = step.pass_s

        def decode_s(slots, decoding, kv_read):
            return ps((float(decoding), kv_read, 0.0, 0.0, 0.0, None, None))

        def pass_s(slots, decoding, kv_read, prefill_tokens, prefill_pairs, chunks):
            return ps((float(decoding), kv_read, prefill_tokens, prefill_pairs, chunks, None, None))

        self.decode_s, self.pass_s = decode_s, pass_s

    def decode_costs(self, slots, decoding, kv_read):
        """decode_s for an array of ``kv_read`` (one vectorised pass-model call)."""
        return self.step.pass_s((float(decoding), kv_read, 0.0, 0.0, 0.0, None, None))


class Term(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(ge=0)
    source: str = Field(min_length=1)


class LoopTerms(BaseModel):
    """The serving loop's measured terms on one card and engine (the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    card: str
    engine: str
    loop: str = Field(description="the server loop the terms describe")
    decode_extra_s_per_layer: Term
    prefill_floor_s_per_layer: Term
    prefill_floor_exponent: Term
    host_decode_s: Term
    host_decode_s_per_seq: Term
    host_prefill_s: Term
    host_prefill_s_per_seq: Term
    wake_s: Term
    prefill_graphs: bool = Field(False, description="whole-prompt prefill passes are CUDA-graph replays padded to "
                                 "token buckets (prefill_token_buckets of max_num_batched_tokens); else eager")
    fitted_on: list[str]
    held_out: list[str] = []
    note: str = ""


def loop_terms_path(card: str, engine: str) -> Path:
    from roofline.hardware import profiles_dir

    return profiles_dir() / "serving" / f"{card}-{engine}-loop.json"


def load_loop_terms(source=None, *, card: str | None = None, engine: str | None = None) -> LoopTerms:
    """A LoopTerms, a file path, or (None) the shipped file of ``card`` and ``engine``."""
    if isinstance(source, LoopTerms):
        return source
    if source is None:
        path = loop_terms_path(card, engine)
        if not path.is_file():
            raise RooflineError(
                f"no serving-loop terms for {card} with engine {engine} (hardware_profiles/serving/ has them only "
                "for the runs measured: h200 with --engine graph); give loop_terms=FILE", "loop_terms")
    else:
        path = Path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RooflineError(f"cannot read {path}: {exc.strerror or exc}", "loop_terms") from None
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})", "loop_terms") from None
    try:
        return LoopTerms(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RooflineError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}", "loop_terms") from None
    except TypeError:
        raise RooflineError(f"{path}: a loop-terms file holds a JSON object", "loop_terms") from None


class LoopCost:
    """The serving loop's iteration times (module docstring)."""

    def __init__(self, step: StepModel, terms: LoopTerms, max_model_len: int, max_num_seqs: int,
                 max_num_batched_tokens: int | None = None):
        self.step, self.terms = step, terms
        # prefill graphs: buckets up to the iteration's token budget (the loop's default, max(T, 2048))
        self.prefill_buckets = (prefill_token_buckets(max_num_batched_tokens or max(max_model_len, 2048))
                                if terms.prefill_graphs else [])
        self.logit_rows = float(max_num_seqs)
        layers = step.spec.num_hidden_layers
        self.max_model_len = max_model_len
        self.wake_s = terms.wake_s.value
        self.floor_s = terms.prefill_floor_s_per_layer.value * layers
        self.exponent = terms.prefill_floor_exponent.value
        extra = terms.decode_extra_s_per_layer.value * layers
        sizes = capture_sizes(max_num_seqs)
        bucket = [0] * (max_num_seqs + 1)
        j = 0
        for n in range(1, max_num_seqs + 1):
            while sizes[j] < n:
                j += 1
            bucket[n] = sizes[j]
        self.bucket = bucket
        by_bucket = {b: step.pass_s(decode_work(float(b), float(b) * max_model_len)) + extra for b in sizes}
        self.decode_device_s = [0.0] + [by_bucket[bucket[n]] for n in range(1, max_num_seqs + 1)]
        host_d, host_p = terms.host_decode_s.value, terms.host_prefill_s.value
        per_d, per_p = terms.host_decode_s_per_seq.value, terms.host_prefill_s_per_seq.value
        dec = self.decode_device_s
        prefill_device = self.prefill_device_s

        def decode_s(slots, decoding, kv_read):
            return dec[slots] + host_d + per_d * decoding

        def pass_s(slots, decoding, kv_read, prefill_tokens, prefill_pairs, chunks):
            device = prefill_device(prefill_tokens, prefill_pairs, chunks)
            if decoding:
                device += dec[slots] + per_d * decoding
            return device + host_p + per_p * chunks

        self.decode_s, self.pass_s = decode_s, pass_s

    def decode_costs(self, slots, decoding, kv_read):
        """decode_s for an array of ``kv_read`` (the static cache: the same price every step)."""
        import numpy as np

        return np.full(len(kv_read), self.decode_s(slots, decoding, 0.0))

    def prefill_device_s(self, tokens: float, pairs: float, chunks: float) -> float:
        """One prefill pass: the GPU's work (padded to the token bucket under prefill graphs) and
        the host's launches, blended."""
        if not self.prefill_buckets:
            return pnorm(self.floor_s, self.step.pass_s(prefill_work(tokens, pairs, chunks)), self.exponent)
        return pnorm(self.floor_s, self.step.work_s(prefill_work(*padded_prefill(
            tokens, pairs, chunks, self.prefill_buckets, self.logit_rows))), self.exponent)
