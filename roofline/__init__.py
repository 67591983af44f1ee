"""roofline: how LLM decoding behaves on a GPU, predicted by a calibrated roofline model.

The public API (the CLI calls exactly these):

    import roofline
    p = roofline.predict(card="rtx3060", model="qwen2.5-1.5b", batches=[1, 8, 64, 128])
    p.rows()                      # list of dicts, one per batch (pandas.DataFrame(p.rows()) works)
    roofline.bend(card="rtx3060", model="qwen2.5-1.5b")

Importing this package never imports torch, transformers or plotly.
"""

from roofline.api import bend, predict  # noqa: F401
from roofline.api import choose, simulate, waste  # noqa: F401
from roofline.api import chart  # noqa: F401
from roofline.errors import RooflineError  # noqa: F401

__version__ = "0.1.0"
