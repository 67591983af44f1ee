"""Rebuild the shipped H200 calibrations from the committed measurements (no GPU needed).

    .venv/bin/python benchmarks/make_calibrations.py

Each calibration is fitted only on what its issue allows and says so in ``fitted_on``:
* h200-graph.json: the decode, prefill and memory terms on the default grid (prompts 128-16384,
  batches 1-1024 until out of memory) of qwen2.5-1.5b, qwen2.5-7b and llama-3.1-8b, with the
  attention probe's timings of the engine's decode attention alone (calibrate.probes), the layers
  probe's whole decode steps of the same three models cut to 2-12 layers (the step's own fixed
  time against each layer's), the prefill-attention probe's FLOP rate by head width (stored as
  measured: a prompt's attention is priced at it), the prefill-kernels probe's cost per element of each
  kind a prefill layer's non-matmul kernels touch (generic shapes; stored as measured) and the TP2
  link as measured (the collectives file); then the mixture-of-experts terms on ONE MoE model,
  qwen3-30b-a3b, the dense terms held (issue 11), with the MoE probe's cost of its routed rows'
  gather and combine (measured at qwen3-30b-a3b's shape only) held as measured, and the index probe's
  small-index kernels (generic widths) held as measured. The graph engine's facts come from its profile
  (hardware_profiles/engines/graph.json).
* h200-hf-eager.json: hf-eager (cuDNN attention off) on the same three models over prompts
  128-8192.
* rtx3060-hf-eager.json: the lesson's own table (qwen2.5-1.5b, prompt 128 / gen 128, batches
  1-128; ../shared/spec/static-batching-lesson.md), which it must reproduce.
Every other model and context of the H200 measurement files is held out (docs/calibration.md); the
graph calibration's errors on them are stored in its ``fit_report["validation"]`` (dense, MoE, TP2):
the expected error ``roofline predict`` shows for answers of each kind (roofline.confidence).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
M = ROOT / "hardware_profiles" / "measurements"
C = ROOT / "hardware_profiles" / "calibrations"
GRID_MODELS = ("qwen2.5-1.5b", "qwen2.5-7b", "llama-3.1-8b")
MOE_FIT_MODEL = "qwen3-30b-a3b"


def main() -> None:
    from roofline import api
    from roofline.calibration import save_calibration
    from roofline.fitting import validation_entry
    from roofline.hardware import load_card
    from roofline.measurements import read_measurements, write_measurements

    ceilings = M / "h200-ceilings-grid.json"
    dense = api.fit(
        [M / "h200-graph-grid.csv"], card="h200", ceilings=ceilings, models=GRID_MODELS,
        attention_probe=[M / "h200-probe-attention.json", M / "h200-probe-attention-groups.json"],
        collectives=M / "h200-collectives-tp2.json",
        layers_probe=M / "h200-probe-layers.json", prefill_attention_probe=M / "h200-probe-prefill-attention.json",
        masked_attention_probe=M / "h200-probe-masked-attention.json",
        prefill_kernels_probe=[M / "h200-probe-prefill-kernels.json", M / "h200-probe-prefill-kernels-mla.json"],
        layer_features_probe=[M / "h200-probe-layer-features.json", M / "h200-probe-layer-features-2.json"]
        + [M / f"h200-probe-layer-features-call80-{run}.json" for run in ("520a", "2048b", "4104c", "520d")],
        attention_contexts_probe=M / "h200-probe-attention-contexts.json",
        sustained_matmul_probe=M / "h200-probe-sustained-matmul.json",
        attention_stream_probe=[M / f"h200-probe-attention{kind}.json"
                                for kind in ("", "-groups", "-widths", "-batches", "-contexts")],
        softmax_probe=[M / "h200-probe-attention.json", M / "h200-probe-attention-widths.json"],
        attention_table_probe=M / "h200-probe-attention-table-call68.json",
        label="graph engine on the lent H200, 2026-11-30: default grid (prompts 128-16384, batches 1-1024 until "
              "out of memory) of qwen2.5-1.5b, qwen2.5-7b, llama-3.1-8b; attention probe and attention-groups probe (generic shapes of 1-64 query heads a KV head); layers probe (the "
              "same three models' decode step cut to 2-12 layers); prefill-attention probe (its FLOP rate by head width); masked-attention probe (the windowed and sinks prefill's masked path, by head width); prefill-kernels probe (each kind of element a prefill layer's non-matmul kernels touch, at generic shapes); layer-features probe (the decode step's fixed time per layer of a feature's own kernels: q/k norms, MLA's decode, shared experts, gpt-oss's MoE layer, each switched on at a fitted model's shape; six runs: two at 2,048 positions, device call 80's at 520 (two), 2,048 and 4,104); attention-contexts probe (the decode attention alone over cache lengths around the powers of two: the windows where cuBLAS runs a slower kernel); the softmax alone at few rows in the attention and attention-widths probes (its warp kernel's time per position of a row); sustained-matmul probe (the matmul rate against time under load: the clock's fall from its boost); the decode attention's cost per KV byte and per score element from the five attention probes' shapes of 64+ sequences over 1,024+ positions, and its fill-and-drain time beyond that price from all their points (held); attention-table probe (device call 68: the decode attention alone at ten head shapes x 1-16,384 batched matrices x cache lengths: its measured time over that price, held); TP2 link",
    )
    with tempfile.TemporaryDirectory() as tmp:
        moe_rows = [r for r in read_measurements(M / "h200-graph-moe.csv") if r.model == MOE_FIT_MODEL]
        moe_csv = write_measurements(Path(tmp) / f"moe-{MOE_FIT_MODEL}.csv", moe_rows)
        graph = api.fit([moe_csv], card="h200", base=dense, moe_probe=M / "h200-probe-moe.json",
                        grouped_mm_probe=[M / "h200-probe-grouped-mm-call72.json"],
                        index_probe=[M / "h200-probe-index-call77.json"],
                        label=f"h200-graph-moe.csv rows of {MOE_FIT_MODEL} (the one MoE model fitted on); MoE probe "
                              f"(its routed rows' gather and combine and its grouped GEMMs' rate, at {MOE_FIT_MODEL}'s shape only; "
                              f"the clamped activation's extra cost over silu's, for gpt-oss); grouped-mm probe (device "
                              f"call 72: torch._grouped_mm alone at generic shapes, 1-256 experts x 1-4,096 rows an "
                              f"expert x K 512-16,384 x N 1,024-32,768 on the 1.5x ladder: the experts' matmuls priced "
                              f"from it); index probe (device call 77: PyTorch's index_select and index_add_ alone with the "
                              f"engine's index patterns, 1-64 rows at widths 1,024-8,192 and 1-8 rows a token: a pass of at "
                              f"most 16 routed rows pays its small-index kernels)")
    card = load_card("h200")
    heldout, moe, tp2 = (M / "h200-graph-heldout.csv", M / "h200-graph-moe.csv", M / "h200-graph-tp2.csv")
    moe19 = M / "h200-graph-moe-call19.csv"
    # held out since: other architectures (call 20), phi-3-mini-4k and gpt-oss-20b again after the
    # engine's cache alignment (call 22, which replaces their rows of calls 5, 19 and 20: those ran
    # GEMV fallback kernels the engine no longer runs), unaligned prompt + gen lengths (call 23)
    arch20, again22, unaligned23 = (M / "h200-graph-dense-call20.csv", M / "h200-graph-call22.csv",
                                    M / "h200-graph-unaligned-call23.csv")
    check25 = M / "h200-graph-check-call25.csv"  # after this session's model changes, unseen by them
    check26 = (M / "h200-graph-check-call26.csv", M / "h200-graph-check-call26-llama2.csv")  # and more after
    # after the seventh session's prefill elementwise kinds were committed (call 29), unseen by them
    check29, moe29 = M / "h200-graph-check-call29.csv", M / "h200-graph-moe-check-call29.csv"
    # after the MoE grouped-GEMM rate and MLA's decompressed prompt pairs were committed (call 32)
    check32, moe32 = M / "h200-graph-check-call32.csv", M / "h200-graph-moe-check-call32.csv"
    moe34 = M / "h200-graph-moe-check-call34.csv"  # and after the expert biases were priced (call 34)
    # after the decode-layer features were committed (call 40: q/k-norm models at 1,024 and 3,072; MLA, gpt-oss)
    check40, moe40 = M / "h200-graph-check-call40.csv", M / "h200-graph-moe-check-call40.csv"
    check43 = M / "h200-graph-check-call43.csv"  # after the attention-contexts windows (call 43: 640 and 1,056 positions)
    check44 = M / "h200-graph-check-call44.csv"  # and 640, 1,088, 1,128 positions (call 44)
    check45 = M / "h200-graph-check-call45.csv"  # and after the per-width factors (call 45)
    # catalog models no H200 run had measured (call 47: gpt-neox-20b, falcon-40b, llama-2-70b), before
    # the load curve (its TTFT misses led to the sustained-matmul probe: those rows are not unseen by it)
    check47 = M / "h200-graph-check-call47.csv"
    check50 = M / "h200-graph-check-call50.csv"  # after the load curve was committed (call 50)
    check54 = M / "h200-graph-check-call54.csv"  # large decode batches at prompts 512 and 2,048 (call 54)
    check56 = M / "h200-graph-check-call56.csv"  # and on eight more models (call 56)
    check57 = M / "h200-graph-check-call57.csv"  # and five more, after the decode logits buffers (call 57)
    check58 = M / "h200-graph-check-call58.csv"  # and eight at 8,192-16,384 after the stream terms (call 58)
    check59 = M / "h200-graph-check-call59.csv"  # and nine at 1,952 and 12,320 after the softmax's kernels (call 59)
    check60 = M / "h200-graph-check-call60.csv"  # and five at 1,792 and 10,624, unseen by the softmax's warp floor (call 60)
    check62 = M / "h200-graph-check-call62.csv"  # and ten at 384, 2,624 and 6,040, after the attention's ramp (call 62)
    check65 = M / "h200-graph-check-call65.csv"  # and eight at 832-3,072 after the attention's kernel table (call 65)
    check66 = M / "h200-graph-check-call66.csv"  # and ten of plain-MLP models and two beside them at 700-6,000 (call 66)
    check67 = M / "h200-graph-check-call67.csv"  # and four of falcon-7b and -40b across 632-640 and 1,024 positions (call 67)
    check69 = M / "h200-graph-check-call69.csv"  # and four at 5,032 and 14,032 after the table's few matrices (call 69)
    # the 128/128 held-out runs (calls 4 and 17: four small models, batches 1-1,024): the steps most
    # fixed overhead, where the error by overhead share (roofline.confidence) is measured
    # and six more models at 128/128 after the attention's ramp (call 63)
    short = (M / "h200-graph-128-call4.csv", M / "h200-graph-128-call17.csv", M / "h200-graph-128-call63.csv")
    moe51 = M / "h200-graph-moe-check-call51.csv"  # and the mixtures of experts at 1,536 and 12,288 (call 51)
    moe52 = M / "h200-graph-moe-check-call52.csv"  # and at batches of 32-192 routed rows an expert (call 52)
    moe53 = M / "h200-graph-moe-check-call53.csv"  # and after the grouped GEMM's tiles were committed (call 53)
    # the graph engine's routing made uniform (call 74): gpt-oss-20b at its eleven held-out prompts again
    # (its random router had touched 77-99% of the uniform count of experts after a timed prefill),
    # mixtral-8x7b and deepseek-v2-lite at 1,024 and 4,096 beside call 32's; its rows replace the
    # earlier files' at the same model, prompt, gen and batch
    moe74 = M / "h200-graph-moe-check-call74.csv"
    routed74 = {(r.model, r.prompt_tokens, r.gen_tokens, r.batch) for r in read_measurements(moe74)}
    # and three MoE models at 640, 2,560 and 10,240 + 16 at the batches of 2-64 routed rows, measured with the
    # index probe (call 76) and not looked at until its small-index term was committed (qwen3-30b-a3b's rows
    # in it are the fitted model's: left out, as every fitted model's)
    moe76 = M / "h200-graph-moe-check-call76.csv"
    # after the layer-features fit read six runs and the sink joined the softmax's row (call 81: 896, 3,584 and
    # 14,336 + 16, lengths none of these models had run at)
    check81, moe81 = M / "h200-graph-check-call81.csv", M / "h200-graph-moe-check-call81.csv"
    # the TTFT points whose last prefill chunk had run cold (its first forward at that shape: cuDNN's
    # attention plan, 60-85 ms), measured again after the engine's warm-up took every chunk shape (call 84):
    # its rows replace the earlier files' at the same model, prompt, gen and batch
    check84 = M / "h200-graph-check-call84.csv"
    again84 = {(r.model, r.prompt_tokens, r.gen_tokens, r.batch) for r in read_measurements(check84)}

    def not_in_74(rows):
        return [r for r in rows if (r.model, r.prompt_tokens, r.gen_tokens, r.batch) not in routed74]

    again = {r.model for r in read_measurements(again22)}
    fresh = [r for r in read_measurements(again22) if r.model == "phi-3-mini-4k"]
    validation = {
        "dense": validation_entry(
            graph, read_measurements(check84) + [r for r in (
            read_measurements(heldout) + [r for r in read_measurements(arch20) if r.model not in again]
            + fresh + read_measurements(unaligned23) + [r for r in read_measurements(check25) if r.model != "gpt-oss-20b"]
            + [r for f in check26 for r in read_measurements(f)] + read_measurements(check29)
            + read_measurements(check32) + read_measurements(check40) + read_measurements(check43)
            + read_measurements(check44) + read_measurements(check45) + read_measurements(check47)
            + read_measurements(check50) + read_measurements(check54) + read_measurements(check56)
            + read_measurements(check57) + read_measurements(check58) + read_measurements(check59)
            + read_measurements(check60) + read_measurements(check62) + read_measurements(check65) + read_measurements(check66)
            + read_measurements(check67) + read_measurements(check69) + read_measurements(check81)
            + [r for f in short for r in read_measurements(f)])
            if (r.model, r.prompt_tokens, r.gen_tokens, r.batch) not in again84],
            card, "dense models at prompts 128-16384 (other architectures and unaligned lengths too)",
            [check84.name, heldout.name, arch20.name, again22.name, unaligned23.name, check25.name]
            + [f.name for f in check26]
            + [check29.name, check32.name, check40.name, check43.name, check44.name, check45.name, check47.name, check50.name,
               check54.name, check56.name, check57.name, check58.name, check59.name, check60.name, check62.name, check65.name, check66.name,
               check67.name, check69.name, check81.name]
            + [f.name for f in short]),
        "moe": validation_entry(
            graph, read_measurements(moe74) + read_measurements(moe76) + read_measurements(moe81) + not_in_74(
                [r for r in read_measurements(moe) if r.model not in again]
                + [r for r in read_measurements(moe19) if r.model not in again]
                + [r for r in read_measurements(again22) + read_measurements(check25) if r.model == "gpt-oss-20b"]
                + read_measurements(moe29) + read_measurements(moe32) + read_measurements(moe34)
                + read_measurements(moe40) + read_measurements(moe51) + read_measurements(moe52)
                + read_measurements(moe53)), card,
            "mixture-of-experts models and contexts the MoE terms were not fitted on (call 74's rows first: "
            "they replace the earlier files' at the same model, prompt, gen and batch)",
            [moe74.name, moe76.name, moe81.name, moe.name, moe19.name, again22.name, check25.name, moe29.name, moe32.name, moe34.name, moe40.name,
             moe51.name, moe52.name, moe53.name]),
        "tp": validation_entry(graph, read_measurements(tp2), card, "tensor parallel over 2 GPUs", [tp2.name]),
    }
    graph = graph.model_copy(update={"fit_report": {**graph.fit_report, "validation": validation}})
    save_calibration(graph, C / "h200-graph.json")
    print(f"wrote {C / 'h200-graph.json'}: fitted on {', '.join(graph.fitted_on)}")
    eager = api.fit(
        [M / "h200-hf-eager-grid.csv"], card="h200", ceilings=ceilings, models=GRID_MODELS,
        output=C / "h200-hf-eager.json",
        label="hf-eager (transformers eager, dynamic cache, cuDNN SDPA off) on the lent H200, 2026-11-30: prompts "
              "128, 2048, 8192 x batches 1-256 of qwen2.5-1.5b, qwen2.5-7b, llama-3.1-8b",
    )
    print(f"wrote {C / 'h200-hf-eager.json'}: fitted on {', '.join(eager.fitted_on)}")
    lesson = api.fit([M / "rtx3060-hf-eager-lesson.csv"], card="rtx3060", output=C / "rtx3060-hf-eager.json",
                     label="fitted to the static-batching lesson's own section-2 table (HF eager, RTX 3060)")
    print(f"wrote {C / 'rtx3060-hf-eager.json'}: fitted on {', '.join(lesson.fitted_on)}")


if __name__ == "__main__":
    main()
