"""The `roofline` command: parse, call one library function (roofline.api), render. No formulas here.

Every option is declared once (``OPTIONS``); a command lists the ones it takes. Options reach the
API by keyword under the API's own names; a library error that names an API argument is shown
with the flag that sets it (``FLAGS``).
"""

from __future__ import annotations

import functools
import warnings
import sys
from pathlib import Path

import click

from roofline.errors import RooflineError, RooflineWarning
from roofline.formats import kv_format_names, weight_format_names

FORMATS = ("table", "json", "csv")
DTYPE_CHOICES = ("bf16", "fp16", "fp8", "int8", "int4")
#: Weight and KV-cache formats (roofline/formats.py; aliases such as Q4_K_M, 4bit, bfloat16 are accepted too).
WEIGHT_FORMATS = tuple(weight_format_names())
KV_FORMATS = tuple(kv_format_names())
RETURN_POLICIES = ("whole-batch", "early-return")
CARD_HELP = "Card id or alias (see `roofline cards`) or a profile JSON file."
MODEL_HELP = "Catalog name (see `roofline models`), HF repo id of a catalog model, config.json path or model folder."


def parse_batches(text: str) -> list[int]:
    """'1,2,4' | '1-64' (every integer) | '1..1024' (powers of two) | a mix of these."""
    from roofline.prediction import MAX_BATCHES

    out: list[int] = []
    for item in text.split(","):
        item = item.strip()
        try:
            if ".." in item:
                lo, hi = (int(x) for x in item.split(".."))
                if lo <= 0 or hi < lo:
                    raise ValueError
                b = lo
                while b <= hi:
                    out.append(b)
                    b *= 2
            elif "-" in item[1:]:
                lo, hi = (int(x) for x in item.split("-"))
                if lo <= 0 or hi < lo:
                    raise ValueError
                if hi - lo >= MAX_BATCHES:  # refused before a list of that size is built
                    raise RooflineError(f"{item}: at most {MAX_BATCHES:,} batch sizes at once; use powers of two "
                                        f"({lo}..{hi}) for a wide range", "batches")
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(item))
        except ValueError:
            raise RooflineError(
                f"bad batch list item {item!r}: use numbers, ranges like 1-64, or powers of two like 1..1024", "batches"
            ) from None
    if any(b <= 0 for b in out):
        raise RooflineError(f"batch sizes must be at least 1, not {min(out)}", "batches")
    return sorted(set(out))


class FormatName(click.ParamType):
    """A weight or KV-cache format by any name roofline/formats.py knows (Q4_K_M, 4bit, bfloat16 ...),
    given back canonical; an unknown one is a usage error listing the formats."""

    def __init__(self, kind: str):
        self.kind = kind
        self.name = f"{kind} format"

    def convert(self, value, param, ctx):
        from roofline import formats

        try:
            return (formats.weight_format if self.kind == "weight" else formats.kv_format)(value).name
        except RooflineError as exc:
            self.fail(exc.message, param, ctx)


class Duration(click.ParamType):
    """A time limit: ``50ms``, ``0.5s``, ``200us``; a bare number is seconds. A bare TPOT limit of
    a second or more is refused (a TPOT of seconds per token is not a latency limit anyone sets:
    it is ms written without the unit)."""

    name = "duration"
    SCALE = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}

    def __init__(self, bare_max_s: float | None = None):
        self.bare_max_s = bare_max_s

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().lower()
        for unit in ("us", "µs", "ms", "s"):
            if text.endswith(unit):
                number, scale = text[: -len(unit)].strip(), self.SCALE[unit]
                break
        else:
            number, scale = text, None
        try:
            seconds = float(number) * (scale or 1.0)
        except ValueError:
            self.fail(f"{value!r}: give a time such as 50ms, 0.5s or 0.05 (seconds)", param, ctx)
        if not (seconds > 0 and seconds < float("inf")):
            self.fail(f"{value!r}: must be a positive time", param, ctx)
        if scale is None and self.bare_max_s is not None and seconds >= self.bare_max_s:
            self.fail(f"{value} would be {seconds:g} s; write {number}ms for milliseconds "
                      f"(or {number}s if you mean seconds)", param, ctx)
        return seconds


def _opt(*decls, **attrs):
    return functools.partial(click.option, *decls, **attrs)


#: Every option, declared once: name -> a click.option factory.
OPTIONS = {
    "card": _opt("--card", required=True, help=CARD_HELP),
    "card_optional": _opt("--card", help=CARD_HELP + " With --model: timings."),
    "model": _opt("--model", required=True, help=MODEL_HELP),
    "model_optional": _opt("--model", help=MODEL_HELP + " With --card: timings."),
    "prompt_tokens": _opt("--prompt", "prompt_tokens", default=128, show_default=True, type=int,
                          help="Prompt tokens per request."),
    "gen_tokens": _opt("--gen", "gen_tokens", default=128, show_default=True, type=int,
                       help="Generated tokens per request."),
    "calibration": _opt("--calibration", "calibration", type=click.Path(dir_okay=False),
                        help="A fitted calibration JSON (default: the one shipped for --card and --engine, if any)."),
    "no_calibration": _opt("--no-calibration", is_flag=True, help="Predict from the card's ceilings alone (pure roofline)."),
    "engine": _opt("--engine", help="Engine profile (hardware_profiles/engines/): hf-eager, graph, vllm, tensorrt-llm, "
                                    "llama.cpp, lmdeploy. Default: the engine of the calibration measured on --card, "
                                    "else llama.cpp on Apple, GeForce, Jetson and CPUs, vllm on other GPUs "
                                    "(docs/engines.md)."),
    "kv_cache": _opt("--kv-cache", type=click.Choice(["dynamic", "static"]),
                     help="dynamic: a step reads the tokens so far (HF default); static: the whole preallocated "
                          "cache. Default: the calibration's."),
    "weight_dtype": _opt("--weight-dtype", default="bf16", show_default=True, metavar="FORMAT", type=FormatName("weight"),
                         help="Weight format, by the name people use, at its true bits per weight (scales "
                              "included): " + ", ".join(WEIGHT_FORMATS) + "; it also picks the matmul peak."),
    "kv_dtype": _opt("--kv-dtype", default="bf16", show_default=True, metavar="FORMAT", type=FormatName("KV"),
                     help="KV-cache element format: " + ", ".join(KV_FORMATS) + "."),
    "logits": _opt("--logits", type=click.Choice(["last", "all"]), default="last", show_default=True,
                   help="Logits kept at prefill: the last position (logits_to_keep=1) or every position."),
    "tp": _opt("--tp", "tp", default=1, show_default=True, type=int,
               help="Tensor parallelism: split the weights and KV heads over this many GPUs (Megatron-style, two "
                    "all-reduces a layer); memory is per GPU."),
    "routing_skew": _opt("--routing-skew", "routing_skew", default=0.0, show_default=True, type=float,
                         help="Mixture of experts: 0 = tokens routed uniformly; s > 0 = expert popularity falls as "
                              "1/rank^s (a trained router's skew; fewer experts touched per step)."),
    "batches": _opt("--batches", default="1..128", show_default=True,
                    help="Batch sizes: 1,2,4 | 1-64 (every integer) | 1..1024 (powers of two)."),
    "fmt": _opt("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                help="table for people; json and csv carry raw base-unit numbers (s, bytes, FLOP)."),
    "mix": _opt("--mix", help="Length classes COUNTxGEN, e.g. 8x32,8x256 (interleaved round-robin)."),
    "requests": _opt("--requests", "--lengths", "requests", type=click.Path(dir_okay=False),
                     help="Request file: CSV with a header or JSONL; prompt_tokens, gen_tokens, optional arrival_s."),
    "return_policy": _opt("--return-policy", "--policy", "return_policy", type=click.Choice(RETURN_POLICIES),
                          default="whole-batch", show_default=True,
                          help="Static batching: whole-batch returns every result when the batch ends; "
                               "early-return returns each when it ends."),
    # the continuous server (simulate, choose-server): roofline.servers.ServerOptions
    "schedule": _opt("--schedule", type=click.Choice(["decode-first", "prefill-first"]), default="decode-first",
                     show_default=True,
                     help="Continuous server: decode-first (running decodes first, prefill chunks fill the "
                          "--max-num-batched-tokens budget; vLLM V1, SGLang) or prefill-first (an iteration that admits "
                          "requests only prefills them; vLLM V0)."),
    "max_num_batched_tokens": _opt("--max-num-batched-tokens", type=int,
                                   help="Tokens one iteration takes (decode-first: longer prompts are prefilled in "
                                        "chunks; default no limit). Prefill-first default: max(--max-model-len, 2048)."),
    "max_model_len": _opt("--max-model-len", type=int,
                          help="Longest prompt + generation a request may need; longer ones are rejected (default: the "
                               "model's context; serving-loop: the longest request rounded up to 256)."),
    "kv_capacity_tokens": _opt("--kv-capacity-tokens", type=int,
                               help="The KV pool in tokens, given (default: sized from the card's memory)."),
    "gpu_memory_utilization": _opt("--gpu-memory-utilization", type=float, default=0.9, show_default=True,
                                   help="Fraction of the card's memory the engine may use: the KV pool is what is left "
                                        "of it after weights, workspace and activations."),
    "block_size": _opt("--block-size", type=int, default=16, show_default=True, help="Tokens per KV block."),
    "engine_reserve_gib": _opt("--engine-reserve-gib", type=float,
                               help="GiB the engine keeps out of the KV pool besides weights, workspace and "
                                    "activations (CUDA graphs, buffers; default: the engine profile's, else 0)."),
    "pass_cost": _opt("--pass-cost", type=click.Choice(["fused", "serving-loop"]), default="fused", show_default=True,
                      help="fused: each iteration is one step-model pass; serving-loop: the graph engine's server loop "
                           "(calibrate/serving_loop.py: bucketed CUDA-graph decode over a static cache of "
                           "--max-model-len, prefill as CUDA graphs padded to token buckets, measured host time)."),
    "loop_terms": _opt("--loop-terms", type=click.Path(dir_okay=False),
                       help="The serving loop's measured terms (default: hardware_profiles/serving/CARD-ENGINE-loop.json)."),
    "pass_time_scale": _opt("--pass-time-scale", type=float, default=1.0, show_default=True,
                            help="Multiply every pass's GPU time (1.03: a GPU 3% slower than priced; the serving "
                                 "loop's host time not): near saturation the tails move far more, so size with a "
                                 "margin (docs/serving.md)."),
    "slo_ttft_s": _opt("--slo-ttft", "slo_ttft_s", type=Duration(),
                       help="SLO: largest acceptable TTFT per request (500ms, 0.5s or 0.5 = seconds)."),
    "slo_tpot_s": _opt("--slo-tpot", "slo_tpot_s", type=Duration(bare_max_s=1.0),
                       help="SLO: largest acceptable TPOT per request (30ms, 0.03s or 0.03 = seconds)."),
}
SERVER_OPTIONS = ("schedule", "max_num_batched_tokens", "max_model_len", "kv_capacity_tokens", "gpu_memory_utilization",
                  "block_size", "engine_reserve_gib", "pass_cost", "loop_terms", "pass_time_scale")


def server_kwargs(kw: dict) -> dict:
    """Pop the continuous server's options, as the API takes them (GiB -> bytes at this edge)."""
    out = {k: kw.pop(k) for k in SERVER_OPTIONS if k in kw}
    gib = out.pop("engine_reserve_gib", None)
    if gib is not None:
        from roofline.units import GiB

        out["engine_reserve_bytes"] = gib * GiB
    return out

#: API argument -> the flag that sets it (for error messages).
FLAGS = {
    "card": "--card", "model": "--model", "prompt_tokens": "--prompt", "gen_tokens": "--gen",
    "calibration": "--calibration", "engine": "--engine", "kv_cache": "--kv-cache", "weight_dtype": "--weight-dtype",
    "kv_dtype": "--kv-dtype", "logits": "--logits", "batches": "--batches", "batch": "--batch", "mix": "--mix",
    "requests": "--requests", "count": "--count", "arrival_rate": "--arrival-rate", "seed": "--seed",
    "return_policy": "--return-policy", "ttft_max_s": "--ttft-max", "tpot_max_s": "--tpot-max",
    "min_user_tok_s": "--min-user-tok-s", "max_batch": "--max-batch", "memory_headroom": "--memory-headroom", "min_batch": "--min-batch",
    "models": "--model", "tpot_statistic": "--tpot-statistic", "stream_count": "--count",
    "prompt_tokens_list": "--prompts", "tp": "--tp", "routing_skew": "--routing-skew", "budget_s": "--budget-s",
    "schedule": "--schedule", "max_num_batched_tokens": "--max-num-batched-tokens", "max_model_len": "--max-model-len",
    "kv_capacity_tokens": "--kv-capacity-tokens", "gpu_memory_utilization": "--gpu-memory-utilization",
    "block_size": "--block-size", "engine_reserve_bytes": "--engine-reserve-gib", "pass_cost": "--pass-cost",
    "loop_terms": "--loop-terms", "pass_time_scale": "--pass-time-scale", "pass_time_spread": "--pass-time-spread",
    "slo_ttft_s": "--slo-ttft", "slo_tpot_s": "--slo-tpot",
    "max_num_seqs": "--batch", "rates": "--rates", "cards": "--card", "batches_list": "--batch", "tp_list": "--tp",
    "slo_percentile": "--slo-percentile", "chart": "--chart", "names": "--run",
}
SCENARIO_OPTIONS = ("card", "model", "prompt_tokens", "gen_tokens", "calibration", "no_calibration", "engine",
                    "kv_cache", "weight_dtype", "kv_dtype", "tp", "routing_skew")


def options(*names):
    """Apply the named OPTIONS (in order) to a command."""

    def decorate(f):
        for name in reversed(names):
            f = OPTIONS[name]()(f)
        return f

    return decorate


def domain_errors(f):
    """Turn RooflineError into a one-line message (the flag named, not the API argument) and exit 1."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RooflineWarning)
                result = f(*args, **kwargs)
            _echo_warnings(caught)
            return result
        except RooflineError as exc:
            raise click.ClickException(exc.for_flag(FLAGS.get(exc.field))) from None
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def _echo_warnings(caught) -> None:
    """Each distinct RooflineWarning once, on stderr, after the command's output."""
    seen = set()
    for w in caught:
        text = str(w.message)
        if issubclass(w.category, RooflineWarning) and text not in seen:
            seen.add(text)
            click.echo(f"warning: {text}", err=True)
        elif not issubclass(w.category, RooflineWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def scenario_kwargs(kw: dict) -> dict:
    """Pop the scenario options out of a command's keyword arguments, as the API takes them."""
    calibration, no_calibration = kw.pop("calibration", None), kw.pop("no_calibration", False)
    if calibration and no_calibration:
        raise RooflineError("give either --calibration or --no-calibration, not both")
    out = {k: kw.pop(k) for k in SCENARIO_OPTIONS if k in kw}
    out["calibration"] = None if no_calibration else (calibration or "auto")
    return out


class OneLineErrors(click.Group):
    """Usage errors (a bad value, a missing option) as one line, like every other error: the
    command's --help says the rest."""

    def main(self, args=None, *rest, standalone_mode: bool = True, **kwargs):
        args = list(sys.argv[1:] if args is None else args)
        if args[:1] == ["calibrate"] and "--serving" in args:  # issue 14's spelling of `roofline serve`
            args = ["serve"] + [a for a in args[1:] if a != "--serving"]
        args = (args, *rest)
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "roofline"
            click.echo(f"Error: {exc.format_message()} (see: {where} --help)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roofline")
def main():
    """How LLM decoding behaves on a GPU: TTFT, TPOT, throughput and memory at every batch,
    where decode bends, what static batching wastes, and which batch to run.

    Example: roofline predict --card rtx3060 --model qwen2.5-1.5b
    """


@main.command()
@options(*SCENARIO_OPTIONS, "batches", "logits", "fmt")
@domain_errors
def predict(fmt, batches, **kw):
    """Predict TTFT, TPOT, throughput and peak memory for every batch size.

    Example: roofline predict --card rtx3060 --model qwen2.5-1.5b --prompt 128 --gen 128
    """
    from roofline import api
    from roofline.views import predict_view

    sc = scenario_kwargs(kw)
    click.echo(predict_view(api.predict(batches=parse_batches(batches), **sc, **kw), fmt))


@main.command()
@options(*SCENARIO_OPTIONS, "fmt")
@domain_errors
def bend(fmt, **kw):
    """Which batch bends: where intensity reaches the balance point, and the TPOT knee.

    Example: roofline bend --card rtx3060 --model qwen2.5-1.5b
    """
    from roofline import api
    from roofline.views import bend_view

    click.echo(bend_view(api.bend(**scenario_kwargs(kw)), fmt))


@main.command()
@options("fmt")
@domain_errors
def models(fmt):
    """List the catalog models: parameters, weight bytes, KV bytes per token.

    Example: roofline models --format json
    """
    from roofline.catalogs import model_rows
    from roofline.views import models_view

    click.echo(models_view(model_rows(), fmt))


@main.command()
@options("fmt")
@domain_errors
def cards(fmt):
    """List the card profiles: memory, bandwidth and bf16 ceilings, balance point.

    Example: roofline cards
    """
    from roofline.catalogs import card_rows
    from roofline.views import cards_view

    click.echo(cards_view(card_rows(), fmt))


TPOT_STATISTIC = ("mean", "median", "p10")


@main.command()
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--card", required=True, help="The card the measurements were taken on.")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="Where to write the calibration JSON.")
@click.option("--ceilings", type=click.Path(dir_okay=False), help="Ceilings JSON measured with the runs (replaces the profile's).")
@click.option("--label", help="Where the measurements come from, stored in the calibration and shown by predict.")
@click.option("--model", "models", multiple=True, help="Fit only these models' rows (repeat; default: all).")
@click.option("--tpot-statistic", type=click.Choice(TPOT_STATISTIC), default="mean", show_default=True,
              help="Which statistic of the measured decode steps to fit (median/p10 resist a noisy host).")
@click.option("--attention-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Attention-probe file (calibrate.probes): the attention kernel timed alone, fitted with the decode terms "
                   "(repeat: the attention probe's and the attention-groups probe's).")
@click.option("--layers-probe", type=click.Path(dir_okay=False),
              help="Layers-probe file (calibrate.probes): the decode step of the fitted models cut to a few layer "
                   "counts, fitted with the decode terms (it splits the fixed time into the step's own and each layer's).")
@click.option("--prefill-attention-probe", type=click.Path(dir_okay=False),
              help="Prefill-attention-probe file (calibrate.probes): the engine's prefill attention FLOP rate by head "
                   "width, stored as measured; a prompt's attention is priced at it.")
@click.option("--masked-attention-probe", type=click.Path(dir_okay=False),
              help="Masked-attention-probe file (calibrate.probes): the engine's masked prefill path (a window "
                   "shorter than the prompt, attention sinks) by head width, stored as measured.")
@click.option("--prefill-kernels-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Prefill-kernels-probe file (calibrate.probes): each kind of element a prefill layer's non-matmul "
                   "kernels touch (norms, activation, rope, cache writes, q/k norms), its cost stored as measured "
                   "(repeat: the files' points are pooled).")
@click.option("--layer-features-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Layer-features-probe file (calibrate.probes): the fixed time a decode step spends per layer on a "
                   "feature's own kernels (q/k norms, MLA's decode, shared experts, gpt-oss's MoE layer), net of what "
                   "the fitted terms price the variants' shapes at (repeat: the files' points are pooled).")
@click.option("--attention-contexts-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Attention-contexts-probe file (calibrate.probes): the windows of cache lengths where the engine's "
                   "decode attention runs a slower kernel, and by how much (repeat: the files' points are pooled).")
@click.option("--sustained-matmul-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Sustained-matmul-probe file (calibrate.probes): the card's matmul rate against time under load "
                   "(the clock's fall from its boost), stored as measured; a prefill's compute-bound kernels run at "
                   "its average over the pass (repeat: the files' windows are pooled).")
@click.option("--attention-stream-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Attention-probe files (any of calibrate.probes' attention probes): the decode attention's cost per "
                   "KV byte and per score element, fitted on their shapes of 64+ sequences over 1,024+ positions and "
                   "held while the other terms are fitted (repeat: the files' points are pooled).")
@click.option("--softmax-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Attention-probe files timing the softmax alone (the attention and attention-widths probes): the "
                   "softmax's warp kernel's time per position of a row at few rows, stored as measured: a decode step's "
                   "scores cost at least that x the cache's positions x the layers while rows run a warp each "
                   "(repeat: the files' series are pooled).")
@click.option("--attention-table-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Attention-table-probe file (calibrate.probes): the decode attention's measured time over its price "
                   "by head shape, batched matrices (batch x KV heads) and cache length, read against the fitted terms "
                   "and held while they are fitted again (repeat: the files' points are pooled).")
@click.option("--collectives", type=click.Path(dir_okay=False),
              help="Collectives file of a tensor-parallel run: the all-reduce's measured latency and bandwidth.")
@click.option("--base", type=click.Path(dir_okay=False),
              help="Keep this calibration's terms; fit only what these measurements newly identify (e.g. MoE terms).")
@click.option("--moe-probe", type=click.Path(dir_okay=False),
              help="MoE-probe file (calibrate.probes), with --base and MoE runs: the routed rows' gather and combine "
                   "cost and the grouped matmuls' rates per tile FLOP (small and large tiles), measured at the fitted "
                   "MoE models' shapes, held while the other MoE terms are fitted.")
@click.option("--grouped-mm-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Grouped-mm-probe file (calibrate.probes), with --base and MoE runs: the experts' grouped matmul alone "
                   "at generic shapes (experts x rows an expert x K x N); the routed experts are then priced from it "
                   "(expert_gemm_table), held while the MoE layer's overhead is fitted (repeat: pooled, a later file's "
                   "point replacing an earlier one's).")
@click.option("--index-probe", type=click.Path(dir_okay=False), multiple=True,
              help="Index-probe file (calibrate.probes), with --base and MoE runs: PyTorch's index_select / index_add_ "
                   "alone, as the graph engine's MoE layer runs them (index_kernel_table); a pass of at most 16 routed "
                   "rows pays its small-index kernels' time over the large-index ones' (repeat: pooled).")
@options("fmt")
@domain_errors
def fit(measurements, fmt, **kw):
    """Fit a calibration (overheads, efficiencies) to measurement CSVs; no GPU needed.

    Example: roofline fit hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv --card rtx3060 -o cal.json
    """
    from roofline import api
    from roofline.views import fit_view

    click.echo(fit_view(api.fit(list(measurements), **kw), kw["output"], fmt))


@main.command()
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--calibration", type=click.Path(dir_okay=False),
              help="A calibration JSON (default: what `roofline predict` uses for the card and engine: the "
                   "calibration shipped for them, else the engine profile's terms transferred to the card).")
@click.option("--card", help="Card profile to use (default: the calibration's card, else the measurements').")
@click.option("--engine", help="Without --calibration: the engine (default: the measurements').")
@click.option("--tpot-statistic", type=click.Choice(TPOT_STATISTIC),
              help="Which measured decode-step statistic to compare with (default: the calibration's).")
@click.option("--min-batch", default=1, show_default=True, type=click.IntRange(min=1), help="Compare only rows of this batch or more.")
@click.option("--model", "models", multiple=True, help="Compare only these models' rows (repeat; default: all).")
@options("fmt")
@domain_errors
def compare(measurements, fmt, **kw):
    """Predicted vs measured, row by row, with the MAPE of TPOT, TTFT and peak memory.

    Example: roofline compare --calibration hardware_profiles/calibrations/rtx3060-hf-eager.json hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv

    Without --calibration, the measurements' card and engine as `roofline predict` prices them:
    on a card with no calibration of its own, a leave-one-card-out check of the engine profile
    (roofline compare hardware_profiles/measurements/h100-sxm-graph-check-call1.csv).
    """
    from roofline import api
    from roofline.views import compare_view

    click.echo(compare_view(api.compare(list(measurements), **kw), fmt))


def parse_ints(text: str, field: str) -> list[int]:
    """'128' or '128,512,2048' -> a list of whole numbers."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise RooflineError(f"give whole numbers separated by commas, not {text!r}", field) from None


@main.command()
@click.option("--card", required=True, help="Card id the run is recorded under (e.g. h200).")
@click.option("--model", "models", multiple=True, required=True, help="Model to sweep; repeat for several.")
@click.option("--engine", type=click.Choice(["hf-eager", "graph"]), default="hf-eager", show_default=True)
@click.option("--batches", default="1..1024", show_default=True, help="Batch sizes, as for predict; each prompt climbs them until out of memory.")
@click.option("--prompt", "--prompts", "prompts", default="128", show_default=True,
              help="Prompt tokens: one length or several (128,512,2048): a grid of contexts.")
@click.option("--gen", "gens", default="128", show_default=True, help="Generated tokens: one length, or one per prompt.")
@click.option("--grid", type=click.Choice(["default"]),
              help="The grid that identifies every term: prompts 128..16384 (gen 128..32), batches 1..1024 until OOM.")
@click.option("--budget-s", type=float, help="Stop cleanly before a point that would start after this many seconds (--resume continues).")
@click.option("--ttft-max-tokens", type=int, help="Time the prefill only up to batch x prompt tokens (default 65,536).")
@click.option("--warmup-prefill-max-tokens", type=int, help="Run the untimed warm-up prefill only up to this many tokens (default 16,384).")
@click.option("--max-seconds-per-point", type=float, help="Skip a point whose estimated cost is above this.")
@click.option("--tp", default=1, show_default=True, type=int, help="Split the model over this many GPUs (graph engine; one process per GPU).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder for measurements, ceilings and the calibration.")
@click.option("--device", default="cuda", show_default=True, help="cuda (or cuda:N), or cpu: this machine's CPU as the card.")
@click.option("--resume", is_flag=True, help="Keep the points already in the folder's CSV and measure the rest.")
@click.option("--no-fit", is_flag=True, help="Measure only.")
@click.option("--serving", is_flag=True,
              help="Serve a request stream with the real server loop instead: the same as `roofline serve` with the other options.")
@click.option(
    "--no-cudnn-attention",
    is_flag=True,
    help="Disable PyTorch's cuDNN SDPA backend (on Hopper it rebuilds plans per KV length; see docs/calibration.md).",
)
@domain_errors
def calibrate(batches, prompts, gens, grid, out_dir, no_fit, serving, no_cudnn_attention, **kw):
    """Measure real bf16 decode on this machine's GPU (or CPU), then fit a calibration.

    Example: roofline calibrate --card h200 --model qwen2.5-1.5b --model qwen2.5-7b --engine graph --grid default --out runs/h200
    """
    from roofline import api
    from roofline.views import calibrate_view

    if serving:  # the group reroutes `calibrate --serving` to `serve`; called directly, say so
        raise RooflineError("calibrate --serving is `roofline serve`: run `roofline calibrate --serving ...` "
                            "through the roofline command, or `roofline serve ...`")
    batch_list, prompt_list, gen_list = parse_batches(batches), parse_ints(prompts, "prompt_tokens"), parse_ints(gens, "gen_tokens")
    if grid == "default":
        from calibrate.grid import DEFAULT_GRID

        batch_list, prompt_list, gen_list = list(DEFAULT_GRID.batches), list(DEFAULT_GRID.prompts), list(DEFAULT_GRID.gens)
    result = api.calibrate(batches=batch_list, prompt_tokens=prompt_list, gen_tokens=gen_list[0] if len(gen_list) == 1 else gen_list,
                           out_dir=Path(out_dir), fit=not no_fit, cudnn_attention=not no_cudnn_attention, **kw)
    click.echo(calibrate_view(result))


@main.command("compare-serving")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--loop-terms", type=click.Path(dir_okay=False),
              help="The serving loop's terms (default: the shipped ones of each run's card).")
@click.option("--run", "names", multiple=True, help="Compare only these runs (repeat; default: every run in FOLDER).")
@click.option("--pass-time-spread", "pass_time_spread", type=float,
              help="Also replay each run with every pass's GPU time this fraction faster and slower (0.03: +-3%) "
                   "and say whether its measured TTFT p99 lies in the simulated range (triples the work).")
@click.option("--at-probed-speed", is_flag=True,
              help="Replay each run that carries a device probe (its decode steps timed before its clock) with "
                   "its decode steps at the probed speed instead of the price (a diagnosis of the machine the run "
                   "landed on; runs without a probe replay as priced).")
@options("fmt")
@domain_errors
def compare_serving(folder, loop_terms, names, pass_time_spread, at_probed_speed, fmt):
    """Serving runs (roofline serve) against the simulator: each run's stream replayed with its own
    configuration (`roofline simulate --pass-cost serving-loop`), throughput, TTFT and TPOT p50 / p99
    and preemptions side by side, with the acceptance bounds (docs/serving.md).

    Example: roofline compare-serving hardware_profiles/measurements/serving/h200-graph-probe
    """
    from roofline.serving_replay import compare_folder
    from roofline.views import compare_serving_view

    click.echo(compare_serving_view(compare_folder(folder, loop_terms, names, pass_time_spread, at_probed_speed),
                                    fmt))


@main.command()
@click.option("--card", required=True, help="Card id the run is recorded under (e.g. h200).")
@click.option("--model", required=True, help="Model to serve: a dense catalog model or config.json (no MoE or latent attention; a sliding window at least --max-model-len).")
@click.option("--requests", "requests", required=True, type=click.Path(dir_okay=False), help="Request file: CSV with a header or JSONL; prompt_tokens, gen_tokens, optional arrival_s.")
@click.option("--arrival-rate", type=float, help="Poisson arrivals at this many requests/s (replaces the file's arrival_s).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the Poisson arrivals.")
@click.option("--max-num-seqs", type=int, help="Most sequences running at once (default 64).")
@click.option("--max-model-len", type=int, help="Slot capacity in tokens (default: the longest request, rounded up to 256).")
@click.option("--kv-capacity-tokens", type=int, help="KV pool size in tokens (default: from --gpu-memory-utilization).")
@click.option("--gpu-memory-utilization", type=float, help="Fraction of GPU memory the engine may use (default 0.9).")
@click.option("--block-size", type=int, help="Tokens per KV block (default 16).")
@click.option("--max-num-batched-tokens", type=int, help="Most prompt tokens a prefill pass takes.")
@click.option("--policy", type=click.Choice(["prefill-first", "chunked"]), help="Scheduling: prefill-first (vLLM V0) or chunked prefill (V1).")
@click.option("--budget-s", type=float, help="Stop admitting requests after this many seconds.")
@click.option("--eager-prefill", is_flag=True, help="Run prefills eagerly (the loop before prefill CUDA graphs; host-bound).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder for the run's files.")
@click.option("--device", default="cuda", show_default=True, help="cuda, or cpu with a tiny model to test the path.")
@domain_errors
def serve(**kw):
    """Replay a request stream through a real continuous-batching server loop on this GPU; record
    every request's TTFT, TPOT and E2E (then `roofline compare-serving` sets the simulator beside it).

    Example: roofline serve --card h200 --model qwen2.5-1.5b --requests stream.csv --kv-capacity-tokens 12000 --out runs/serve
    """
    from roofline import api

    if kw.pop("eager_prefill"):
        kw["prefill_graphs"] = False
    result = api.serve(**kw)
    click.echo(f"run written to {result['run_path']}")
    from roofline.views import serve_summary_lines

    for line in serve_summary_lines(result, kw["out_dir"]):
        click.echo(line)


# ---- static batching: waste, simulate, choose (roofline.batching, roofline.serving, roofline.choice) ----
CARD_MODEL_TIMING = ("calibration", "no_calibration", "engine", "weight_dtype", "kv_dtype")


@main.command()
@options("mix", "requests")
@click.option("--batch", type=int, help="Static batch size; requests are cut into consecutive batches of it (default: one batch).")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request (with --mix).")
@options("card_optional", "model_optional", *CARD_MODEL_TIMING, "return_policy", "fmt")
@domain_errors
def waste(fmt, mix, requests, batch, prompt_tokens, card, model, return_policy, **kw):
    """Static batching's wasted slots for a length mix; with --card/--model, the slowdown.

    Example: roofline waste --mix 8x32,8x256 --card rtx3060 --model qwen2.5-1.5b
    """
    from roofline import api
    from roofline.batching_views import waste_view

    sc = scenario_kwargs(kw)
    if card is None and model is None:
        timing = {k: v for k, v in sc.items() if v != OPTIONS_DEFAULTS.get(k)}
        if timing:
            raise RooflineError(f"{', '.join(FLAGS.get(k, k) for k in timing)}: give --card and --model for timings")
        sc = {}
    elif card is None or model is None:
        raise RooflineError("give both --card and --model for timings, or neither for the token accounting alone")
    result = api.waste(mix, requests, batch=batch, prompt_tokens=prompt_tokens, card=card, model=model,
                       return_policy=return_policy, **sc)
    click.echo(waste_view(result, fmt))


#: What scenario_kwargs gives when no timing option was set (waste without a card or model).
OPTIONS_DEFAULTS = {"calibration": "auto", "engine": None, "weight_dtype": "bf16", "kv_dtype": "bf16"}


@main.command()
@options("requests")
@click.option("--mix", help="Instead of --requests: length classes COUNTxGEN, repeated up to --count requests.")
@click.option("--count", type=int, help="With --mix: how many requests (default: the mix once).")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request (with --mix).")
@options("card", "model", *CARD_MODEL_TIMING)
@click.option("--batch", required=True, type=int, help="Slots: the most sequences the server holds at once.")
@click.option("--arrival-rate", type=float, help="Poisson arrivals at this many requests/s (replaces the file's arrival_s).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the Poisson arrivals.")
@options(*SERVER_OPTIONS, "slo_ttft_s", "slo_tpot_s", "return_policy")
@click.option("--pass-time-spread", "pass_time_spread", type=float,
              help="Also serve the stream with every pass's GPU time this fraction faster and slower (0.03: "
                   "+-3%) and report the continuous server's range of each percentile: how fragile a tail is "
                   "near saturation (table and JSON; triples the continuous server's work).")
@options("fmt")
@domain_errors
def simulate(fmt, **kw):
    """Serve one request stream by static and by continuous batching; compare.

    --batch is the static batch and the continuous server's most running sequences; the continuous
    server's KV pool comes from the card's memory (or --kv-capacity-tokens), admits by free blocks
    and preempts by recompute (docs/serving.md).

    Example: roofline simulate --mix 8x32,8x256 --count 2000 --card rtx3060 --model qwen2.5-1.5b --batch 16
    """
    from roofline import api
    from roofline.batching_views import simulate_view

    sc = scenario_kwargs(kw)
    server = server_kwargs(kw)
    click.echo(simulate_view(api.simulate(**sc, **server, **kw), fmt))


@main.command("choose-server")
@click.option("--card", "cards", multiple=True, required=True,
              help=CARD_HELP + " Repeat to compare cards: the best serves the most requests/s per GPU.")
@options("model", *CARD_MODEL_TIMING, "routing_skew")
@click.option("--tp", "tp", default="1", show_default=True,
              help="Tensor-parallel degree, or several (1,2,4) to compare per GPU.")
@click.option("--batch", "batch", default="64", show_default=True,
              help="The server's most running sequences (max_num_seqs), or several (64,128,256) to compare.")
@options("requests")
@click.option("--mix", help="Instead of --requests: length classes COUNTxGEN, repeated up to --count requests.")
@click.option("--count", type=int, help="With --mix: how many requests (default 1,000).")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request (with --mix).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the Poisson arrivals (the same at every rate).")
@options(*SERVER_OPTIONS, "slo_ttft_s", "slo_tpot_s")
@click.option("--slo-percentile", default=99, show_default=True, type=int,
              help="Which percentile of TTFT and TPOT must meet the SLOs.")
@click.option("--rates", help="Arrival rates to sweep, req/s (e.g. 5,10,20); default: a grid up to the capacity, refined.")
@click.option("--pass-time-spread", "pass_time_spread", type=float,
              help="Also sweep the best candidate with every pass's GPU time this fraction slower and faster (0.03: "
                   "+-3%) and print its answer there: how far a GPU a few percent off its price moves the rate "
                   "(table and JSON meta; triples the best candidate's work; not with --rates; the sweep bisects "
                   "to 1%, so under ~0.02 it reads mostly that step).")
@click.option("--chart", type=click.Path(dir_okay=False),
              help="Also write latency percentiles vs arrival rate, with the SLO and the chosen rate, to this HTML file "
                   "(self-contained, opens offline).")
@options("fmt")
@domain_errors
def choose_server(fmt, cards, tp, batch, rates, **kw):
    """The highest arrival rate a continuous server meets latency SLOs at; with several cards, TP
    degrees or --batch limits, the best per GPU.

    Example: roofline choose-server --card h200 --model qwen2.5-7b --engine graph --mix 4x64,1x512 --slo-ttft 500ms --slo-tpot 30ms
    """
    from roofline import api
    from roofline.batching_views import choose_server_view

    sc = scenario_kwargs(kw)
    sc.pop("card", None)
    server = server_kwargs(kw)
    tp_list, batch_list = parse_ints(tp, "tp"), parse_ints(batch, "batch")
    rate_list = None
    if rates is not None:
        try:
            rate_list = [float(x) for x in rates.split(",") if x.strip()]
        except ValueError:
            raise RooflineError(f"give numbers separated by commas, not {rates!r}", "rates") from None
    result = api.choose_server(list(cards), tp=tp_list if len(tp_list) > 1 else tp_list[0],
                               batch=batch_list if len(batch_list) > 1 else batch_list[0], rates=rate_list,
                               **sc, **server, **kw)
    click.echo(choose_server_view(result, fmt))
    if result.meta.get("chart"):
        click.echo(f"wrote {result.meta['chart']}", err=True)


@main.command()
@options(*(o for o in SCENARIO_OPTIONS if o != "tp"))
@click.option("--tp", "tp", default="1", show_default=True,
              help="Tensor-parallel degree, or several (1,2,4,8) to choose among: the one with the fewest "
                   "GPU-seconds per token.")
@click.option("--ttft-max", "ttft_max_s", type=Duration(), help="Largest acceptable TTFT: 500ms, 0.5s or 0.5 (s).")
@click.option("--tpot-max", "tpot_max_s", type=Duration(bare_max_s=1.0),
              help="Largest acceptable TPOT: 50ms, 0.05s or 0.05 (s).")
@click.option("--min-user-tok-s", "min_user_tok_s", type=float, help="Smallest acceptable speed per user, tok/s.")
@click.option("--memory-headroom", "memory_headroom", type=float, default=0.0, show_default=True,
              help="Fraction of the card's memory to leave free (0.1 keeps 10% free), as engines reserve "
                   "(vLLM's --gpu-memory-utilization 0.9).")
@click.option("--max-batch", default=4096, show_default=True, type=int, help="Largest batch to consider.")
@options("fmt")
@domain_errors
def choose(fmt, ttft_max_s, tpot_max_s, min_user_tok_s, max_batch, memory_headroom, **kw):
    """The largest batch meeting latency limits and fitting in memory, and what binds.

    Example: roofline choose --card rtx3060 --model qwen2.5-1.5b --ttft-max 0.5
    """
    from roofline import api
    from roofline.batching_views import choose_view

    sc = scenario_kwargs(kw)
    degrees = parse_ints(sc.pop("tp"), "tp")
    if not degrees:
        raise RooflineError("give a tensor-parallel degree, or several: 1,2,4,8", "tp")
    sc["tp"] = degrees if len(degrees) > 1 else degrees[0]
    result = api.choose(ttft_max_s=ttft_max_s, tpot_max_s=tpot_max_s, min_user_tok_s=min_user_tok_s,
                        max_batch=max_batch, memory_headroom=memory_headroom, **sc)
    click.echo(choose_view(result, fmt))


@main.command()
@click.option("--card", "cards", multiple=True, help="Card selected when the page opens; repeat to draw others for comparison (default rtx3060). The page offers every card.")
@click.option("--model", "models", multiple=True, help="Model selected when the page opens; repeat to compare (default qwen2.5-1.5b). The page offers every catalog model.")
@options("prompt_tokens", "gen_tokens")
@click.option("--calibration", type=click.Path(dir_okay=False), help="A fitted calibration JSON for the --card cards (default: each card's shipped one, if any).")
@click.option("--no-calibration", is_flag=True, help="The pure roofline for the --card cards.")
@options("engine", "kv_cache", "weight_dtype", "kv_dtype", "tp", "routing_skew")
@click.option("--measurements", multiple=True, type=click.Path(dir_okay=False), help="Measurement CSV whose points to overlay; repeat for several.")
@click.option("--mix", default="8x32,8x256", show_default=True, help="Length mix COUNTxGEN for the static-batching panels.")
@click.option("--batch", default=16, show_default=True, type=int, help="Static batch size, and the slots of both servers.")
@click.option("--count", type=int, help="Requests in the static-vs-continuous stream (default: the mix four times).")
@options("return_policy")
@click.option("--ttft-max", "ttft_max_s", default="0.5s", show_default=True, type=Duration(), help="TTFT limit (500ms, 0.5s): the line and the chosen batch.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--png-dir", type=click.Path(file_okay=False), help="Also write a PNG of each chart here (needs chromium).")
@domain_errors
def chart(cards, models, output, **kw):
    """Write one self-contained HTML page of charts with what-if controls (works offline).

    Example: roofline chart --card rtx3060 --model qwen2.5-1.5b -o roofline.html
    """
    from roofline import api

    sc = scenario_kwargs(kw)
    result = api.chart(output, cards or ("rtx3060",), models or ("qwen2.5-1.5b",), **sc, **kw)
    click.echo(
        f"wrote {result['path']} ({result['bytes'] / 1e6:.1f} MB): {result['selected'][1]} on {result['selected'][0]} "
        f"selected, {result['cards']} cards x {result['models']} models offered"
        + (f", {result['measured_points']} measured points" if result["measured_points"] else "")
    )
    for png in result["pngs"]:
        click.echo(f"wrote {png}")


if __name__ == "__main__":  # pragma: no cover
    main()
