"""roofline: how LLM decoding behaves on a GPU, predicted by a calibrated roofline model.

The public API (the CLI calls exactly these):

    import roofline
    p = roofline.predict("rtx3060", "qwen2.5-1.5b", batches=[1, 8, 64, 128])
    p.rows()                      # list of dicts, one per batch (pandas.DataFrame(p.rows()) works)
    p.bend                        # where decode bends
    roofline.choose("rtx3060", "qwen2.5-1.5b", ttft_max_s=0.5)
    roofline.waste(mix="8x32,8x256"), roofline.simulate(...), roofline.chart(...)
    roofline.fit(...), roofline.compare(...), roofline.calibrate(...)

Importing this package never imports torch, transformers or plotly.
"""

from roofline.api import bend, calibrate, chart, choose, compare, fit, predict, simulate, waste  # noqa: F401
from roofline.errors import RooflineError, RooflineWarning  # noqa: F401
from roofline.scenario import Scenario, make_scenario  # noqa: F401

__version__ = "0.2.0"
