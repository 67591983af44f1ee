"""The `roofline` command: parse, call one library function, format. No formulas here."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from roofline.errors import RooflineError

FORMATS = ("table", "json", "csv")


def output_format(f):
    """The shared --format option."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for people; json and csv carry raw base-unit numbers (s, bytes, FLOP).",
    )(f)


def domain_errors(f):
    """Turn RooflineError into a one-line message and exit code 1."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except RooflineError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def parse_batches(text: str) -> list[int]:
    """'1,2,4' | '1-64' (every integer) | '1..1024' (powers of two) | a mix of these."""
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
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(item))
        except ValueError:
            raise RooflineError(
                f"bad batch list item {item!r}: use numbers, ranges like 1-64, or powers of two like 1..1024"
            ) from None
    if any(b <= 0 for b in out):
        raise RooflineError(f"batch sizes must be at least 1, not {min(out)}")
    return sorted(set(out))


def scenario_options(f):
    """Options shared by the commands that evaluate one card + model."""
    opts = [
        click.option("--card", required=True, help="Card id or alias (see `roofline cards`) or a profile JSON file."),
        click.option(
            "--model",
            required=True,
            help="Catalog name (see `roofline models`), HF repo id of a catalog model, config.json path or model folder.",
        ),
        click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request."),
        click.option("--gen", "gen_tokens", default=128, show_default=True, type=int, help="Generated tokens per request."),
        click.option(
            "--calibration",
            "calibration_path",
            type=click.Path(dir_okay=False),
            help="A fitted calibration JSON (default: the one shipped for --card and --engine, if any).",
        ),
        click.option("--no-calibration", is_flag=True, help="Predict from the card's ceilings alone (pure roofline)."),
        click.option("--engine", default="hf-eager", show_default=True, help="Engine whose shipped calibration to use."),
        click.option(
            "--kv-cache",
            type=click.Choice(["dynamic", "static"]),
            help="dynamic: a step reads the tokens so far (HF default); static: the whole preallocated cache. "
            "Default: the calibration's.",
        ),
        click.option("--weight-dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"])),
        click.option("--kv-dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"])),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _calibration_arg(calibration_path, no_calibration):
    if calibration_path and no_calibration:
        raise RooflineError("give either --calibration or --no-calibration, not both")
    if no_calibration:
        return None
    return calibration_path or "auto"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roofline")
def main():
    """How LLM decoding behaves on a GPU: TTFT, TPOT, throughput and memory at every batch,
    where decode bends, what static batching wastes, and which batch to run.

    Example: roofline predict --card rtx3060 --model qwen2.5-1.5b
    """


@main.command()
@scenario_options
@click.option(
    "--batches",
    default="1..128",
    show_default=True,
    help="Batch sizes: 1,2,4 | 1-64 (every integer) | 1..1024 (powers of two).",
)
@click.option("--logits", type=click.Choice(["last", "all"]), default="last", show_default=True, help="Logits kept at prefill: the last position (logits_to_keep=1) or every position.")
@output_format
@domain_errors
def predict(card, model, prompt_tokens, gen_tokens, calibration_path, no_calibration, engine, kv_cache, weight_dtype, kv_dtype, batches, logits, fmt):
    """Predict TTFT, TPOT, throughput and peak memory for every batch size.

    Example: roofline predict --card rtx3060 --model qwen2.5-1.5b --prompt 128 --gen 128
    """
    from roofline import api
    from roofline.views import predict_view

    prediction = api.predict(
        card, model, parse_batches(batches), prompt_tokens, gen_tokens,
        _calibration_arg(calibration_path, no_calibration), engine, kv_cache, weight_dtype, kv_dtype, logits,
    )
    click.echo(predict_view(prediction, fmt))


@main.command()
@scenario_options
@output_format
@domain_errors
def bend(card, model, prompt_tokens, gen_tokens, calibration_path, no_calibration, engine, kv_cache, weight_dtype, kv_dtype, fmt):
    """Which batch bends: where intensity reaches the balance point, and the TPOT knee.

    Example: roofline bend --card rtx3060 --model qwen2.5-1.5b
    """
    from roofline import api
    from roofline.views import bend_view

    result = api.bend(
        card, model, prompt_tokens, gen_tokens, _calibration_arg(calibration_path, no_calibration),
        engine, kv_cache, weight_dtype, kv_dtype,
    )
    click.echo(bend_view(result, fmt))


@main.command()
@output_format
@domain_errors
def models(fmt):
    """List the catalog models: parameters, weight bytes, KV bytes per token.

    Example: roofline models --format json
    """
    from roofline.views import models_view

    click.echo(models_view(fmt))


@main.command()
@output_format
@domain_errors
def cards(fmt):
    """List the card profiles: memory, bandwidth and bf16 ceilings, balance point.

    Example: roofline cards
    """
    from roofline.views import cards_view

    click.echo(cards_view(fmt))


@main.command()
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--card", required=True, help="The card the measurements were taken on.")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="Where to write the calibration JSON.")
@click.option("--ceilings", type=click.Path(dir_okay=False), help="Ceilings JSON measured with the runs (replaces the profile's).")
@click.option("--label", help="Where the measurements come from, stored in the calibration and shown by predict.")
@click.option("--model", "models_", multiple=True, help="Fit only these models' rows (repeat; default: all).")
@click.option(
    "--tpot-statistic",
    type=click.Choice(["mean", "median", "p10"]),
    default="mean",
    show_default=True,
    help="Which statistic of the measured decode steps to fit (median/p10 resist a noisy host).",
)
@output_format
@domain_errors
def fit(measurements, card, output, ceilings, label, models_, tpot_statistic, fmt):
    """Fit a calibration (overheads, efficiencies) to measurement CSVs; no GPU needed.

    Example: roofline fit hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv --card rtx3060 -o cal.json
    """
    from roofline.views import fit_command

    click.echo(fit_command(measurements, card, output, ceilings, fmt, label, tpot_statistic, models_))


@main.command()
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--calibration", "calibration_path", required=True, type=click.Path(dir_okay=False), help="A calibration JSON.")
@click.option("--card", help="Card profile to use (default: the calibration's card).")
@click.option(
    "--tpot-statistic",
    type=click.Choice(["mean", "median", "p10"]),
    help="Which measured decode-step statistic to compare with (default: the calibration's).",
)
@click.option("--min-batch", default=1, show_default=True, type=click.IntRange(min=1), help="Compare only rows of this batch or more.")
@click.option("--model", "models_", multiple=True, help="Compare only these models' rows (repeat; default: all).")
@output_format
@domain_errors
def compare(measurements, calibration_path, card, tpot_statistic, min_batch, models_, fmt):
    """Predicted vs measured, row by row, with the MAPE of TPOT, TTFT and peak memory.

    Example: roofline compare --calibration hardware_profiles/calibrations/rtx3060-hf-eager.json hardware_profiles/measurements/rtx3060-hf-eager-lesson.csv
    """
    from roofline.views import compare_command

    click.echo(compare_command(measurements, calibration_path, card, fmt, tpot_statistic, min_batch, models_))


@main.command()
@click.option("--card", required=True, help="Card id the run is recorded under (e.g. h200).")
@click.option("--model", "models_", multiple=True, required=True, help="Model to sweep; repeat for several.")
@click.option("--engine", type=click.Choice(["hf-eager", "graph"]), default="hf-eager", show_default=True)
@click.option("--batches", default="1..1024", show_default=True, help="Batch sizes, as for predict.")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int)
@click.option("--gen", "gen_tokens", default=128, show_default=True, type=int)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder for measurements, ceilings and the calibration.")
@click.option("--device", default="cuda", show_default=True, help="cuda, or cpu (with a tiny model) to test the path.")
@click.option("--resume", is_flag=True, help="Keep the points already in the folder's CSV and measure the rest.")
@click.option("--no-fit", is_flag=True, help="Measure only.")
@click.option(
    "--no-cudnn-attention",
    is_flag=True,
    help="Disable PyTorch's cuDNN SDPA backend (on Hopper it rebuilds plans per KV length; see docs/calibration.md).",
)
@domain_errors
def calibrate(card, models_, engine, batches, prompt_tokens, gen_tokens, out_dir, device, resume, no_fit, no_cudnn_attention):
    """Measure real bf16 decode on this machine's GPU, then fit a calibration.

    Example: roofline calibrate --card h200 --model qwen2.5-1.5b --model qwen2.5-7b --engine graph --out runs/h200
    """
    from roofline.views import calibrate_command

    click.echo(
        calibrate_command(
            card, list(models_), engine, parse_batches(batches), prompt_tokens, gen_tokens, Path(out_dir),
            device, resume, no_fit, no_cudnn_attention,
        )
    )



# ---- static batching: waste, simulate, choose (roofline.batching, roofline.serving, roofline.choice) ----
STATIC_POLICIES = ("whole-batch", "early-return")


def card_model_options(required: bool):
    """--card/--model and what picks the cost model, for commands that take no --gen."""

    def decorate(f):
        opts = [
            click.option("--card", required=required, help="Card id or alias (see `roofline cards`) or a profile JSON file."),
            click.option("--model", required=required, help="Catalog name (see `roofline models`), HF repo id, config.json path or model folder."),
            click.option("--calibration", "calibration_path", type=click.Path(dir_okay=False), help="A fitted calibration JSON (default: the shipped one for --card and --engine, if any)."),
            click.option("--no-calibration", is_flag=True, help="Predict from the card's ceilings alone (pure roofline)."),
            click.option("--engine", default="hf-eager", show_default=True, help="Engine whose shipped calibration to use."),
            click.option("--weight-dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"])),
            click.option("--kv-dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"])),
        ]
        for opt in reversed(opts):
            f = opt(f)
        return f

    return decorate


@main.command()
@click.option("--mix", help="Length classes COUNTxGEN, e.g. 8x32,8x256 (interleaved round-robin).")
@click.option("--lengths", type=click.Path(dir_okay=False), help="Request file: CSV with a header or JSONL; prompt_tokens, gen_tokens, optional arrival_s.")
@click.option("--batch", type=int, help="Static batch size; requests are cut into consecutive batches of it (default: one batch).")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request (with --mix).")
@card_model_options(required=False)
@click.option("--policy", type=click.Choice(STATIC_POLICIES), default="whole-batch", show_default=True, help="whole-batch: results return when the batch ends; early-return: when each request ends.")
@output_format
@domain_errors
def waste(mix, lengths, batch, prompt_tokens, card, model, calibration_path, no_calibration, engine, weight_dtype, kv_dtype, policy, fmt):
    """Static batching's wasted slots for a length mix; with --card/--model, the slowdown.

    Example: roofline waste --mix 8x32,8x256 --card rtx3060 --model qwen2.5-1.5b
    """
    from roofline import api
    from roofline.batching_views import waste_view

    result = api.waste(
        mix, lengths, batch, prompt_tokens, card, model, policy,
        _calibration_arg(calibration_path, no_calibration), engine, weight_dtype, kv_dtype,
    )
    click.echo(waste_view(result, fmt))


@main.command()
@click.option("--requests", "requests_path", type=click.Path(dir_okay=False), help="Request file: CSV with a header or JSONL; prompt_tokens, gen_tokens, optional arrival_s.")
@click.option("--mix", help="Instead of --requests: length classes COUNTxGEN, repeated up to --count requests.")
@click.option("--count", type=int, help="With --mix: how many requests (default: the mix once).")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request (with --mix).")
@card_model_options(required=True)
@click.option("--batch", required=True, type=int, help="Slots: the most sequences the server holds at once.")
@click.option("--arrival-rate", type=float, help="Poisson arrivals at this many requests/s (replaces the file's arrival_s).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the Poisson arrivals.")
@click.option("--policy", type=click.Choice(STATIC_POLICIES), default="early-return", show_default=True, help="The static server's return policy.")
@output_format
@domain_errors
def simulate(requests_path, mix, count, prompt_tokens, card, model, calibration_path, no_calibration, engine, weight_dtype, kv_dtype, batch, arrival_rate, seed, policy, fmt):
    """Serve one request stream by static and by continuous batching; compare.

    Example: roofline simulate --mix 8x32,8x256 --count 2000 --card rtx3060 --model qwen2.5-1.5b --batch 16
    """
    from roofline import api
    from roofline.batching_views import simulate_view

    result = api.simulate(
        card, model, batch, requests_path, mix, count, prompt_tokens, arrival_rate, seed, policy,
        _calibration_arg(calibration_path, no_calibration), engine, weight_dtype, kv_dtype,
    )
    click.echo(simulate_view(result, fmt))


@main.command()
@scenario_options
@click.option("--ttft-max", "ttft_max_s", type=float, help="Largest acceptable TTFT, s.")
@click.option("--tpot-max", "tpot_max_s", type=float, help="Largest acceptable TPOT, s.")
@click.option("--min-user-tok-s", "min_user_tok_s", type=float, help="Smallest acceptable speed per user, tok/s.")
@click.option("--max-batch", default=4096, show_default=True, type=int, help="Largest batch to consider.")
@output_format
@domain_errors
def choose(card, model, prompt_tokens, gen_tokens, calibration_path, no_calibration, engine, kv_cache, weight_dtype, kv_dtype, ttft_max_s, tpot_max_s, min_user_tok_s, max_batch, fmt):
    """The largest batch meeting latency limits and fitting in memory, and what binds.

    Example: roofline choose --card rtx3060 --model qwen2.5-1.5b --ttft-max 0.5
    """
    from roofline import api
    from roofline.batching_views import choose_view

    result = api.choose(
        card, model, prompt_tokens, gen_tokens, ttft_max_s, tpot_max_s, min_user_tok_s, max_batch,
        _calibration_arg(calibration_path, no_calibration), engine, kv_cache, weight_dtype, kv_dtype,
    )
    click.echo(choose_view(result, fmt))


@main.command()
@click.option("--card", "cards", multiple=True, help="Card selected when the page opens; repeat to draw others for comparison (default rtx3060). The page offers every card.")
@click.option("--model", "models_", multiple=True, help="Model selected when the page opens; repeat to compare (default qwen2.5-1.5b). The page offers every catalog model.")
@click.option("--prompt", "prompt_tokens", default=128, show_default=True, type=int, help="Prompt tokens per request.")
@click.option("--gen", "gen_tokens", default=128, show_default=True, type=int, help="Generated tokens per request.")
@click.option("--calibration", "calibration_path", type=click.Path(dir_okay=False), help="A fitted calibration JSON for the --card cards (default: each card's shipped one, if any).")
@click.option("--no-calibration", is_flag=True, help="The pure roofline for the --card cards.")
@click.option("--engine", default="hf-eager", show_default=True, help="Engine whose shipped calibrations to use.")
@click.option("--kv-cache", type=click.Choice(["dynamic", "static"]), help="KV cache policy (default: the calibration's).")
@click.option("--weight-dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"]))
@click.option("--kv-dtype", default="bf16", show_default=True, type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"]))
@click.option("--measurements", multiple=True, type=click.Path(dir_okay=False), help="Measurement CSV whose points to overlay; repeat for several.")
@click.option("--mix", default="8x32,8x256", show_default=True, help="Length mix COUNTxGEN for the static-batching panels.")
@click.option("--batch", default=16, show_default=True, type=int, help="Static batch size, and the slots of both servers.")
@click.option("--count", type=int, help="Requests in the static-vs-continuous stream (default: the mix four times).")
@click.option("--policy", type=click.Choice(["whole-batch", "early-return"]), default="whole-batch", show_default=True, help="When the static server returns results.")
@click.option("--ttft-max", "ttft_max_s", default=0.5, show_default=True, type=float, help="TTFT limit, s: the line and the chosen batch.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--png-dir", type=click.Path(file_okay=False), help="Also write a PNG of each chart here (needs chromium).")
@domain_errors
def chart(cards, models_, prompt_tokens, gen_tokens, calibration_path, no_calibration, engine, kv_cache, weight_dtype, kv_dtype, measurements, mix, batch, count, policy, ttft_max_s, output, png_dir):
    """Write one self-contained HTML page of charts with what-if controls (works offline).

    Example: roofline chart --card rtx3060 --model qwen2.5-1.5b -o roofline.html
    """
    from roofline import api

    result = api.chart(
        output, cards or ("rtx3060",), models_ or ("qwen2.5-1.5b",), prompt_tokens, gen_tokens,
        _calibration_arg(calibration_path, no_calibration), engine, kv_cache, weight_dtype, kv_dtype,
        measurements, mix, batch, count, ttft_max_s, policy, png_dir,
    )
    click.echo(
        f"wrote {result['path']} ({result['bytes'] / 1e6:.1f} MB): {result['selected'][1]} on {result['selected'][0]} "
        f"selected, {result['cards']} cards x {result['models']} models offered"
        + (f", {result['measured_points']} measured points" if result["measured_points"] else "")
    )
    for png in result["pngs"]:
        click.echo(f"wrote {png}")


if __name__ == "__main__":  # pragma: no cover
    main()
