"""What one iteration of a continuous-batching server costs: two executions of the same schedule.

The scheduler (roofline.scheduler) decides what each iteration runs -- ``decoding`` sequences
decoding one token each over ``slots`` occupied slots (their contexts summing to ``kv_read``
tokens), and prefill work of ``prefill_tokens`` tokens in ``chunks`` chunks with
``prefill_pairs`` causal (query, key) pairs -- and asks a cost object for its seconds:

* ``decode_s(slots, decoding, kv_read)``: an iteration that only decodes;
* ``pass_s(slots, decoding, kv_read, prefill_tokens, prefill_pairs, chunks, cont_tokens=0,
  cont_cached=0, longest=0)``: one with a prefill (and decodes when ``decoding`` > 0); when its
  first chunk continues a prompt after cached tokens (policy chunked), ``cont_tokens`` t and
  ``cont_cached`` c are that chunk's tokens and the tokens cached before it; ``longest``: the
  pass's longest prompt or chunk (0: not known), which only the loop's measured prefill attention
  reads;
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
  + ``decode_extra_s_per_layer`` x layers (what the loop's decode step costs beyond the graph
  engine's the calibration was fitted on: slower kernels -- the scatter of K/V at per-slot
  positions, the softmax over per-slot masked rows --, the slots' own positions, and a per-step
  staging time the 28-layer fit runs cannot tell from a per-layer one: device calls 86-87,
  docs/serving.md);
* a prefill pass (terms with ``prefill_graphs``, the shipped H200 ones) is one CUDA-graph
  replay of the pass padded to the loop's token bucket (``prefill_token_buckets`` of
  max_num_batched_tokens; ``padded_prefill``). With ``prefill_gemm_table`` (the shipped terms)
  it is priced part by part, as the loop's ``_forward`` runs it:
  ``prefill_floor_s_per_layer`` x layers (the graph's fixed time)
  + with ``prefill_kv_repeat_s_per_layer`` and grouped queries, that x layers: the fixed time of
  the two kernels a layer that repeat K and V to every query head, which a full multi-head model
  does not run (measured, not fitted: calibrate/runs/kv_repeat_probe.py, ~4 us a layer on the
  H100, device calls 109-110; ``kv_repeat_s_from_probe``)
  + with ``prefill_launch_s``, that x the elementwise kernels a layer launches
  (``loop_elementwise_launches``: 19 with SwiGLU, 18 with a plain MLP, 4 more with q/k norms) x
  layers: their fixed time, ~2.1 us each on the H100 (measured, not fitted: the kernel walks of
  device calls 110, 112 and 117, ``launch_s_from_walks``), so a layout that launches more kernels
  than the fit runs' pays for them
  + the four linears a layer (``loop_layer_gemms``) at the bucket's tokens and the LM head at
  max_num_seqs rows, each from the card's measured matmul table (roofline.gemm: a 1,024-token
  matmul of a 1.5B model's widths runs at ~525 TFLOP/s on the H200, a 7B model's at ~700: one
  prefill efficiency cannot price both)
  + the step model's attention (and collectives); with ``prefill_attention_measured``, the
  attention the loop's own kernel takes instead, from the card's chunk table
  (``loop_attention_s``, roofline.chunk_table.ChunkTable.prefill_attention_s: the varlen call
  ran lone prompts of 256-1,024 tokens at 8-98 TFLOP/s on the H200 where the step model prices
  cuDNN's 588), its bytes then out of the elementwise count. The shipped terms leave this out:
  priced, it made the held-out replays' tails worse though the passes' prices better
  (docs/serving.md, "The prefill graphs' attention")
  + the elementwise kernels' bytes, counted from the loop's code (``loop_elementwise_elements``),
  over ``prefill_elementwise_bytes_per_s``
  + with ``prefill_empty_tile_s``, the attention's empty query tiles (``empty_attention_tiles``):
  the loop hands its varlen attention max_num_seqs + 1 sequences whatever the pass holds, so
  every layer launches ceil(bucket / 128) query tiles a head for every slot, and those past a
  sequence's end exit at once; at 256 slots they made llama-3.1-8b's 2,048-token pass 9% slower
  than at 64 (device call 96, ``empty_tile_s_from_probe``). The shipped terms leave this out:
  priced, it made the held-out replays worse (docs/serving.md).
  Without the table (a layout the loop does not run, or older terms): ``pnorm(floor x layers,
  StepModel.work_s(the padded work), prefill_floor_exponent)``, the kernels' time without the
  calibration's eager overhead. Terms without ``prefill_graphs`` describe the loop's earlier
  eager prefill, whose launches came from Python: ``pnorm(floor x layers,
  StepModel.pass_s(prefill_work(...)), exponent)``;
* a ``chunked`` iteration runs the decode step, then the prefill pass (not fused): the sum. A
  pass whose first chunk (t tokens) continues a prompt after c cached tokens is the loop's *chunk
  graph*: the prefill graph's price plus, every layer, its attention's extra time from the card's
  chunk table (``chunk_attention_table``, roofline.chunk_table: the chunk's queries walk all c + t
  keys in a few thread blocks, so the time grows with c far beyond the FLOPs); the table was
  measured at its grid's cache rows a slot and its nearest head shape, and the chunk graph copies
  all T = max_model_len rows of its slot at the model's own K/V width out, so a T or a K/V width
  other than the table's adds (or takes off) the copy's difference (``loop_chunk_elements``'
  per-pass part, 8 x rows x K/V width elements a layer): priced a row from the same probe at
  other rows (``chunk_rows_table``, roofline.chunk_table.copy_s_per_row; on the H200 these copies
  ran at 0.8-1.2 TB/s, 50-73% of the elementwise rate, 1.64 TB/s in that fit), in proportion to the K/V
  width, or without it at the elementwise rate. Without the table,
  only the extra bytes ``loop_chunk_elements`` counts (a floor: they are a small part);
* every iteration adds the host's time around the passes (scheduling, packing, the token
  sync): ``host_decode_s`` + ``host_decode_s_per_seq`` x decoding sequences for a decode step,
  ``host_prefill_s`` + ``host_prefill_s_per_seq`` x chunks when there is a prefill (a chunked
  iteration: both per-sequence parts), and ``host_finish_s`` for each sequence that finishes
  (the loop frees its blocks and copies the last slot's KV into its hole; ``finish_s``, which
  the scheduler adds after the iteration's tokens are out); an idle loop wakes ``wake_s`` after
  the arrival it slept for. The host's speed is the machine's: a run that carries the loop's
  host probe (calibrate.serving_loop.host_probe) is replayed with the host terms scaled by its
  probe over the fit runs' (``scaled_for_host``; with probes before and after the run, their
  geometric mean: ``run_host_probe``); on the lent H200 machines the same loop's host
  time differed 2x from machine to machine.

The loop's terms are measured, not guessed: roofline.serving_replay fits them to the loop's
committed iteration logs (which runs, and the held-out errors: docs/serving.md); they are
stored as data in hardware_profiles/serving/<card>-<engine>-loop.json (``LoopTerms``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from roofline.buckets import capture_sizes, prefill_token_buckets  # noqa: F401 - re-exported
from roofline.errors import RooflineError
from roofline.step import StepModel, decode_work, pnorm, prefill_work
from roofline.units import dtype_bytes

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


class ScaledPasses:
    """``step``'s passes at ``scale`` times their price: the static server's model under
    ``pass_time_scale`` (roofline.serving.serve_static reads only ``pass_s``)."""

    def __init__(self, step: StepModel, scale: float):
        self.step, self.scale = step, scale

    def pass_s(self, work):
        return self.step.pass_s(work) * self.scale


#: The most prices one memo keeps (FusedCost's decode steps; LoopCost's prefill passes): ~150 bytes
#: each, so ~40 MB a memo at most (a simulate with --pass-time-spread builds three cost objects);
#: past it, new prices are computed every time.
MEMO_MAX = 1 << 18
#: The most cells FusedCost.decode_costs's tables hold (8 bytes each: 32 MiB); past it, a stretch
#: whose table would grow is priced every time.
STRETCH_CELLS_MAX = MEMO_MAX * 16


class FusedCost:
    """One step-model pass per iteration (module docstring)."""

    wake_s = 0.0
    finish_s = 0.0

    def __init__(self, step: StepModel, scale: float = 1.0):
        """``scale`` multiplies every pass's time (a GPU that much slower or faster than priced)."""
        self.step, self.scale = step, scale
        plain = step.pass_s

        def scaled(work):
            return plain(work) * scale

        ps = plain if scale == 1.0 else scaled  # (the simulators' hot loop: no multiply at 1)
        memo = self._steps = {}

        def decode_s(slots, decoding, kv_read):
            # a step's price depends on (decoding, kv_read) alone, and few slots revisit the same
            # pairs millions of times: remembered (MEMO_MAX of them), the same number either way
            key = (decoding, kv_read)
            seconds = memo.get(key)
            if seconds is None:
                seconds = ps((float(decoding), kv_read, 0.0, 0.0, 0.0, None, None))
                if len(memo) < MEMO_MAX:
                    memo[key] = seconds
            return seconds

        def pass_s(slots, decoding, kv_read, prefill_tokens, prefill_pairs, chunks, cont_tokens=0, cont_cached=0,
                   longest=0):
            # a fused pass reads a continued chunk's cached keys from the paged cache: no copy
            return ps((float(decoding), kv_read, prefill_tokens, prefill_pairs, chunks, None, None))

        self.decode_s, self.pass_s, self._ps = decode_s, pass_s, ps
        #: decode_costs' prices, apart from decode_s's scalar ones: per decoding count, an array
        #: indexed by the whole number of cached tokens read (NaN: not priced yet)
        self._stretches: dict = {}
        self._stretch_cells = 0

    def _price_steps(self, decoding, kv_read):
        return self._ps((float(decoding), kv_read, 0.0, 0.0, 0.0, None, None))

    def decode_run(self, decoding: int, first: int, stride: int, steps: int) -> list:
        """decode_costs for the quiet stretch the scheduler runs: ``steps`` decode steps of
        ``decoding`` sequences reading ``first``, ``first + stride``, ... cached tokens (whole
        numbers, ``first`` >= 0, ``stride`` >= 1), as a list. The remembered prices are one strided
        slice of the decoding count's table, no index array: the same numbers as decode_costs."""
        table = self._stretches.get(decoding)
        top = first + stride * (steps - 1) + 1
        if table is None or len(table) < top or first < 0:
            return self.decode_costs(decoding, decoding, float(first) + stride * np.arange(steps, dtype=float)).tolist()
        seconds = table[first:top:stride]  # a view: prices written into it land in the table
        self._fill(decoding, seconds, lambda: float(first) + stride * np.arange(steps, dtype=float))
        return seconds.tolist()

    def _fill(self, decoding, seconds, reads) -> bool:
        """Price, in place, the steps of ``seconds`` not priced yet (NaN), at the cached tokens
        ``reads()`` gives for all of them (made only when one is missing): one call, for every step
        where none is known; whether any was priced."""
        todo = np.isnan(seconds)
        if not todo.any():
            return False
        kv_read = reads()
        seconds[todo] = self._price_steps(decoding, kv_read if todo.all() else kv_read[todo])
        return True

    def decode_costs(self, slots, decoding, kv_read):
        """decode_s for an array of ``kv_read`` (one vectorised pass-model call). Each step's price
        is remembered (MEMO_MAX x 16 of them, in one array per decoding count indexed by the tokens
        read) and only the steps not priced before are priced: with few slots the same (decoding,
        kv_read) pairs come back all through a stream. The same numbers either way."""
        if not len(kv_read):
            return self._price_steps(decoding, kv_read)
        at = kv_read.astype(np.int64)
        if at.min() < 0 or not np.array_equal(at, kv_read):  # (the scheduler's are whole and ascending)
            return self._price_steps(decoding, kv_read)
        table = self._stretches.get(decoding)
        top = int(at.max()) + 1
        if table is None or len(table) < top:
            size = max(top, 2 * len(table) if table is not None else 1024)
            grown = self._stretch_cells + size - (len(table) if table is not None else 0)
            if grown > STRETCH_CELLS_MAX:
                return self._price_steps(decoding, kv_read)
            wider = np.full(size, np.nan)
            if table is not None:
                wider[:len(table)] = table
            self._stretches[decoding], self._stretch_cells, table = wider, grown, wider
        seconds = table[at]  # a copy (an index array): priced steps are written back
        if self._fill(decoding, seconds, lambda: kv_read):
            table[at] = seconds
        return seconds


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
    host_finish_s: Term | None = Field(None, description="host time a finishing sequence adds to its iteration "
                                       "(the loop frees its blocks and moves the last slot's KV into its hole)")
    host_probe: dict[str, float] | None = Field(None, description="the fit runs' host probe (calibrate.serving_loop."
                                               "host_probe; mean of prefill_host_s, decode_host_s, and its "
                                               "decode_seqs): a run replayed with its own probe has the host terms "
                                               "scaled by its figures over these (scaled_for_host)")
    prefill_gemm_table: str | None = Field(None, description="the card's matmul table (a gemm probe's JSON, relative "
                                           "to hardware_profiles/) that prices the prefill graphs' linears")
    prefill_elementwise_bytes_per_s: Term | None = Field(
        None, description="with prefill_gemm_table: the rate of the prefill graphs' elementwise kernels (norms, "
        "RoPE, K/V writes and GQA repeats, attention's inputs and output, SwiGLU, residuals), whose bytes are "
        "counted from the loop's code (loop_elementwise_elements)")
    chunk_attention_table: str | None = Field(
        None, description="with prefill_gemm_table: the card's chunk table (a chunk probe's JSON, relative to "
        "hardware_profiles/) that prices a chunk graph's attention beyond the prefill graph's (roofline.chunk_table)")
    chunk_rows_table: str | None = Field(
        None, description="with chunk_attention_table: the same probe at other cache rows a slot, whose difference "
        "prices the chunk graph's copy of its slot's rows a row (roofline.chunk_table.copy_s_per_row); without it "
        "the copy's bytes are priced at prefill_elementwise_bytes_per_s")
    prefill_empty_tile_s: Term | None = Field(
        None, description="with prefill_gemm_table: the time of one empty query tile of the prefill graphs' varlen "
        "attention, a layer and a head (empty_attention_tiles counts them; empty_tile_s_from_probe measures it)")
    prefill_kv_repeat_s_per_layer: Term | None = Field(
        None, description="with prefill_gemm_table: the fixed time of the two kernels a layer that repeat K and V "
        "to every query head before the prefill graphs' attention, run only for grouped-query models (their bytes "
        "are in loop_elementwise_elements); measured with and without them in the same graph "
        "(calibrate/runs/kv_repeat_probe.py, kv_repeat_s_from_probe), not fitted; prefill_floor_s_per_layer is "
        "then the fixed time of what every model runs (with prefill_launch_s, of what a layer takes beyond its "
        "kernels' fixed times)")
    prefill_launch_s: Term | None = Field(
        None, description="the fixed time of one elementwise kernel of the prefill graphs, priced for each of the "
        "kernels a layer runs beside its matmuls, attention and K/V repeats (loop_elementwise_launches: 18 with a "
        "plain MLP, 19 with SwiGLU, 4 more with q/k norms), in the part-by-part price (prefill_gemm_table) and, with "
        "the floor and the repeats, as the fixed time where a model's matmuls are the step model's; measured from "
        "kernel walks (calibrate/runs/prefill_kernel_walk.py, launch_s_from_walks), not fitted; "
        "prefill_floor_s_per_layer is then what a layer takes beyond its kernels' fixed times")
    prefill_attention_measured: bool = Field(
        False, description="with chunk_attention_table: the prefill graphs' attention (K/V repeats and the varlen "
        "call) priced from the chunk table's prefill_s points (roofline.chunk_table.ChunkTable.prefill_attention_s) "
        "instead of the step model's attention, and its bytes left out of the elementwise count "
        "(loop_attention_elements)")
    fitted_on: list[str]
    held_out: list[str] = []
    note: str = ""
    transferred_from: str | None = Field(None, description="the card whose fitted terms these are, on a card with no "
                                         "serving runs of its own (transferred_loop_terms); None: fitted on this card")

    @model_validator(mode="after")
    def _measured_attention_needs_its_table(self):
        if self.prefill_attention_measured and not self.chunk_attention_table:
            raise ValueError("prefill_attention_measured needs chunk_attention_table (the chunk probe that measured "
                             "the attention)")
        return self


#: query rows in one tile of the loop's varlen attention (torch.nn.attention.varlen, a
#: flash-attention 2 forward: its grid is (query tiles of the longest sequence, sequences, heads))
ATTENTION_QUERY_TILE = 128


def empty_attention_tiles(spec, bucket: float, max_num_seqs: int, seqs: float) -> float:
    """The query tiles a prefill graph's varlen attention launches for no query row, over all its
    layers and heads: the loop hands it max_num_seqs + 1 sequences whatever the pass holds (the
    pass's ``seqs`` prompts, the padding as one more, then empty ones; calibrate/serving_loop.py
    ``_stage_prefill``) with the bucket as the longest, so every layer launches ceil(bucket / 128)
    tiles a head for every one of them; the pass's tokens fill about one bucket's worth, plus a
    partial tile at the end of each prompt and of the padding. The rest exit at once, each costing
    the SMs a block's launch and exit (device call 96)."""
    tiles = math.ceil(bucket / ATTENTION_QUERY_TILE)
    empty = max(0.0, (max_num_seqs + 1) * tiles - tiles - seqs - 1)
    return float(spec.num_hidden_layers * spec.num_attention_heads * empty)


def empty_tile_s_from_probe(path) -> tuple[float, list[dict]]:
    """Seconds per empty query tile (``empty_attention_tiles``) from a prefill-slots probe
    (calibrate/runs/prefill_config_probe.py: each model's prefill graphs timed at several slot
    counts, buckets filled with 256-token prompts unless a configuration records other ``prompts``):
    for each model (and prompt layout and tokens), each configuration's time at a bucket less that
    of its configuration with the fewest slots (the same pass, more empty tiles), against the
    difference in empty tiles; the least-squares slope through the origin. Returns it and the
    points ({model, slots, base_slots, bucket, extra_s, extra_tiles})."""
    from roofline.model_spec import load_model

    probe = json.loads(Path(path).read_text(encoding="utf-8"))
    points = []
    by_model: dict[tuple, list[dict]] = {}
    for config in probe["configs"]:
        key = (config["model"], config.get("layout", "256"), config.get("tokens", "const"))
        by_model.setdefault(key, []).append(config)
    for (model, _, _), configs in sorted(by_model.items()):
        spec = load_model(model)
        base_slots = min(c["slots"] for c in configs)
        base = [c for c in configs if c["slots"] == base_slots]
        for config in configs:
            if config["slots"] == base_slots:
                continue
            for bucket, timing in config["buckets"].items():
                before = [b["buckets"][bucket]["cool_s"] for b in base if bucket in b["buckets"]]
                if not before:
                    continue
                seqs = len(config["prompts"][bucket]) if "prompts" in config else int(bucket) // 256
                points.append({"model": model, "slots": config["slots"], "base_slots": base_slots,
                               "bucket": int(bucket), "extra_s": timing["cool_s"] - float(np.mean(before)),
                               "extra_tiles": empty_attention_tiles(spec, int(bucket), config["slots"], seqs)
                               - empty_attention_tiles(spec, int(bucket), base_slots, seqs)})
    x = np.array([p["extra_tiles"] for p in points])
    y = np.array([p["extra_s"] for p in points])
    if not len(x) or not float(x @ x):
        raise RooflineError(f"{path}: no configuration of a model at more slots than another: nothing to measure")
    return float(x @ y / (x @ x)), points


def loop_kv_repeat_s(spec, per_layer_s: float | None) -> float:
    """The K/V repeats' fixed time a prefill pass (``per_layer_s`` a layer, e.g. the terms'
    prefill_kv_repeat_s_per_layer): every layer of a grouped-query model, none of a full multi-head
    one (the loop's ``_forward`` repeats K and V only with grouped queries)."""
    grouped = spec.num_attention_heads > spec.num_key_value_heads
    return per_layer_s * spec.num_hidden_layers if per_layer_s is not None and grouped else 0.0


#: kernel launches a layer of the loop's prefill graph beside its matmuls, its attention and its K/V
#: repeats, by what the layer runs (``loop_elementwise_launches``, counted from ``_forward``)
LAUNCHES_EVERY_LAYER = 17  # 2 RMSNorms, RoPE's 10, 2 cache writes, 2 residual adds, the attention's fill
LAUNCHES_GATED_MLP, LAUNCHES_PLAIN_MLP = 2, 1  # silu and the multiply; GELU
LAUNCHES_QK_NORM = 4  # q and k each: a copy to contiguous rows, an RMSNorm


def loop_elementwise_launches(spec) -> int:
    """Kernels one layer of the loop's prefill graph launches beside its matmuls, its attention
    and the K/V repeats (``prefill_kv_repeat_s_per_layer`` prices those), counted from ``_forward``
    (calibrate/serving_loop.py): two RMSNorms; RoPE on q and on k as x cos + cat(-x2, x1) sin (a
    multiply, a negation, a concatenation, a multiply and an add each: 10); K and V written into the
    cache (2); two residual adds; the varlen attention's fill; SwiGLU's silu and multiply (2) or a
    plain MLP's GELU (1); with q/k norms, q and k each copied to contiguous rows and normed (4).
    Device calls 110, 112 and 117 counted 18.2-25.3 a layer on twelve models under torch.profiler,
    the repeats and a pass's own kernels (the embedding, the last norm, the argmax) included
    (benchmarks/prefill_kernel_walk.py, part 2)."""
    mlp = LAUNCHES_GATED_MLP if spec.mlp_gated else LAUNCHES_PLAIN_MLP
    return LAUNCHES_EVERY_LAYER + mlp + (LAUNCHES_QK_NORM if spec.qk_norm != "none" else 0)


def loop_walk_launches(spec) -> int:
    """The elementwise launches a layer a kernel walk counts in the loop's prefill: those of
    ``loop_elementwise_launches`` and, with grouped queries, the two K/V repeats."""
    return loop_elementwise_launches(spec) + (2 if spec.num_attention_heads > spec.num_key_value_heads else 0)


def launch_line(points) -> tuple[float, float]:
    """(seconds a launch, seconds a byte): the least-squares line through the origin of the
    points' elementwise time a layer against their launches and bytes a layer (``launch_s_from_walks``'
    points)."""
    x = np.array([[p["launches"], p["bytes"]] for p in points])
    coef, *_ = np.linalg.lstsq(x, np.array([p["seconds"] for p in points]), rcond=None)
    return float(coef[0]), float(coef[1])


def loop_kernels_fixed_s(spec, repeat_s: float | None, launch_s: float | None) -> float:
    """The measured fixed times of the kernels a prefill pass launches: the K/V repeats' (``repeat_s``
    a layer, grouped queries only: ``loop_kv_repeat_s``) and the elementwise launches' (``launch_s``
    each: ``loop_launches_s``); 0 for a term that is None."""
    return loop_kv_repeat_s(spec, repeat_s) + loop_launches_s(spec, launch_s)


def loop_launches_s(spec, launch_s: float | None) -> float:
    """The elementwise launches' fixed time a prefill pass at ``launch_s`` a launch (the terms'
    prefill_launch_s): ``loop_elementwise_launches`` x layers x ``launch_s``; 0 without the term."""
    return launch_s * loop_elementwise_launches(spec) * spec.num_hidden_layers if launch_s is not None else 0.0


def walk_kernel_kind(name: str) -> str:
    """A profiled kernel's kind by its name (calibrate/runs/prefill_kernel_walk.py's ``kernels``):
    the varlen attention, a matmul (cuBLAS, CUTLASS), else elementwise."""
    n = name.lower()
    if any(t in n for t in ("flash", "fmha", "varlen", "attention")):
        return "attention"
    if any(t in n for t in ("gemm", "nvjet", "sm90", "cutlass", "xmma", "cublas", "splitk")):
        return "matmul"
    return "elementwise"


def launch_s_from_walks(paths) -> tuple[float, list[dict]]:
    """The fixed time of one elementwise kernel in the loop's prefill graph, from kernel walks
    (calibrate/runs/prefill_kernel_walk.py: each pass's kernels under torch.profiler): over every
    walked model at its smallest bucket (a lone prompt of 7/8 of 64 tokens, where the bytes are
    few), the least-squares line through the origin of the elementwise kernels' device time a
    layer against their launches a layer and the bytes ``loop_elementwise_elements`` counts at the
    bucket's tokens; the launches' coefficient is the time a launch costs with no bytes to move.
    Returns it and the points ({walk, model, launches, seconds, bytes} a layer)."""
    from roofline.model_spec import load_model

    points = []
    for path in paths:
        walk = json.loads(Path(path).read_text(encoding="utf-8"))
        for entry in walk.get("models", []):
            if not entry.get("buckets"):
                continue
            bucket = min(entry["buckets"], key=int)
            layers = float(entry["layers"])
            kernels = [v for k, v in entry["buckets"][bucket]["kernels"].items() if walk_kernel_kind(k) == "elementwise"]
            spec = load_model(entry["model"])
            points.append({"walk": Path(path).name, "model": entry["model"],
                           "launches": sum(float(c) for c, _ in kernels) / layers,
                           "seconds": sum(float(t) for _, t in kernels) / layers,
                           "bytes": loop_elementwise_elements(spec) * int(bucket) * 2.0})  # bf16, as walked
    if len(points) < 3:
        raise RooflineError(f"{', '.join(str(p) for p in paths)}: fewer than three walked models: nothing to measure")
    return launch_line(points)[0], points


def kv_repeat_line(entry: dict) -> tuple[float, float]:
    """(intercept s a layer, slope s a byte) of one kv-repeat probe entry (calibrate/runs/
    kv_repeat_probe.py): the least-squares line of its paired difference a layer against the bytes
    the extra kernels move a layer (``extra_elements_per_token_layer`` x 2 bytes x the bucket's tokens)."""
    layers, per_token = float(entry["layers"]), float(entry["extra_elements_per_token_layer"])
    x = np.array([per_token * 2.0 * int(b) for b in entry["buckets"]])
    y = np.array([abs(float(by["diff_s"])) / layers for by in entry["buckets"].values()])
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def paired_lines(path) -> list[tuple[dict, float, float]]:
    """(entry, intercept s a layer, slope s a byte) of every timed model of a paired probe's file
    (calibrate/runs/kv_repeat_probe.py, qk_norm_probe.py: ``kv_repeat_line``); skipped models left out."""
    probe = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(entry, *kv_repeat_line(entry)) for entry in probe.get("models", []) if entry.get("buckets")]


def kv_repeat_s_from_probe(paths) -> tuple[float, list[dict]]:
    """The fixed time a layer of the loop's two K/V repeat kernels from kv-repeat probes
    (calibrate/runs/kv_repeat_probe.py: a grouped-query model's prefill graph with the repeats and
    with the varlen kernel reading K/V heads as stored, interleaved, at buckets 64-2,048): for each
    grouped-query model, the least-squares line of the paired difference a layer against the
    extra bytes a layer (``extra_elements_per_token_layer`` x 2 bytes x the bucket's tokens); its
    intercept is the repeats' time with no bytes to move. Returns the median of the models'
    intercepts and the points ({probe, model, fixed_s, s_per_byte, buckets}). Full multi-head
    models' entries (extra copies, another kernel) are left out."""
    points = []
    for path in paths:
        for entry, intercept, slope in paired_lines(path):
            if entry.get("variants") != ["repeated", "native"] or len(entry["buckets"]) < 3:
                continue
            points.append({"probe": Path(path).name, "model": entry["model"], "fixed_s": intercept,
                           "s_per_byte": slope, "buckets": len(entry["buckets"])})
    if not points:
        raise RooflineError(f"{', '.join(str(p) for p in paths)}: no grouped-query model with repeats and native "
                            "K/V heads at three buckets or more: nothing to measure")
    return float(np.median([p["fixed_s"] for p in points])), points


def loop_layer_gemms(spec) -> list[tuple[int, int]] | None:
    """(N, K) of the serving loop's four linears a layer (calibrate/serving_loop.py ``_forward``:
    fused q/k/v, output, fused gate/up -- a plain MLP's up alone --, down) for a dense GQA model;
    None for layouts it does not run (mixture of experts, latent attention)."""
    if spec.moe_layers or spec.attention_kind != "gqa":
        return None
    h, hd = spec.hidden_size, spec.head_dim
    q, kv, inter = spec.num_attention_heads * hd, spec.num_key_value_heads * hd, spec.intermediate_size
    return [(q + 2 * kv, h), (h, q), ((2 if spec.mlp_gated else 1) * inter, h), (h, inter)]


def loop_elementwise_elements(spec) -> float:
    """Elements a prompt token's elementwise kernels read and write in one layer of the loop's
    prefill (``_forward``, counted from its code): two RMSNorms (read and write hidden: 4 H); RoPE
    on q and k as x cos + rotate_half(x) sin (a multiply, a negation of half, a concatenation, a
    multiply and an add: 10 x (q + kv)); K and V written into the cache (4 kv); with grouped
    queries K and V repeated to every query head (2 x (kv + q)); attention reading q, k and v and
    writing its output (2 q + 2 x the repeated K/V width); two residual adds (6 H); SwiGLU,
    silu(gate) x up (5 I), or a plain MLP's one GELU (2 I); q/k norms (Qwen3, OLMo-2): q and k
    each copied to contiguous rows, then normed (4 x (q + kv); device call 120 timed the graph with
    and without them, calibrate/runs/qk_norm_probe.py: their time a layer rises at 1.2-1.8 TB/s
    over these bytes). Biases ride in the matmuls' epilogues: no kernel of their own."""
    h, hd = spec.hidden_size, spec.head_dim
    q, kv, inter = spec.num_attention_heads * hd, spec.num_key_value_heads * hd, spec.intermediate_size
    grouped = spec.num_attention_heads > spec.num_key_value_heads
    kv_seen = q if grouped else kv
    mlp = 5.0 * inter if spec.mlp_gated else 2.0 * inter
    qk_norm = 4.0 * (q + kv) if spec.qk_norm != "none" else 0.0
    return 10.0 * h + 10.0 * (q + kv) + 4.0 * kv + (2.0 * (kv + q) if grouped else 0.0) + 2.0 * q + 2.0 * kv_seen \
        + mlp + qk_norm


def loop_attention_elements(spec) -> float:
    """The part of ``loop_elementwise_elements`` the chunk probe's prefill_s times with the
    attention (calibrate.probes.chunk_probe: K/V repeated per query head, then the varlen call):
    the repeats (2 x (kv + q) with grouped queries) and the call's reads of q, K and V and write
    of its output (2 q + 2 x the repeated K/V width)."""
    hd = spec.head_dim
    q, kv = spec.num_attention_heads * hd, spec.num_key_value_heads * hd
    grouped = spec.num_attention_heads > spec.num_key_value_heads
    kv_seen = q if grouped else kv
    return (2.0 * (kv + q) if grouped else 0.0) + 2.0 * q + 2.0 * kv_seen


def loop_chunk_elements(spec, max_model_len: int) -> tuple[float, float]:
    """(per token, per pass) elements one layer of the loop's chunk graph (``_chunk_graph_body``)
    reads and writes beyond ``loop_elementwise_elements`` x tokens: K and V not repeated for
    grouped queries (- 2 x (kv + q)), attention reading them at the K/V width (2 kv, not 2 x the
    repeated width), the pass's K and V concatenated after the cache rows (+ 4 kv); the chunk's
    slot's T = ``max_model_len`` cache rows of K and V copied out by index (read and write: 4 T kv)
    and concatenated (4 T kv)."""
    hd = spec.head_dim
    q, kv = spec.num_attention_heads * hd, spec.num_key_value_heads * hd
    grouped = spec.num_attention_heads > spec.num_key_value_heads
    kv_seen = q if grouped else kv
    per_token = -(2.0 * (kv + q) if grouped else 0.0) - 2.0 * kv_seen + 2.0 * kv + 4.0 * kv
    return per_token, 8.0 * max_model_len * kv


def loop_linears_s(table, spec, shapes, tokens: float, rows: float) -> float:
    """A prefill graph's linears from the card's matmul table (roofline.gemm.GemmTable): the
    layer's ``shapes`` (``loop_layer_gemms``) at ``tokens`` (padded) tokens, every layer, and the
    LM head at ``rows`` rows."""
    return (spec.num_hidden_layers * sum(table.seconds(tokens, n, k) for n, k in shapes)
            + table.seconds(rows, spec.vocab_size, spec.hidden_size))


def loop_elementwise_bytes_per_token(step: StepModel, attention_measured: bool = False) -> float:
    """Bytes a prompt token's elementwise kernels move in the loop's prefill, every layer;
    ``attention_measured``: without the attention's own (``loop_attention_elements``), which the
    chunk table's prefill attention times."""
    elements = loop_elementwise_elements(step.spec)
    if attention_measured:
        elements -= loop_attention_elements(step.spec)
    return step.spec.num_hidden_layers * elements * dtype_bytes(step.act_dtype)


def loop_attention_s(table, step: StepModel, work, tokens: float, pairs: float, longest: float = 0) -> float:
    """A prefill graph's attention, every layer, from the card's chunk table (``ChunkTable.
    prefill_attention_s``: ``tokens`` prompt tokens with ``pairs`` causal pairs in the padded
    ``work``, the longest ``longest`` where known), plus the step model's collectives; without a
    table (``table`` None: terms without ``prefill_attention_measured``) the step model's attention
    and collectives (``attention_and_collectives_s``)."""
    if table is None:
        return attention_and_collectives_s(step, work)
    spec = step.spec
    per_layer = table.prefill_attention_s(spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim,
                                          work.prefill_tokens, tokens, pairs, longest)
    return spec.num_hidden_layers * per_layer + step.pass_parts(work).collectives_s


def attention_and_collectives_s(step: StepModel, work) -> float:
    """The step model's attention (its memory and compute blended) and collectives for ``work``:
    a prefill graph's kernels besides its linears and elementwise ones, no eager overhead."""
    parts = step.pass_parts(work)
    return pnorm(parts.attention_memory_s, parts.attention_compute_s, float(step.calibration.roofline_exponent)) \
        + parts.collectives_s


HOST_DECODE_TERMS = ("host_decode_s", "host_decode_s_per_seq", "host_finish_s")
HOST_PREFILL_TERMS = ("host_prefill_s", "host_prefill_s_per_seq")


def run_host_probe(config: dict) -> dict | None:
    """A run's host probe as replay uses it: the one taken before its clock, or, where the run also
    carries one taken after (``host_probe_after``, of the same shape), their geometric mean -- a
    host whose speed drifts during the run, or one slow moment caught by one probe, then counts
    half."""
    before, after = config.get("host_probe"), config.get("host_probe_after")
    if not before or not after or before.get("decode_seqs") != after.get("decode_seqs"):
        return before
    try:
        return {**before, **{k: (before[k] * after[k]) ** 0.5 for k in ("decode_host_s", "prefill_host_s")},
                "combined": "geometric mean of the probes before and after the run"}
    except (KeyError, TypeError):
        return before


def host_ratios(terms: LoopTerms, probe: dict | None) -> tuple[float, float] | None:
    """(decode, prefill) host speed of a run's machine over the fit runs' (its host probe's medians
    over the terms' ``host_probe``); None when either is missing or the probes differ in shape."""
    ref = terms.host_probe
    if not probe or not ref or probe.get("decode_seqs") != ref.get("decode_seqs"):
        return None
    try:
        return probe["decode_host_s"] / ref["decode_host_s"], probe["prefill_host_s"] / ref["prefill_host_s"]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def scaled_for_host(terms: LoopTerms, probe: dict | None) -> LoopTerms:
    """``terms`` with the host terms scaled to the machine of a run whose host probe is ``probe``
    (unchanged where host_ratios is None): host time is the machine's CPU running the loop's Python."""
    ratios = host_ratios(terms, probe)
    if ratios is None:
        return terms
    update = {}
    for names, r in ((HOST_DECODE_TERMS, ratios[0]), (HOST_PREFILL_TERMS, ratios[1])):
        for name in names:
            t = getattr(terms, name)
            if t is not None:
                update[name] = Term(value=t.value * r, source=f"{t.source}; x {r:.3f}, this run's host probe over "
                                    "the fit runs'")
    return terms.model_copy(update=update)


def run_device_probe(config: dict) -> dict[int, float] | None:
    """A run's device probe (calibrate/serving_loop.device_probe) as replay uses it: {bucket: the
    decode step's median device time}, the probe taken before the run's clock or, where the run
    also carries one after it (``device_probe_after``), their geometric mean per bucket both
    measured. None for a run without one (every run before device call 89)."""
    def read(probe):
        try:
            return {int(b): float(v) for b, v in (probe or {}).get("decode_device_s", {}).items() if float(v) > 0}
        except (TypeError, ValueError, AttributeError):
            return {}

    before, after = read(config.get("device_probe")), read(config.get("device_probe_after"))
    if before and after:
        both = {b: before[b] ** 0.5 * after[b] ** 0.5 for b in before if b in after}  # no overflow
        return both or before
    return before or after or None


def probed_decode_scales(cost: "LoopCost", probe: dict[int, float] | None) -> dict[int, float] | None:
    """{bucket: the probe's decode device time over ``cost``'s price at that bucket} for the
    buckets both have (a run's device probe, ``run_device_probe``, against the LoopCost of its
    configuration, unscaled): the speed the run's GPU ran the loop's decode steps at, taken before
    its clock. None without a probe or a bucket in common."""
    if not probe:
        return None
    out = {b: probe[b] / cost.decode_price_s[b] for b in sorted(probe) if b in cost.decode_price_s}
    return out or None


def bucket_factor(scales, bucket: int) -> float:
    """The factor ``scales`` ({bucket: factor} or None) gives ``bucket``: its own, else the
    nearest bucket's in ratio (1.0 without scales)."""
    if not scales:
        return 1.0
    if bucket in scales:
        return float(scales[bucket])
    named = [b for b in scales if b > 0]
    if not named or bucket <= 0:
        return 1.0
    nearest = min(named, key=lambda b: (abs(math.log(b / bucket)), b))
    return float(scales[nearest])


def loop_terms_path(card: str, engine: str) -> Path:
    from roofline.hardware import profiles_dir

    return profiles_dir() / "serving" / f"{card}-{engine}-loop.json"


def transferred_loop_terms(card: str, engine: str) -> LoopTerms | None:
    """The loop's terms on a card with no serving runs of its own: those fitted on the card that
    has them (one today: h200), unchanged -- the per-layer times of the loop's small kernels
    (decode extra, prefill floor; the same SMs and clocks on Hopper, and no run says otherwise),
    the elementwise kernels' rate (tensors in L2) and the host's terms (each run scales them by
    its host probe) --, with the card's own measured tables where its probes are committed
    (hardware_profiles/measurements/CARD-probe-gemm.json, -chunk.json, -chunk-rows*.json), else
    none (the prefill then priced by the step model's prefill, the card's transferred calibration).
    The step model under them is the card's, as ``predict`` prices it. Only to a card of the fitted
    card's architecture: the kernels' fixed times are that architecture's. None where no card of
    its architecture has terms for ``engine``."""
    from roofline.hardware import load_card, profiles_dir

    target = load_card(card).architecture
    for path in sorted((profiles_dir() / "serving").glob(f"*-{engine}-loop.json")):
        base = load_loop_terms(path)
        if load_card(base.card).architecture == target:
            return carried_to(base, card)
    return None


def carried_to(base: LoopTerms, card: str) -> LoopTerms:
    """``base``'s fitted terms carried to ``card`` unchanged, with ``card``'s own measured tables
    where its probes are committed (the rule ``transferred_loop_terms`` applies to the shipped
    terms; also for terms fitted another way, benchmarks/prefill_empty_tiles.py). Terms that price the
    prefill attention from a chunk probe (``prefill_attention_measured``) go only to a card that has
    one: refused in one line elsewhere."""
    from roofline.serving_replay import chunk_rows_table_path, chunk_table_path, gemm_table_path

    tables = {"prefill_gemm_table": gemm_table_path(card), "chunk_attention_table": chunk_table_path(card),
              "chunk_rows_table": chunk_rows_table_path(card)}
    if tables["prefill_gemm_table"] is None:  # the chunk tables go with the matmul table (LoopTerms)
        tables = dict.fromkeys(tables)
    elif tables["chunk_attention_table"] is None:
        tables["chunk_rows_table"] = None
    if base.prefill_attention_measured and tables["chunk_attention_table"] is None:
        raise RooflineError(f"{base.card}'s loop terms price the prefill attention from a chunk probe, and {card} has "
                            f"none committed (hardware_profiles/measurements/{card}-probe-chunk.json): use terms "
                            "without prefill_attention_measured there", "loop_terms")
    own = [f"{field} {path}" for field, path in tables.items() if path]
    note = (f"transferred to {card} from {base.card}: {base.card}'s fitted terms unchanged (no serving run on {card} "
            f"set any term), with {card}'s own measured tables ({'; '.join(own) if own else 'none committed'}); "
            f"{base.card}'s: {base.note}")
    return base.model_copy(update={"card": card, "transferred_from": base.card, "note": note, **tables})


def load_loop_terms(source=None, *, card: str | None = None, engine: str | None = None) -> LoopTerms:
    """A LoopTerms, a file path, or (None) the shipped file of ``card`` and ``engine``, else the
    terms transferred to ``card`` (transferred_loop_terms)."""
    if isinstance(source, LoopTerms):
        return source
    if source is None:
        path = loop_terms_path(card, engine)
        if not path.is_file():
            moved = transferred_loop_terms(card, engine)
            if moved is not None:
                return moved
            raise RooflineError(
                f"no serving-loop terms for {card} with engine {engine} (hardware_profiles/serving/ has them only "
                "for the runs measured: h200 with --engine graph, which carry over to the other Hopper cards); "
                "give loop_terms=FILE", "loop_terms")
    else:
        path = Path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RooflineError(f"cannot read {path}: {exc.strerror or exc}", "loop_terms") from None
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})", "loop_terms") from None
    try:
        terms = LoopTerms(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        raise RooflineError(f"{path}: {where + ': ' if where else ''}{msg}", "loop_terms") from None
    except TypeError:
        raise RooflineError(f"{path}: a loop-terms file holds a JSON object", "loop_terms") from None
    return terms if source is None or card is None else file_terms_on(terms, card, path)


def file_terms_on(terms: LoopTerms, card: str, path) -> LoopTerms:
    """A terms file used on ``card``: as it is on its own card; on another card of its card's
    architecture, carried there as the shipped terms are (``carried_to``: ``card``'s own measured
    tables, not the file's card's, which would price that card's matmuls on this one); refused in
    one line on another architecture. A card that is not in the catalog (a profile file) takes the
    file as it is."""
    from roofline.hardware import load_card

    if card == terms.card:
        return terms
    try:
        here, there = load_card(card), load_card(terms.card)
    except RooflineError:
        return terms
    if here.id == there.id:
        return terms
    if here.architecture != there.architecture:
        raise RooflineError(f"{path}: these terms were fitted on {terms.card} ({there.architecture}); they do not carry "
                            f"over to {card} ({here.architecture}), whose kernels' fixed times differ", "loop_terms")
    return carried_to(terms, here.id)


class LoopCost:
    """The serving loop's iteration times (module docstring)."""

    def __init__(self, step: StepModel, terms: LoopTerms, max_model_len: int, max_num_seqs: int,
                 max_num_batched_tokens: int | None = None, *, decode_scale: float = 1.0, prefill_scale: float = 1.0,
                 decode_bucket_scales=None):
        """``decode_scale`` and ``prefill_scale`` multiply the decode steps' and the prefill passes'
        device times (not the host's): a machine whose GPU runs the loop's graphs that much slower
        or faster than the price (benchmarks/serving_tail_sensitivity.py replays the committed runs
        so, to show how far a tail moves with a few percent of device time).
        ``decode_bucket_scales`` ({bucket: factor}, e.g. a run's device probe over the price,
        ``probed_decode_scales``) multiplies each decode bucket's device time as well; a bucket it
        does not name takes the factor of the nearest one it does (in ratio)."""
        self.step, self.terms = step, terms
        self.prefill_scale = prefill_scale
        # prefill graphs: buckets up to the iteration's token budget (the loop's default, max(T, 2048))
        self.prefill_buckets = (prefill_token_buckets(max_num_batched_tokens or max(max_model_len, 2048))
                                if terms.prefill_graphs else [])
        self.logit_rows = float(max_num_seqs)
        self.max_num_seqs = max_num_seqs
        layers = step.spec.num_hidden_layers
        self.max_model_len = max_model_len
        self.wake_s = terms.wake_s.value
        self.finish_s = terms.host_finish_s.value if terms.host_finish_s else 0.0
        self.floor_s = terms.prefill_floor_s_per_layer.value * layers
        #: the K/V repeats' fixed time a pass (prefill_kv_repeat_s_per_layer; grouped queries only), in the
        #: part-by-part price beside the floor
        repeats, launch = terms.prefill_kv_repeat_s_per_layer, terms.prefill_launch_s
        #: a pass's fixed time: the floor, and the K/V repeats' (grouped queries only) and the elementwise
        #: launches' (prefill_launch_s x loop_elementwise_launches x layers) measured fixed times
        self.fixed_s = self.floor_s + loop_kernels_fixed_s(step.spec, repeats.value if repeats is not None else None,
                                                           launch.value if launch is not None else None)
        self.exponent = terms.prefill_floor_exponent.value
        self.gemms = None
        self.chunk_table, self.chunk_copy_s = None, 0.0
        #: the chunk table pricing the prefill graphs' attention (terms.prefill_attention_measured), or None
        self.attention_table = None
        if terms.prefill_graphs and terms.prefill_gemm_table and terms.prefill_elementwise_bytes_per_s:
            from roofline.gemm import load_gemm_table

            shapes = loop_layer_gemms(step.spec)
            if shapes is not None:  # the loop's dense decoder; other layouts: the step model's matmuls
                self.gemms = (load_gemm_table(terms.prefill_gemm_table), shapes)
                rate = terms.prefill_elementwise_bytes_per_s.value
                measured = bool(terms.prefill_attention_measured and terms.chunk_attention_table)
                self.elementwise_s_per_token = loop_elementwise_bytes_per_token(step, measured) / rate
                per_token, per_pass = loop_chunk_elements(step.spec, max_model_len)
                scale = layers * dtype_bytes(step.act_dtype) / rate
                self.chunk_s_per_token, self.chunk_s = per_token * scale, per_pass * scale
                if terms.chunk_attention_table:
                    from roofline.chunk_table import load_chunk_table

                    self.chunk_table = load_chunk_table(terms.chunk_attention_table)
                    self.attention_table = self.chunk_table if measured else None
                    # the table was measured at its grid's cache rows and its nearest head shape's
                    # K/V width; a chunk graph copies all max_model_len rows of its slot at the
                    # model's own K/V width out, so the copy's difference is priced apart
                    spec = step.spec
                    shape = self.chunk_table.nearest_shape(spec.num_attention_heads, spec.num_key_value_heads,
                                                           spec.head_dim)
                    rows = self.chunk_table.rows or max_model_len
                    if terms.chunk_rows_table:  # the copy's measured time a row at the shape's K/V width
                        from roofline.chunk_table import copy_s_per_row

                        per_row = copy_s_per_row(self.chunk_table, load_chunk_table(terms.chunk_rows_table), shape)
                        width = spec.num_key_value_heads * spec.head_dim / (shape[1] * shape[2])
                        self.chunk_copy_s = layers * per_row * (max_model_len * width - rows)
                    else:
                        self.chunk_copy_s = (per_pass - 8.0 * rows * shape[1] * shape[2]) * scale
                self._gemm_s: dict = {}
        extra = terms.decode_extra_s_per_layer.value * layers
        sizes = capture_sizes(max_num_seqs)
        bucket = [0] * (max_num_seqs + 1)
        j = 0
        for n in range(1, max_num_seqs + 1):
            while sizes[j] < n:
                j += 1
            bucket[n] = sizes[j]
        self.bucket = bucket
        #: each decode bucket's device time as priced, before any scale
        self.decode_price_s = {b: step.pass_s(decode_work(float(b), float(b) * max_model_len)) + extra for b in sizes}
        by_bucket = {b: price * decode_scale * bucket_factor(decode_bucket_scales, b)
                     for b, price in self.decode_price_s.items()}
        self.decode_device_s = [0.0] + [by_bucket[bucket[n]] for n in range(1, max_num_seqs + 1)]
        host_d, host_p = terms.host_decode_s.value, terms.host_prefill_s.value
        per_d, per_p = terms.host_decode_s_per_seq.value, terms.host_prefill_s_per_seq.value
        dec = self.decode_device_s
        priced = self.prefill_device_s
        memo = self._prefills = {}

        def prefill_device(*key):
            # a pass's price depends on its five counts alone, and a stream's prompts repeat them
            # (a lone prompt of n tokens is always (n, n(n+1)/2, 1)): remembered, MEMO_MAX of them
            seconds = memo.get(key)
            if seconds is None:
                seconds = priced(*key)
                if len(memo) < MEMO_MAX:
                    memo[key] = seconds
            return seconds

        def decode_s(slots, decoding, kv_read):
            return dec[slots] + host_d + per_d * decoding

        # the measured attention reads a pass's longest prompt too (a price, and a memo key, more)
        reads_longest = self.attention_table is not None

        def pass_s(slots, decoding, kv_read, prefill_tokens, prefill_pairs, chunks, cont_tokens=0, cont_cached=0,
                   longest=0):
            if reads_longest:
                device = prefill_device(prefill_tokens, prefill_pairs, chunks, cont_tokens, cont_cached, longest)
            else:
                device = prefill_device(prefill_tokens, prefill_pairs, chunks, cont_tokens, cont_cached)
            if decoding:
                device += dec[slots] + per_d * decoding
            return device + host_p + per_p * chunks

        self.decode_s, self.pass_s = decode_s, pass_s

    def decode_costs(self, slots, decoding, kv_read):
        """decode_s for an array of ``kv_read`` (the static cache: the same price every step)."""
        import numpy as np

        return np.full(len(kv_read), self.decode_s(slots, decoding, 0.0))

    def decode_run(self, decoding: int, first: int, stride: int, steps: int) -> list:
        """decode_costs for a quiet stretch of ``steps`` steps (FusedCost.decode_run), as a list."""
        return [self.decode_s(decoding, decoding, 0.0)] * steps

    def prefill_device_s(self, tokens: float, pairs: float, chunks: float, cont_tokens: float = 0,
                         cont_cached: float = 0, longest: float = 0) -> float:
        """One prefill pass: the GPU's work (padded to the token bucket under prefill graphs) and
        the host's launches, blended; ``cont_cached`` > 0: a chunk graph (its first chunk of
        ``cont_tokens`` tokens after ``cont_cached`` cached ones); ``longest``: its longest prompt
        or chunk where known (the measured attention's; else taken from the counts)."""
        if not self.prefill_buckets:
            return pnorm(self.fixed_s, self.step.pass_s(prefill_work(tokens, pairs, chunks)),
                         self.exponent) * self.prefill_scale
        work = prefill_work(*padded_prefill(tokens, pairs, chunks, self.prefill_buckets, self.logit_rows))
        if self.gemms is None:  # the fixed time with the dense decoder's launches and repeats
            return pnorm(self.fixed_s, self.step.work_s(work), self.exponent) * self.prefill_scale
        # with the attention measured, a chunk graph's cached keys are the chunk table's (chunk_extra_s),
        # not the prefill graph's (the step model's price keeps them, as shipped: docs/serving.md)
        own = pairs - cont_tokens * cont_cached if cont_cached and self.attention_table is not None else pairs
        attention = loop_attention_s(self.attention_table, self.step, work, tokens, own, longest)
        seconds = (self.fixed_s + self.linears_s(work.prefill_tokens, work.logit_rows)
                   + attention + self.elementwise_s_per_token * work.prefill_tokens
                   + self.empty_tiles_s(work.prefill_tokens, chunks))
        if cont_cached:
            seconds += self.chunk_extra_s(work.prefill_tokens, cont_tokens, cont_cached)
        return seconds * self.prefill_scale

    def empty_tiles_s(self, bucket: float, seqs: float) -> float:
        """The attention's empty query tiles of a prefill graph of ``bucket`` (padded) tokens holding
        ``seqs`` prompts (``empty_attention_tiles``), at the terms' ``prefill_empty_tile_s``."""
        per_tile = self.terms.prefill_empty_tile_s
        if per_tile is None:
            return 0.0
        return per_tile.value * empty_attention_tiles(self.step.spec, bucket, self.max_num_seqs, seqs)

    def chunk_extra_s(self, bucket: float, t: float, c: float) -> float:
        """What a chunk graph of ``bucket`` (padded) tokens whose first chunk is ``t`` tokens after
        ``c`` cached ones takes beyond the prefill graph of the same bucket."""
        if self.chunk_table is not None:
            spec = self.step.spec
            return max(spec.num_hidden_layers * self.chunk_table.extra_s(
                spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim, bucket, t, c) + self.chunk_copy_s, 0.0)
        return self.chunk_s + self.chunk_s_per_token * bucket

    def linears_s(self, tokens: float, rows: float) -> float:
        """The loop's linears of a prefill graph of ``tokens`` (padded) tokens with logits for
        ``rows`` rows, from the card's matmul table (``prefill_gemm_table``)."""
        key = (tokens, rows)
        cached = self._gemm_s.get(key)
        if cached is None:
            table, shapes = self.gemms
            cached = self._gemm_s[key] = loop_linears_s(table, self.step.spec, shapes, tokens, rows)
        return cached
