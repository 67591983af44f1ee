"""Model configs for the harnesses: catalog names, config.json paths, and tiny test models.

Catalog models resolve through ``roofline.model_spec.resolve_model_config_path`` when it can be
imported (it needs pydantic), else through the catalog folder directly:
``roofline/catalog/<name>/config.json``. The tiny configs exist for CPU runs and CI only.
"""

from __future__ import annotations

from pathlib import Path

from roofline.errors import RooflineError

CATALOG_DIR = Path(__file__).resolve().parent.parent / "roofline" / "catalog"

#: Tiny models with real architectures' shapes, for the CPU path (CI). Not published models;
#: their config.json files live in the catalog (marked test_only there).
TINY_MODELS = ("tiny-qwen2", "tiny-llama")


def resolve_config_path(name_or_path: str) -> Path:
    """The config.json of a catalog name, a config.json path, or a folder holding one."""
    try:
        from roofline.model_spec import resolve_model_config_path
    except ImportError:  # the pure model's resolver needs pydantic; the GPU image may lack it
        resolve_model_config_path = None
    if resolve_model_config_path is not None:
        return Path(resolve_model_config_path(name_or_path))
    key = name_or_path.strip()
    catalog = CATALOG_DIR / key.lower() / "config.json"
    if catalog.is_file():
        return catalog
    path = Path(key).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path / "config.json"
    if path.is_file():
        return path
    known = sorted(p.name for p in CATALOG_DIR.iterdir() if (p / "config.json").is_file())
    raise RooflineError(f"unknown model {key!r}; known: {', '.join(known)}")


def load_model_config(name_or_path: str) -> dict:
    """The HF config dict for a tiny test model, a catalog name or a config.json path."""
    from roofline.atomic import read_json

    path = resolve_config_path(name_or_path)
    config = read_json(path, "model config")
    if "model_type" not in config:
        raise RooflineError(f"{path}: no model_type; not a Hugging Face config.json")
    return config
