"""The decode attention's measured factor by batched matrices and cache length (Calibration.
attention_kernel_table; roofline.probes.attention_kernel_table; docs/method.md section 2.5): its
reading from a synthetic probe file (the launch-level time taken off, 1 where the price is small, a
skipped point at the shorter length's value), the step model's use of it (which entry a model takes,
the interpolation and its ends, the price's own steps by length never crossed, the windowed layers'
rings at their own length, MLA never, floats and arrays alike), the refusals, and that the shipped
H200 calibration holds what the shipped probe gives against its terms."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.calibration import Calibration, load_calibration
from roofline.errors import RooflineError
from roofline.fitting import _probe_attention_s, _probe_models
from roofline.hardware import load_card
from roofline.model_spec import load_model
from roofline.probes import KERNEL_TABLE_LAUNCH_PRICE_S, KERNEL_TABLE_MIN_PRICE_S, AttentionPoint, attention_kernel_table
from roofline.step import StepModel, decode_work, prefill_work

SHIPPED = "hardware_profiles/calibrations/h200-graph.json"
TABLE_PROBE = "hardware_profiles/measurements/h200-probe-attention-table-call68.json"


def _plain(cal):
    return cal.model_copy(update={"attention_kernel_table": None})


def _truth(kv_heads, matrices, context):
    """A known factor by (batched matrices, length): a pocket at 1,024 matrices x 1,984 positions."""
    return 1.6 if (matrices, context) == (1024, 1984) else 1.0 + 0.05 * np.log2(matrices / 64)


def _probe_file(tmp_path, cal, card, launch_s=8e-6, shape=(32, 8, 64), name="table.json", skip=(), everywhere=False):
    q, k, d = shape
    points = [AttentionPoint(f"g{q // k}-{d}", q, k, d, m // k, c, 0.0)
              for m in (8, 16, 64, 256, 1024, 4096) for c in (128, 256, 1920, 1984, 2048, 4096) if (m, c) not in skip]
    price = _probe_attention_s(card, cal, _probe_models(card, points), points)
    rows = [{"shape": p.shape, "q_heads": q, "kv_heads": k, "head_dim": d, "batch": p.batch,
             "context_tokens": p.context_tokens, "op": "graph_attention",
             "s": float(launch_s + s * (_truth(k, p.batch * k, p.context_tokens) if everywhere or s >= KERNEL_TABLE_MIN_PRICE_S else 1.0))}
            for p, s in zip(points, price)]
    path = tmp_path / name
    path.write_text(json.dumps({"probe": "attention-table", "points": rows}))
    return path, dict(zip([(p.batch * k, p.context_tokens) for p in points], price))


def test_a_known_table_is_read_back_from_a_probe_file(tmp_path):
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    path, price = _probe_file(tmp_path, cal, card, skip={(4096, 4096)})
    (entry,) = attention_kernel_table([path], cal, card)
    assert (entry["head_dim"], entry["group"]) == (64.0, 4.0)
    assert entry["matrices"] == [8.0, 16.0, 64.0, 256.0, 1024.0, 4096.0]
    assert entry["contexts"] == [128.0, 256.0, 1920.0, 1984.0, 2048.0, 4096.0]
    for i, m in enumerate(entry["matrices"]):
        for j, c in enumerate(entry["contexts"]):
            got = entry["factors"][i][j]
            if (m, c) == (4096, 4096):  # skipped: its row's value at the next shorter length
                assert got == entry["factors"][i][j - 1]
            elif price[(m, c)] < KERNEL_TABLE_MIN_PRICE_S:  # the launch-level time a large share: not read
                assert got == pytest.approx(1.0, abs=1e-4)  # (blended with the synthetic 1 from half of it)
            else:  # (measured - the median launch-level time) / price
                assert got == pytest.approx(_truth(8, m, c), rel=2e-3), (m, c)
    assert entry["factors"][4][3] == pytest.approx(1.6, rel=2e-3)  # the pocket


def test_a_factor_is_blended_with_1_by_its_price_under_the_full_reading(tmp_path):
    # a probe whose every point runs the known factor: read in full from KERNEL_TABLE_MIN_PRICE_S, 1 under
    # half of it, and in proportion between (a hard edge flips the points near it between the fit's rounds)
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    path, price = _probe_file(tmp_path, cal, card, everywhere=True)
    (entry,) = attention_kernel_table([path], cal, card)
    measured = {(r["batch"] * r["kv_heads"], r["context_tokens"]): r["s"] for r in json.loads(path.read_text())["points"]}
    # the launch-level time as read: the median beyond the price of the points priced under 10 us
    launch = float(np.median([measured[k] - p for k, p in price.items() if p < KERNEL_TABLE_LAUNCH_PRICE_S]))
    lo, hi = 0.5 * KERNEL_TABLE_MIN_PRICE_S, KERNEL_TABLE_MIN_PRICE_S
    seen = set()
    for i, m in enumerate(entry["matrices"]):
        for j, c in enumerate(entry["contexts"]):
            p, got = price[(m, c)], entry["factors"][i][j]
            weight = min(max((p - lo) / (hi - lo), 0.0), 1.0)
            read = (measured[(m, c)] - launch) / p
            assert got == pytest.approx(1.0 + weight * (max(read, 0.1) - 1.0), rel=2e-3, abs=2e-4), (m, c, p)
            seen.add("under" if p < lo else "full" if p >= hi else "between")
    assert seen == {"under", "between", "full"}, seen  # the grid has points in each band


def test_a_probe_without_small_points_is_refused(tmp_path):
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    rows = [{"shape": "g4-64", "q_heads": 32, "kv_heads": 8, "head_dim": 64, "batch": 512, "context_tokens": c,
             "op": "graph_attention", "s": 1e-3} for c in (4096, 8192)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"points": rows}))
    with pytest.raises(RooflineError, match="launch-level"):
        attention_kernel_table([path], cal, card)


def _with_table(cal, entries):
    return cal.model_copy(update={"attention_kernel_table": Calibration.model_validate(
        {**cal.model_dump(), "attention_kernel_table": entries}).attention_kernel_table})


ENTRY = {"head_dim": 64, "group": 4, "matrices": [256, 1024, 4096], "contexts": [512, 1984, 2112, 4096],
         "factors": [[1.0, 1.2, 1.1, 1.0], [1.1, 1.6, 1.3, 0.9], [0.8, 1.0, 1.2, 1.4]]}


def _attention(model, cal, batch, context, card):
    sm = StepModel(model, card, cal)
    windowed = None if sm.window is None else batch * min(context, sm.window)
    return sm.pass_parts(decode_work(float(batch), float(batch * context),
                                     None if windowed is None else float(windowed))).attention_memory_s


def test_the_step_model_prices_the_decode_attention_at_the_tables_factor():
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    table = _with_table(cal, [ENTRY])
    llama = load_model("llama-3.2-1b")  # 64-wide heads, 4 query heads a KV head, 8 KV heads
    # on a probed point: batch 128 x 8 KV heads = 1,024 matrices at 1,984 positions
    assert _attention(llama, table, 128, 1984, card) == pytest.approx(1.6 * _attention(llama, cal, 128, 1984, card))
    # between two probed lengths with the row factors' step at 2,048 between them: the same side's value
    assert _attention(llama, table, 128, 2040, card) == pytest.approx(1.6 * _attention(llama, cal, 128, 2040, card))
    assert _attention(llama, table, 128, 2056, card) == pytest.approx(1.3 * _attention(llama, cal, 128, 2056, card))
    # between two without a step: linear in length; and in log2 matrices (2,048: halfway to 4,096)
    assert _attention(llama, table, 128, 3104, card) == pytest.approx(
        (1.3 + 0.9) / 2 * _attention(llama, cal, 128, 3104, card))
    assert _attention(llama, table, 256, 4096, card) == pytest.approx(
        (0.9 + 1.4) / 2 * _attention(llama, cal, 256, 4096, card))
    # beyond the longest length and the most matrices: the ends held; below the fewest, 1 at half as many
    assert _attention(llama, table, 2048, 8192, card) == pytest.approx(1.4 * _attention(llama, cal, 2048, 8192, card))
    assert _attention(llama, table, 16, 1984, card) == pytest.approx(_attention(llama, cal, 16, 1984, card))
    assert _attention(llama, table, 24, 1984, card) == pytest.approx(
        (1.0 + (1.2 - 1.0) * (np.log2(192) - 7)) * _attention(llama, cal, 24, 1984, card))
    # a prefill's KV writes are not the decode attention's: not scaled
    sm, plain = StepModel(llama, card, table), StepModel(llama, card, cal)
    work = prefill_work(1000.0, 1000.0 * 1001.0 / 2.0, 1.0)
    assert sm.pass_parts(work).attention_memory_s == pytest.approx(plain.pass_parts(work).attention_memory_s)


def test_which_entry_a_model_takes():
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    other = {**ENTRY, "group": 8, "factors": [[2.0] * 4] * 3}
    far = {**ENTRY, "group": 16, "factors": [[3.0] * 4] * 3}
    qwen = load_model("qwen2.5-0.5b")  # 64-wide, 7 a KV head: the 8's entry (nearer than the 4's)
    both = _with_table(cal, [ENTRY, other])
    assert _attention(qwen, both, 512, 1984, card) == pytest.approx(2.0 * _attention(qwen, cal, 512, 1984, card))
    # more than 2x away in query heads a KV head, or another head width: none
    assert _attention(qwen, _with_table(cal, [far]), 512, 1984, card) == pytest.approx(
        _attention(qwen, cal, 512, 1984, card))
    wide = load_model("qwen2.5-7b")
    assert _attention(wide, both, 256, 1984, card) == pytest.approx(_attention(wide, cal, 256, 1984, card))
    # MLA's latent attention runs other kernels: never
    mla = load_model("deepseek-v2-lite")
    any_width = _with_table(cal, [{**ENTRY, "head_dim": mla.head_dim, "group": 1.0}])
    assert _attention(mla, any_width, 256, 1984, card) == pytest.approx(_attention(mla, cal, 256, 1984, card))


def test_the_windowed_layers_take_their_rings_length_and_arrays_equal_floats():
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    gemma = load_model("gemma-2-9b")  # 256-wide, 2 a KV head; half its layers on a ring of 4,096
    entry = {"head_dim": 256, "group": 2, "matrices": [64, 4096], "contexts": [512, 4096, 8192],
             "factors": [[1.0, 2.0, 1.0], [1.0, 2.0, 1.0]]}
    table = _with_table(cal, [entry])
    # at 8,192 positions the full layers' factor is 1 and the ring's 2: between, by their shares
    ratio = _attention(gemma, table, 64, 8192, card) / _attention(gemma, cal, 64, 8192, card)
    assert 1.05 < ratio < 1.95
    # and at 4,096 both are on the ring's length: 2
    assert _attention(gemma, table, 64, 4096, card) == pytest.approx(2.0 * _attention(gemma, cal, 64, 4096, card))
    sm = StepModel(gemma, card, table)
    batch = np.array([1.0, 16.0, 64.0, 300.0])
    context = np.array([700.0, 4096.0, 8192.0, 5000.0])
    arrays = sm.pass_s(decode_work(batch, batch * context, batch * np.minimum(context, sm.window)))
    floats = [sm.pass_s(decode_work(float(b), float(b * c), float(b * min(c, sm.window)))) for b, c in zip(batch, context)]
    assert arrays == pytest.approx(floats, rel=1e-12)


def test_a_bad_table_is_refused():
    cal = load_calibration(SHIPPED).model_dump()
    for bad in ({**ENTRY, "matrices": [1024, 256, 4096]}, {**ENTRY, "factors": [[1.0] * 4] * 2},
                {**ENTRY, "factors": [[1.0, 1.0, 1.0, 0.0]] * 3}, {"head_dim": 64}):
        with pytest.raises(ValueError, match="attention_kernel_table"):
            Calibration.model_validate({**cal, "attention_kernel_table": [bad]})


def test_the_shipped_calibration_holds_the_shipped_probes_table():
    # read against the shipped terms (without a table) it gives back what the calibration holds, within
    # the rounds' settling (0.5%): api.fit's last round
    card = load_card("h200")
    shipped = load_calibration(SHIPPED)
    assert shipped.attention_kernel_table, "the shipped H200 graph calibration carries the attention-table probe's"
    again = attention_kernel_table([TABLE_PROBE], shipped, card)
    assert [(e["head_dim"], e["group"]) for e in again] == [(e["head_dim"], e["group"])
                                                            for e in shipped.attention_kernel_table]
    worst = max(abs(x / y - 1.0) for a, b in zip(again, shipped.attention_kernel_table)
                for ra, rb in zip(a["factors"], b["factors"]) for x, y in zip(ra, rb))
    assert worst < 0.02


def test_a_slower_kernels_window_bounds_the_table_at_every_group_of_its_head_width():
    """The shipped calibration's window of cache lengths (1,024-1,088] where 64-wide heads run a
    slower kernel was measured at 1-8 query heads a KV head; falcon-40b's 16 take no window factor,
    but the table's interpolation stops at the window's lengths all the same: past 1,024 the
    table's value at 1,088 (device call 66: falcon-40b at 1,000 + 32, batches 128-512, was priced
    9-12% fast with the table interpolated across 1,024)."""
    card = load_card("h200")
    cal = _plain(load_calibration(SHIPPED))
    assert any(a == 1024.0 and lo <= 64 <= hi and g_hi < 16
               for a, b, f, lo, hi, g_lo, g_hi in cal.attention_context_factors)
    entry = {"head_dim": 64, "group": 16, "matrices": [256, 1024, 4096], "contexts": [960, 1024, 1088, 1152],
             "factors": [[1.0, 0.9, 1.4, 1.0], [1.0, 0.8, 1.5, 1.1], [1.0, 0.9, 1.4, 1.0]]}
    table = _with_table(cal, [entry])
    falcon = load_model("falcon-40b")  # 64-wide heads, 128 query heads over 8 KV heads
    # batch 128 x 8 KV heads = 1,024 matrices: just past 1,024 positions the 1,088 column's 1.5
    assert _attention(falcon, table, 128, 1030, card) == pytest.approx(1.5 * _attention(falcon, cal, 128, 1030, card))
    # at 1,024 and below: the 1,024 column, and linear from 960
    assert _attention(falcon, table, 128, 1024, card) == pytest.approx(0.8 * _attention(falcon, cal, 128, 1024, card))
    assert _attention(falcon, table, 128, 992, card) == pytest.approx(0.9 * _attention(falcon, cal, 128, 992, card))
