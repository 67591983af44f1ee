"""roofline: how LLM decoding behaves on a GPU, predicted by a calibrated roofline model.

The public API (the CLI calls exactly these):

    import roofline
    p = roofline.predict("rtx3060", "qwen2.5-1.5b", batches=[1, 8, 64, 128])
    p.rows()                      # list of dicts, one per batch (pandas.DataFrame(p.rows()) works)
    p.bend                        # where decode bends
    roofline.choose("rtx3060", "qwen2.5-1.5b", ttft_max_s=0.5)
    roofline.waste(mix="8x32,8x256"), roofline.simulate(...), roofline.choose_server(...), roofline.chart(...)
    roofline.fit(...), roofline.compare(...), roofline.calibrate(...)

Importing this package never imports torch, transformers or plotly; the API (and pydantic with
it) loads on first use, so the stdlib-only modules the GPU harness needs (roofline.errors,
units, atomic, measurements) import on a machine without pydantic.
"""

__version__ = "0.2.0"

_API = ("predict", "bend", "choose", "waste", "simulate", "choose_server", "chart", "fit", "compare", "calibrate")
_ELSEWHERE = {"RooflineError": "roofline.errors", "RooflineWarning": "roofline.errors",
              "Scenario": "roofline.scenario", "make_scenario": "roofline.scenario"}
__all__ = [*_API, *_ELSEWHERE]


def __getattr__(name: str):
    import importlib

    if name in _API:
        value = getattr(importlib.import_module("roofline.api"), name)
    elif name in _ELSEWHERE:
        value = getattr(importlib.import_module(_ELSEWHERE[name]), name)
    else:
        raise AttributeError(f"module 'roofline' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])
