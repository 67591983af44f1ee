"""What `roofline models` and `roofline cards` list: the catalog's models and the card profiles, as rows."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

#: the catalog's folder: one <name>/config.json per model, and catalog.json, its index
CATALOG_DIR = Path(__file__).parent / "catalog"


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


def catalog_config_path(model: str) -> Path | None:
    """The catalog's config.json of ``model`` (a catalog name or one of its repo ids, in any case),
    else None. Reads only catalog.json, without pydantic (the GPU harness and the measurement
    reader call it; roofline.model_spec resolves names with it)."""
    name = _catalog_names().get(model.strip().lower())
    return None if name is None else CATALOG_DIR / name / "config.json"


@lru_cache(maxsize=1)
def _catalog_names() -> dict:
    """Lower-cased catalog name or repo id -> catalog name."""
    import json

    try:
        index = json.loads((CATALOG_DIR / "catalog.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for name, entry in index.get("models", {}).items():
        out[name.lower()] = name
        out.update({repo.lower(): name for repo in entry.get("hf_repos", [])})
    return out
