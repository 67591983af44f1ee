"""Fit an engine profile to published measurements, and measure how well it transfers across cards.

An engine profile (roofline.engines) holds what an engine adds to a card: fixed and per-layer
overheads, how much of the card's bandwidth and matmul ceilings its kernels reach, how its
attention and prefill behave. This module fits those terms to the published tables of
``hardware_profiles/measurements/published/`` (roofline.published) with the project's fit
machinery: the one step model (roofline.step), the calibration terms and bounds
(roofline.calibration.TERMS), bounded least squares on relative residuals (pred / measured - 1).

**What a published row is compared with.** Every row becomes a *case*: a card profile, a catalog
model, a weight and KV format, a tensor-parallel degree, and the time the row measured, which the
step model predicts the same way:

=====================  ====================================================  =====================
metric                 measured time (seconds)                               predicted by
=====================  ====================================================  =====================
decode_tok_s_per_seq   TPOT = 1 / value                                      mean decode step
decode_tok_s_total     TPOT = batch / value                                  mean decode step
tpot_s                 TPOT = value                                          mean decode step
prefill_tok_s          prefill time = batch x prompt / value                 one prefill pass
ttft_s                 TTFT = value                                          one prefill pass
output_tok_s_total     wall time = batch x gen / value (prefill included)    TTFT + (gen - 1) TPOT
e2e_s                  request time = value                                  TTFT + (gen - 1) TPOT
=====================  ====================================================  =====================

llama-bench's ``tgN`` decodes N tokens from ``context_depth`` (N decode steps); its ``ppN`` (and
llama-batched-bench's) prefills N tokens per sequence after ``context_depth`` cached ones (the
attention pairs counted from there). A run split layer-wise over several GPUs (``gpus`` > ``tp``,
llama.cpp's default) passes each token through the GPUs one after another: its step is priced as
one card's. Rows that cannot be priced are kept out with their reason (``cases``): a card or model
without a profile, an offline-throughput row whose batch the engine chose, a backend without a
profile.

**Which ceilings.** Efficiencies are fractions of the card's *datasheet* bandwidth and matmul peaks
(roofline.engines.profile_ceilings), the one figure every card profile has: a profile fitted on
cards with measured ceilings then transfers to cards without.

**Reserved rows never enter a fit.** ``fit_rows`` refuses them (the hold-out rule of issues 10 and
16, roofline.published.expected_reserved); they are predicted by ``validate`` only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from roofline.calibration import INF, TERMS, Calibration, Term
from roofline.engines import Fact, Variant, backend_for, card_classes, grouped_terms, profile_ceilings
from roofline.errors import RooflineError
from roofline.hardware import CardProfile, load_card
from roofline.model_spec import ModelSpec, load_model
from roofline.published import PublishedPoint
from roofline.units import kv_dtype_name, weight_dtype_name

#: Published model ids that are not catalog names, and the catalog model with the same shapes.
MODEL_ALIASES: dict[str, tuple[str, str]] = {
    "llama-3-8b": ("llama-3.1-8b", "Meta-Llama-3-8B and Llama-3.1-8B share every shape (32 layers, hidden 4096, "
                                   "8 KV heads, intermediate 14336, vocab 128256); only rope scaling differs"),
    "llama-3-70b": ("llama-3.1-70b", "Meta-Llama-3-70B and Llama-3.1-70B share every shape (80 layers, hidden 8192, "
                                     "8 KV heads, intermediate 28672, vocab 128256)"),
    "llama-3.3-70b": ("llama-3.1-70b", "Llama-3.3-70B-Instruct is Llama-3.1-70B's architecture (config.json identical "
                                       "in shapes)"),
    "qwen2.5-coder-7b": ("qwen2.5-7b", "Qwen2.5-Coder-7B has Qwen2.5-7B's shapes (28 layers, hidden 3584, 4 KV "
                                       "heads, intermediate 18944, vocab 152064)"),
    "qwen3-coder-30b-a3b": ("qwen3-30b-a3b", "Qwen3-Coder-30B-A3B has Qwen3-30B-A3B's shapes (48 layers, 128 experts "
                                             "top-8, moe_intermediate 768)"),
}

#: Published card ids whose variant the source does not state, and the profile used for them.
CARD_ALIASES: dict[str, tuple[str, str]] = {
    "a100-80gb-unstated": ("a100-80gb", "an A100 80GB of unstated form factor, taken as SXM4 (the PCIe card's "
                                        "bandwidth is 5% lower)"),
    "a100-unstated": ("a100-80gb", "an A100 of unstated memory and form factor, taken as SXM4 80GB (the 40GB card is "
                                   "reserved for validation, so these rows are not mapped to it)"),
    "h100-80gb-unstated": ("h100-sxm", "an H100 80GB of unstated form factor, taken as SXM5"),
}

#: Terms of a profile that are not calibration terms: what pricing a published row needs beyond the
#: step model. A layer split over several GPUs (llama.cpp's default ``-sm layer``) hands each
#: token's activations from GPU to GPU: one fixed cost per extra GPU per forward pass.
EXTRA_TERMS = {
    "split_gpu_overhead_s": Term(0.0, 0.0, INF, "extra time of one forward pass per GPU beyond the first in a "
                                 "layer split (gpus > tp), s", fit_upper=5e-3),
}


def term_info(name: str) -> Term:
    """The bounds of a profile term: roofline.calibration.TERMS, or EXTRA_TERMS."""
    return TERMS[name] if name in TERMS else EXTRA_TERMS[name]


def split_calibration_terms(terms: dict) -> tuple[dict, dict]:
    """(calibration terms, extra terms) of a variant's terms for a case."""
    return ({k: v for k, v in terms.items() if k not in EXTRA_TERMS},
            {k: v for k, v in terms.items() if k in EXTRA_TERMS})


#: Kinds of case, by metric.
_KIND = {"decode_tok_s_per_seq": "decode", "decode_tok_s_total": "decode", "tpot_s": "decode",
         "prefill_tok_s": "prefill", "ttft_s": "prefill", "output_tok_s_total": "run", "e2e_s": "run"}
#: What a case's error is reported as.
QUANTITY = {"decode": "tpot", "prefill": "prefill", "run": "run"}


@dataclass(frozen=True)
class Case:
    """One published row as the step model prices it."""

    point: PublishedPoint
    card: CardProfile
    spec: ModelSpec
    weight: str
    kv: str
    tp: int
    backend: str
    kind: str  # decode | prefill | run
    measured_s: float

    @property
    def batch(self) -> int:
        return self.point.batch or 1

    @property
    def key(self) -> tuple:
        """Cases of one key share a step model and how the run was set up (the GPUs of a layer split,
        flash attention): ``predict_group`` reads those from the group's first case."""
        return (self.card.id, self.spec.name, self.weight, self.kv, self.tp, self.point.gpu_count,
                bool(self.point.flash_attn))


def measured_seconds(p: PublishedPoint) -> float:
    """The time a row measured (see the module table)."""
    batch = p.batch or 1
    if p.metric == "decode_tok_s_per_seq":
        return 1.0 / p.base_value
    if p.metric == "decode_tok_s_total":
        return batch / p.base_value
    if p.metric == "prefill_tok_s":
        return batch * p.prompt_tokens / p.base_value
    if p.metric == "output_tok_s_total":
        return batch * p.gen_tokens / p.base_value
    return p.base_value  # tpot_s, ttft_s, e2e_s


def resolve_model(name: str) -> ModelSpec:
    return load_model(MODEL_ALIASES[name][0] if name in MODEL_ALIASES else name)


def resolve_card(name: str) -> CardProfile:
    return load_card(CARD_ALIASES[name][0] if name in CARD_ALIASES else name)


def default_kv(engine: str) -> str:
    """The KV format a row that does not state one was run with: fp16 (llama.cpp's f16 cache,
    the 16-bit caches of the others; bf16 costs the same bytes)."""
    return "fp16"


def cases(points, backends: tuple[str, ...] | None = None) -> tuple[list[Case], list[tuple[PublishedPoint, str]]]:
    """The rows the step model can price, and the others with the reason. ``backends``: keep only
    rows on these backends (a row without one takes its card's, ``backend_for``)."""
    out, skipped = [], []
    for p in points:
        try:
            card = resolve_card(p.card)
        except RooflineError:
            skipped.append((p, f"no card profile for {p.card}"))
            continue
        try:
            spec = resolve_model(p.model)
        except RooflineError:
            skipped.append((p, f"model {p.model} is not in the catalog"))
            continue
        if p.batch is None:
            skipped.append((p, "batch not stated (offline throughput: the engine chose the running batch)"))
            continue
        backend = p.backend or backend_for(card)
        if backends is not None and backend not in backends:
            skipped.append((p, f"backend {backend} has no profile"))
            continue
        try:
            weight = weight_dtype_name(p.weight_format)
            kv = kv_dtype_name(p.kv_dtype or default_kv(p.engine))
        except RooflineError as exc:
            skipped.append((p, str(exc)))
            continue
        if p.tp > 1 and not card.tp_link_bytes_per_s(p.tp):
            skipped.append((p, f"{card.id} has no interconnect on record for tp {p.tp}"))
            continue
        out.append(Case(p, card, spec, weight, kv, p.tp, backend, _KIND[p.metric], measured_seconds(p)))
    return out, skipped


# ---- prediction ----
def _causal(prompt, depth):
    """Causal (query, key) pairs of ``prompt`` queries after ``depth`` cached tokens."""
    from roofline.step import causal_pairs

    return causal_pairs(prompt + depth) - causal_pairs(depth)


def _windowed(prompt, depth, window):
    from roofline.step import causal_pairs

    return causal_pairs(prompt + depth, window) - causal_pairs(depth, window)


def mean_step_s(model, batch, prompt_tokens, gen_tokens, kv_cache: str = "dynamic"):
    """roofline.decode.mean_tpot_s without the breakdown it also computes (the fit calls this
    thousands of times): the same decode contexts, the same pass (StepModel.pass_s), the same mean.
    tests/test_engines.py holds the two equal."""
    from roofline.decode import decode_contexts
    from roofline.step import decode_work

    batch = np.asarray(batch, dtype=float)
    context, weights = decode_contexts(prompt_tokens, gen_tokens, kv_cache)
    windowed = None if model.window is None else batch * np.minimum(context, model.window)
    return np.sum(weights * model.pass_s(decode_work(batch, batch * context, windowed)), axis=0)


@dataclass(frozen=True)
class Group:
    """The cases of one key (one step model), as arrays: built once, priced many times in a fit."""

    first: Case
    index: np.ndarray
    batch: np.ndarray
    prompt: np.ndarray
    gen: np.ndarray
    depth: np.ndarray
    kind: np.ndarray
    decode_gen: np.ndarray  # the generation mean_tpot_s is asked for (see prepare)


def prepare(case_list: list[Case]) -> list[Group]:
    """The cases grouped by key, as arrays. Decode steps: llama-bench's tgN (prompt 0) and
    llama-batched-bench decode N tokens after the prompt and depth (N steps); a prefilled request's
    first token comes from its prefill and the rest from gen - 1 steps (mean_tpot_s's convention)."""
    by_key: dict[tuple, list[int]] = defaultdict(list)
    for i, c in enumerate(case_list):
        by_key[c.key].append(i)
    out = []
    for idx in by_key.values():
        cs = [case_list[i] for i in idx]
        prompt = np.array([c.point.prompt_tokens for c in cs], float)
        gen = np.array([c.point.gen_tokens for c in cs], float)
        bench = (prompt == 0) | np.array([c.point.metric == "decode_tok_s_total" and c.point.engine == "llama.cpp"
                                          for c in cs])
        out.append(Group(cs[0], np.array(idx), np.array([c.batch for c in cs], float), prompt, gen,
                         np.array([c.point.context_depth for c in cs], float), np.array([c.kind for c in cs]),
                         np.where(bench, gen + 1.0, gen)))
    return out


#: llama.cpp's prompt processing: llama-bench's default batch (``-b 2048``: the tokens of one llama_decode
#: call) and micro-batch (``-ub 512``, llama.cpp >= b2409), and the graph copies its scheduler keeps in
#: flight when a layer split pipelines micro-batches (GGML_SCHED_MAX_COPIES).
LLAMA_BATCH_TOKENS = 2048
LLAMA_UBATCH_TOKENS = 512
LLAMA_PIPELINE_COPIES = 4


def pipeline_factor(prompt, gpus):
    """The share of a serial layer-split prefill's time that llama.cpp's pipeline parallelism (PR #6017,
    b2409) takes. Each llama_decode call of up to LLAMA_BATCH_TOKENS runs its k micro-batches of
    LLAMA_UBATCH_TOKENS one behind another through the ``gpus`` GPUs' layer stages, at most
    LLAMA_PIPELINE_COPIES in flight: with equal stages of time t, k x gpus x t serially, gpus x t +
    (k - 1) x gpus / min(gpus, copies) x t pipelined. 1 on one GPU or for a prompt of one micro-batch."""
    prompt = np.asarray(prompt, dtype=float)
    g = float(max(gpus, 1))
    per_call = LLAMA_BATCH_TOKENS // LLAMA_UBATCH_TOKENS
    k = np.maximum(np.ceil(prompt / LLAMA_UBATCH_TOKENS), 1.0)
    full, rest = np.floor(k / per_call), np.mod(k, per_call)
    stages = lambda n: np.where(n > 0, g + (n - 1.0) * g / min(g, LLAMA_PIPELINE_COPIES), 0.0)  # noqa: E731
    return (full * stages(float(per_call)) + stages(rest)) / (k * g)


def predict_group(model, g: Group, kv_cache: str = "dynamic", extra: dict | None = None) -> np.ndarray:
    """Predicted seconds of each case of a group (``model``: their StepModel; ``kv_cache``: how the
    engine's decode step reads its cache, roofline.decode; ``extra``: EXTRA_TERMS values). A layer
    split over ``gpus`` > ``tp`` GPUs adds ``split_gpu_overhead_s`` per extra GPU to every pass."""
    extra = extra or {}
    from roofline.step import prefill_work

    n = len(g.index)
    need_tpot = g.kind != "prefill"
    tpot = np.zeros(n)
    if need_tpot.any():
        tpot[need_tpot] = mean_step_s(model, g.batch[need_tpot], (g.depth + g.prompt)[need_tpot],
                                      g.decode_gen[need_tpot], kv_cache)
    need_prefill = g.kind != "decode"
    pre = np.zeros(n)
    if need_prefill.any():
        b, p, d = g.batch[need_prefill], g.prompt[need_prefill], g.depth[need_prefill]
        pairs = b * _causal(p, d)
        wpairs = None if model.window is None else b * _windowed(p, d, model.window)
        pre[need_prefill] = model.pass_s(prefill_work(b * p, pairs, b, wpairs))
    split = extra.get("split_gpu_overhead_s", 0.0) * max(g.first.point.gpu_count - g.first.tp, 0)
    if need_prefill.any() and g.first.point.engine == "llama.cpp":
        pre = pre * pipeline_factor(g.prompt, g.first.point.gpu_count // max(g.first.tp, 1))
    tpot, pre = tpot + split, pre + split
    return np.where(g.kind == "decode", tpot,
                    np.where(g.kind == "prefill", pre, pre + np.maximum(g.gen - 1.0, 0.0) * tpot))


def predict_cases(cases_or_groups, calibration_for, n: int | None = None, kv_cache: str = "dynamic") -> np.ndarray:
    """Predicted seconds of every case (a list of Cases, or ``prepare``'s groups of ``n`` cases);
    ``calibration_for(case)`` gives the Calibration to price a group with, or (Calibration,
    extra terms)."""
    from roofline.step import StepModel

    groups = cases_or_groups
    if groups and isinstance(groups[0], Case):
        n = len(groups)
        groups = prepare(groups)
    out = np.empty(n or 0)
    for g in groups:
        c = g.first
        cal = calibration_for(c)
        cal, extra = cal if isinstance(cal, tuple) else (cal, {})
        if c.point.flash_attn and cal.prefill_score_bytes:
            # flash attention keeps the scores on chip: no score matrix is written or read
            cal = cal.model_copy(update={"prefill_score_bytes": 0.0})
        model = StepModel(c.spec, c.card, cal, weight_dtype=c.weight, kv_dtype=c.kv, tp=c.tp)
        out[g.index] = predict_group(model, g, kv_cache, extra)
    return out


# ---- the parameters of a profile ----
#: Bounds of a class factor (it multiplies a term of the cards of that class).
FACTOR_BOUNDS = (0.1, 10.0)


@dataclass
class Layout:
    """Which terms a fit frees: ``shared`` (one value for every case), ``by_format`` (one value per
    weight format, e.g. the dequantising kernels' efficiencies), ``by_class`` (a factor on a term for
    the cards of a class, ``card_classes``), and the values of the rest (``fixed``)."""

    shared: list[str]
    by_format: dict[str, list[str]] = field(default_factory=dict)
    by_class: dict[str, list[str]] = field(default_factory=dict)
    fixed: dict[str, float] = field(default_factory=dict)

    def names(self) -> list[str]:
        return (list(self.shared) + [f"{fmt}:{t}" for fmt, terms in self.by_format.items() for t in terms]
                + [f"{cls}@{t}" for cls, terms in self.by_class.items() for t in terms])


def _term(name: str) -> str:
    """The calibration term a flat name (``term``, ``format:term``, ``class@term[/kind]``) sets."""
    name = name.split(":", 1)[1] if ":" in name else name.split("@", 1)[1] if "@" in name else name
    return name.split("/", 1)[0]


def variant_from_values(values: dict[str, float], layout: Layout, applies_to: str = "fit") -> Variant:
    """The engine-profile Variant of fitted ``values`` (flat names: ``term``, ``format:term``,
    ``class@term``) and the layout's fixed terms: the one place a case's terms are composed
    (Variant.terms_for), in the fit as in a transferred calibration."""
    terms = {k: Fact(value=v, source="fixed") for k, v in layout.fixed.items()}
    formats: dict[str, dict[str, Fact]] = {}
    classes: dict[str, dict[str, Fact]] = {}
    for k, v in values.items():
        if ":" in k:
            fmt, t = k.split(":", 1)
            formats.setdefault(fmt, {})[t] = Fact(value=v, source="fit")
        elif "@" in k:
            cls, t = k.split("@", 1)
            classes.setdefault(cls, {})[t] = Fact(value=v, source="fit")
        else:
            terms[k] = Fact(value=v, source="fit")
    return Variant(applies_to=applies_to, terms=terms, formats=formats, classes=classes)


def calibration(card: CardProfile, engine: str, terms: dict, facts: dict | None = None, **extra) -> Calibration:
    """A calibration of ``engine`` on ``card`` with ``terms`` (a by-kind table's entries gathered:
    roofline.engines.grouped_terms), on the profile ceilings (datasheet)."""
    return Calibration(card=card.id, engine=engine, kv_cache="dynamic", **profile_ceilings(card),
                       **(facts or {}), **grouped_terms(terms), **extra)


def _solve(residual, names, starts, max_nfev=400):
    """Bounded least squares over ``names`` (TERMS bounds of each name's term, FACTOR_BOUNDS for a
    class factor; log scale where the term says), best of ``starts``; soft-L1 loss."""
    from roofline.fitting import solve_bounded

    factor = [("@" in n) for n in names]
    terms = [term_info(_term(n)) for n in names]
    logs = [t.log or f for t, f in zip(terms, factor)]
    bounds = [FACTOR_BOUNDS if f else t.fit_bounds for t, f in zip(terms, factor)]
    return solve_bounded(residual, names, bounds, logs, starts, max_nfev=max_nfev, loss="soft_l1", f_scale=0.1)


def check_not_reserved(case_list) -> None:
    """Refuse a fit on any reserved row (issues 10 and 16: they are for validation only)."""
    bad = [c.point for c in case_list if c.point.reserved]
    if bad:
        p = bad[0]
        raise RooflineError(f"{len(bad)} reserved row(s) offered to a fit (e.g. {p.engine} on {p.card}, {p.model}): "
                            "reserved measurements are for validation only")


#: Starting values of the terms a fit may free.
STARTS = {
    "step_overhead_s": 2e-4, "layer_overhead_s": 1e-5, "bandwidth_efficiency": 0.75, "compute_efficiency": 0.5,
    "attention_efficiency": 0.2, "kv_traffic_factor": 1.2, "roofline_exponent": 4.0, "overhead_exponent": 2.0,
    "batch_layer_overhead_s": 2e-6, "prefill_overhead_s": 5e-3, "prefill_compute_efficiency": 0.5,
    "attention_score_bytes": 2.0, "attention_sequence_overhead_s": 1e-6, "moe_layer_overhead_s": 2e-5,
    "expert_traffic_factor": 1.2, "activation_traffic_coeff": 1.0, "split_gpu_overhead_s": 2e-4,
    "prefill_score_bytes": 8.0,
}


def fit_terms(case_list: list[Case], engine: str, layout: Layout, facts: dict | None = None, warm: dict | None = None,
              max_nfev: int = 150, n_starts: int = 3) -> dict[str, float]:
    """The terms of ``layout`` fitted to ``case_list`` (no reserved row may be among them)."""
    check_not_reserved(case_list)
    if not case_list:
        raise RooflineError(f"no published rows to fit the {engine} profile on")
    names = layout.names()
    measured = np.array([c.measured_s for c in case_list])
    groups = prepare(case_list)

    def residual(values):
        cache = {}

        variant = variant_from_values(values, layout)

        def cal_for(c):
            k = (c.card.id, c.weight)
            if k not in cache:
                cal_terms, extra = split_calibration_terms(variant.terms_for(c.weight, card_classes(c.card))[0])
                cache[k] = calibration(c.card, engine, cal_terms, facts), extra
            return cache[k]

        return predict_cases(groups, cal_for, len(case_list)) / measured - 1.0

    if warm is not None:
        starts = [{n: warm[n] for n in names}]
    else:
        base = {n: (1.0 if "@" in n else STARTS[_term(n)]) for n in names}
        starts = [base, {**base, **{n: 1.0 for n in names if _term(n) == "roofline_exponent"},
                         **{n: 20.0 for n in names if _term(n) == "overhead_exponent"}},
                  {**base, **{n: 20.0 for n in names if _term(n) == "roofline_exponent"},
                   **{n: 1.0 for n in names if _term(n) == "overhead_exponent"}}][:n_starts]
    return _solve(residual, names, starts, max_nfev=max_nfev)


def errors(pred: np.ndarray, case_list: list[Case]) -> dict:
    """MAPE and mean signed error (fractions; pred / measured - 1) per quantity and over all."""
    measured = np.array([c.measured_s for c in case_list])
    rel = pred / measured - 1.0
    kinds = np.array([QUANTITY[c.kind] for c in case_list])
    out = {"points": int(len(rel))}
    if len(rel):
        out.update(mape_fraction=float(np.mean(np.abs(rel))), mean_signed_fraction=float(np.mean(rel)),
                   worst_fraction=float(rel[np.argmax(np.abs(rel))]))
    for q in ("tpot", "prefill", "run"):
        sel = kinds == q
        if sel.any():
            out[q] = {"points": int(sel.sum()), "mape_fraction": float(np.mean(np.abs(rel[sel]))),
                      "mean_signed_fraction": float(np.mean(rel[sel])),
                      "worst_fraction": float(rel[sel][np.argmax(np.abs(rel[sel]))])}
    return out


# ---- a variant of an engine profile: fit, leave-one-card-out, validation on the reserved rows ----
def _identified(layout: Layout, case_list: list[Case]) -> Layout:
    """``layout`` without the names ``case_list`` cannot identify: a format's terms with no case in
    that format (the format then takes the nearest fitted format's, as a transfer would), a class's
    factors with no card of that class (neutral)."""
    formats = {c.weight for c in case_list}
    classes = {k for c in case_list for k in card_classes(c.card)}
    by_format = {f: list(t) for f, t in layout.by_format.items() if f in formats}
    # a shared term every case's format replaces would be unidentified: let those formats share it
    for term in {t for ts in by_format.values() for t in ts}:
        if all(term in by_format.get(f, ()) for f in formats):
            for ts in by_format.values():
                if term in ts:
                    ts.remove(term)
    return Layout(shared=list(layout.shared),
                  by_format={f: t for f, t in by_format.items() if t},
                  by_class={k: t for k, t in layout.by_class.items() if k in classes},
                  fixed=dict(layout.fixed))


def predict_with(variant: Variant, engine: str, case_list: list[Case], facts: dict | None = None) -> np.ndarray:
    """Predicted seconds of ``case_list`` with the terms of ``variant`` (each case's format and classes)."""
    cache = {}

    def cal_for(c):
        k = (c.card.id, c.weight)
        if k not in cache:
            classes = tuple(x for x in card_classes(c.card) if x in variant.classes)
            cal_terms, extra = split_calibration_terms(variant.terms_for(c.weight, classes)[0])
            cache[k] = calibration(c.card, engine, cal_terms, facts), extra
        return cache[k]

    return predict_cases(case_list, cal_for)


def coverage(case_list: list[Case]) -> dict:
    """What the fitted rows spanned, in roofline.confidence's coverage keys."""
    contexts = [c.point.context_depth + c.point.prompt_tokens + c.point.gen_tokens for c in case_list]
    specs = {c.spec.name: c.spec for c in case_list}
    dense = [s.param_count for s in specs.values() if not s.moe_layers]
    moe = [s.param_count for s in specs.values() if s.moe_layers]
    out = {
        "context_tokens": [int(min(contexts)), int(max(contexts))],
        "prompt_tokens": [int(min(c.point.prompt_tokens for c in case_list)),
                          int(max(c.point.prompt_tokens for c in case_list))],
        "batch": [int(min(c.batch for c in case_list)), int(max(c.batch for c in case_list))],
        "params": [int(min(dense or moe)), int(max(dense or moe))],
        "weight_dtypes": _with_16bit_twin({c.weight for c in case_list}),
        "kv_dtypes": _with_16bit_twin({c.kv for c in case_list}),
        "attention": sorted({s.attention_label for s in specs.values()}),
        "windows": any(s.layer_windows is not None and any(s.windows) for s in specs.values()),
        "sinks": any(s.attention_sinks for s in specs.values()),
        "moe": bool(moe),
        "tp": sorted({c.tp for c in case_list}),
    }
    if moe:
        out["moe_params"] = [int(min(moe)), int(max(moe))]
    return out


def _with_16bit_twin(names: set[str]) -> list[str]:
    """fp16 and bf16 cost the same bytes and FLOPs: a fit that saw one covers the other."""
    if names & {"fp16", "bf16"}:
        names = names | {"fp16", "bf16"}
    return sorted(names)


def fitted_on(case_list: list[Case]) -> dict:
    """Cards, models, formats, points per quantity and the sources a variant was fitted on."""
    sources = {}
    for c in case_list:
        sources.setdefault(c.point.source_url, c.point.source_title)
    return {
        "cards": sorted({c.card.id for c in case_list}),
        "models": sorted({c.spec.name for c in case_list}),
        "weight_formats": sorted({c.weight for c in case_list}),
        "points": {q: sum(1 for c in case_list if QUANTITY[c.kind] == q) for q in ("tpot", "prefill", "run")},
        "engine_versions": sorted({c.point.engine_version for c in case_list}),
        "sources": [{"url": u, "title": t} for u, t in sorted(sources.items())],
        "published_ids": {k: v for k, v in sorted({**{m: MODEL_ALIASES[m][0] for m in {c.point.model for c in case_list}
                                                       if m in MODEL_ALIASES},
                                                    **{m: CARD_ALIASES[m][0] for m in {c.point.card for c in case_list}
                                                       if m in CARD_ALIASES}}.items())},
    }


def _per_card(pred: np.ndarray, case_list: list[Case]) -> dict:
    out = {}
    for card in sorted({c.card.id for c in case_list}):
        idx = [i for i, c in enumerate(case_list) if c.card.id == card]
        out[card] = errors(pred[idx], [case_list[i] for i in idx])
    return out


def leave_one_card_out(case_list: list[Case], engine: str, layout: Layout, values: dict, facts=None,
                       max_nfev: int = 25) -> tuple[np.ndarray, dict]:
    """Each card's rows predicted by a refit on the other cards (warm-started at the full fit's
    ``values``; the names the others cannot identify dropped, ``_identified``): the predictions and
    the per-card errors."""
    pred = np.empty(len(case_list))
    for card in sorted({c.card.id for c in case_list}):
        held = [i for i, c in enumerate(case_list) if c.card.id == card]
        rest = [c for c in case_list if c.card.id != card]
        sub = _identified(layout, rest)
        vals = fit_terms(rest, engine, sub, facts, warm={n: values[n] for n in sub.names()}, max_nfev=max_nfev)
        pred[held] = predict_with(variant_from_values(vals, sub), engine, [case_list[i] for i in held], facts)
    return pred, _per_card(pred, case_list)


def fit_variant(points, engine: str, backend: str, layout: Layout, applies_to: str, facts: dict | None = None,
                loco: bool = True, note: str | None = None) -> tuple[Variant, dict]:
    """Fit one variant of ``engine``'s profile on the unreserved published rows of ``backend``;
    its leave-one-card-out error; and the validation on the reserved rows. Returns (variant, report)
    where report holds the tables (per card, in-sample, LOCO, reserved) and the rows skipped."""
    mine = [p for p in points if p.engine == engine]
    all_cases, skipped = cases(mine, backends=(backend,))
    fit_cases = [c for c in all_cases if not c.point.reserved]
    reserved = [c for c in all_cases if c.point.reserved]
    sub = _identified(layout, fit_cases)
    values = fit_terms(fit_cases, engine, sub, facts)
    variant = variant_from_values(values, sub, applies_to)
    in_sample = predict_with(variant, engine, fit_cases, facts)
    report = {"in_sample": errors(in_sample, fit_cases), "in_sample_per_card": _per_card(in_sample, fit_cases)}
    if loco and len({c.card.id for c in fit_cases}) > 1:
        loco_pred, per_card = leave_one_card_out(fit_cases, engine, sub, values, facts)
        report["loco"] = errors(loco_pred, fit_cases)
        report["loco_per_card"] = per_card
    if reserved:
        pred = predict_with(variant, engine, reserved, facts)
        report["reserved"] = errors(pred, reserved)
        report["reserved_per_card"] = _per_card(pred, reserved)
        report["reserved_rows"] = [_row(c, p) for c, p in zip(reserved, pred)]
    report["skipped"] = _skip_counts(skipped)
    report["skipped_reserved"] = [{"card": p.card, "model": p.model, "metric": p.metric, "why": why}
                                  for p, why in skipped if p.reserved]
    pooled = report.get("loco", report["in_sample"])
    error = {"pooled": _confidence_keys(pooled, "leave-one-card-out" if "loco" in report else "in-sample (one card: "
                                        "no card could be left out)"),
             "per_card": {k: _brief(v) for k, v in report.get("loco_per_card", report["in_sample_per_card"]).items()}}
    variant = variant.model_copy(update={
        "terms": {k: Fact(value=f.value, source=_term_source(engine, backend, k)) for k, f in variant.terms.items()},
        "formats": {fmt: {k: Fact(value=f.value, source=_term_source(engine, backend, k, fmt=fmt)) for k, f in t.items()}
                    for fmt, t in variant.formats.items()},
        "classes": {cls: {k: Fact(value=f.value, source=_term_source(engine, backend, k, cls=cls)) for k, f in t.items()}
                    for cls, t in variant.classes.items()},
        "fitted_on": fitted_on(fit_cases), "error": error, "coverage": coverage(fit_cases), "note": note})
    return variant, report


def _term_source(engine, backend, term, fmt=None, cls=None) -> str:
    what = f"{fmt} rows" if fmt else f"factor on the {cls} cards' value" if cls else "all rows"
    return (f"fitted (roofline.published_fit, benchmarks/fit_engine_profiles.py) to the unreserved {engine} {backend} "
            f"rows of hardware_profiles/measurements/published/: {what}")


def _confidence_keys(e: dict, basis: str) -> dict:
    """The pooled error in the keys roofline.confidence reads."""
    tpot, pre, run = e.get("tpot", {}), e.get("prefill", {}), e.get("run", {})
    return {"basis": basis, "points": e.get("points", 0),
            "tpot_mape_fraction": tpot.get("mape_fraction", run.get("mape_fraction")),
            "tpot_mean_signed_fraction": tpot.get("mean_signed_fraction", run.get("mean_signed_fraction")),
            "tpot_points": tpot.get("points", run.get("points", 0)),
            "ttft_mape_fraction": pre.get("mape_fraction"), "ttft_mean_signed_fraction": pre.get("mean_signed_fraction"),
            "ttft_points": pre.get("points", 0),
            "run_mape_fraction": run.get("mape_fraction"), "run_points": run.get("points", 0)}


def _brief(e: dict) -> dict:
    out = {"points": e["points"]}
    for q in ("tpot", "prefill", "run"):
        if q in e:
            out[q] = {"points": e[q]["points"], "mape_fraction": round(e[q]["mape_fraction"], 4),
                      "mean_signed_fraction": round(e[q]["mean_signed_fraction"], 4)}
    return out


def _row(c: Case, pred_s: float) -> dict:
    p = c.point
    return {"card": p.card, "model": p.model, "weight_format": p.weight_format, "tp": p.tp, "gpus": p.gpu_count,
            "batch": p.batch, "prompt_tokens": p.prompt_tokens, "gen_tokens": p.gen_tokens,
            "context_depth": p.context_depth, "metric": p.metric, "value": p.value, "unit": p.unit,
            "measured_s": c.measured_s, "predicted_s": float(pred_s), "error_fraction": float(pred_s / c.measured_s - 1)}


def _skip_counts(skipped) -> dict:
    out: dict[str, int] = {}
    for _, why in skipped:
        out[why] = out.get(why, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def validate_reserved(points, engine: str, variants: dict[str, Variant], fallback: str | None = None) -> dict:
    """The reserved rows of ``engine`` predicted as ``roofline predict --engine <engine>`` answers
    them: each with the variant its card resolves to (roofline.engines: the card's backend, else
    ``fallback``), whatever backend the row ran on (a row on another backend -- llama.cpp's Vulkan
    build on a Mac -- is flagged, not dropped). Returns the errors overall, per card and per
    backend, every row, and the rows that cannot be priced at all with the reason."""
    reserved = [p for p in points if p.engine == engine and p.reserved]
    priced, unpriced = cases(reserved)
    by_variant: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(priced):
        name = backend_for(c.card)
        name = name if name in variants else fallback
        if name is None or name not in variants:
            unpriced.append((c.point, f"no {engine} variant for {backend_for(c.card)}"))
            continue
        by_variant[name].append(i)
    pred = np.full(len(priced), np.nan)
    for name, idx in by_variant.items():
        pred[idx] = predict_with(variants[name], engine, [priced[i] for i in idx])
    keep = [i for i in range(len(priced)) if np.isfinite(pred[i])]
    rows = [priced[i] for i in keep]
    p = pred[keep]
    out = {"points": len(reserved), "priced": len(rows), "errors": errors(p, rows) if rows else {},
           "per_card": _per_card(p, rows) if rows else {},
           "rows": [{**_row(c, x), "backend": c.backend, "variant": backend_for(c.card) if backend_for(c.card)
                     in variants else fallback} for c, x in zip(rows, p)],
           "unpriced": [{"card": q.card, "model": q.model, "metric": q.metric, "why": why} for q, why in unpriced]}
    other = [i for i, c in enumerate(rows) if c.backend != backend_for(c.card)]
    if other:
        out["on_another_backend"] = errors(p[other], [rows[i] for i in other])
    return out
