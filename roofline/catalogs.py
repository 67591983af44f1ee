"""What `roofline models` and `roofline cards` list: the catalog's models and the card profiles, as rows."""

from __future__ import annotations


def model_rows() -> list[dict]:
    """Every catalog model's summary (parameters, weight bytes, KV bytes per token, shape) and HF repos."""
    from roofline.model_spec import catalog_index, catalog_names, load_model

    rows = []
    for name in catalog_names():
        row = load_model(name).summary()
        row["hf_repos"] = catalog_index()[name].get("hf_repos", [])
        rows.append(row)
    return rows


def card_rows() -> list[dict]:
    """Every card profile's summary (memory, ceilings, balance point, where the ceilings come from)."""
    from roofline.hardware import all_cards

    return [c.summary() for c in all_cards()]
