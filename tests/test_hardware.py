import json

import pytest

from roofline.errors import RooflineError
from roofline.hardware import all_cards, card_ids, load_card
from roofline.units import GB, GiB

REQUIRED = ["rtx3060", "rtx3090", "rtx4090", "l4", "l40s", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "mi300x"]


def test_required_cards_exist():
    assert set(REQUIRED) <= set(card_ids())


def test_rtx3060_reproduces_the_lessons_balance_point():
    # lesson 01's balance point, quoted in the static-batching lesson: 86.8 FLOP/byte
    card = load_card("rtx3060")
    assert card.balance_point_flop_per_byte == pytest.approx(86.8, abs=0.05)
    assert card.bandwidth_bytes_per_s / GB == pytest.approx(318, abs=1)
    assert card.peak_flop_per_s / 1e12 == pytest.approx(27.6, abs=0.1)


def test_every_figure_has_a_source_and_sane_ceilings():
    for card in all_cards():
        for fig in (card.memory, card.datasheet_bandwidth, card.datasheet_bf16_flops):
            assert fig.source.strip()
        assert 4 * GiB < card.memory_bytes < 400 * GiB
        assert 100 * GB < card.bandwidth_bytes_per_s < 10_000 * GB
        assert 10e12 < card.peak_flop_per_s < 3000e12


def test_aliases_and_case():
    assert load_card("RTX-3060").id == "rtx3060"


def test_unknown_card_suggests():
    with pytest.raises(RooflineError, match="did you mean.*rtx3060"):
        load_card("rtx306")


def test_profile_file_errors(tmp_path):
    bad = tmp_path / "card.json"
    bad.write_text(json.dumps({"id": "x", "name": "x"}))
    with pytest.raises(RooflineError, match="memory"):
        load_card(str(bad))
    bad.write_text('{"id": ')
    load_card.cache_clear()
    with pytest.raises(RooflineError, match="not valid JSON"):
        load_card(str(bad))
