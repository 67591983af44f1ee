"""`roofline chart`: one self-contained HTML page of the model's charts, with what-if controls.

The page embeds plotly.js (no CDN, nothing fetched when opened from disk), the data of
roofline.chart_data.page_data() and a JavaScript port of the formulas (chart_assets/model.js;
the static batching and the servers in chart_assets/serving.js),
so changing a control recomputes and redraws every chart in the page itself. PNGs of each chart
are screenshots of that page in a headless chromium (roofline.browser).

plotly is imported only inside the functions that need it, never by ``import roofline``.
"""

from __future__ import annotations

import json
from html import escape as html_escape
from pathlib import Path

from roofline.errors import RooflineError
from roofline.atomic import write_bytes_atomic, write_text_atomic

ASSETS = Path(__file__).parent / "chart_assets"
#: The plot divs of the page, in order, and the PNG names they are exported under.
PLOT_IDS = ("plot-throughput", "plot-roofline", "plot-ttft", "plot-memory", "plot-slots", "plot-serving")


def _script_safe(text: str) -> str:
    """JSON text that cannot close (``</script>``) or confuse (``<!--``) the <script> element it
    sits in: every ``<`` written as the JSON escape ``\\u003c`` (``<`` occurs only inside strings)."""
    return text.replace("<", "\\u003c")


def render_page(data: dict) -> str:
    """The HTML text of the page for ``data`` (from page_data())."""
    import plotly
    from plotly.offline import get_plotlyjs

    from roofline import __version__

    initial = data["initial"]
    parts = {
        # names from files are text: escaped in the HTML, and in the page's script written with textContent
        "__TITLE__": html_escape(f"{initial['model']} on {initial['card']}"),
        "__PLOTLY_VERSION__": _plotlyjs_version(plotly),
        "__VERSION__": __version__,
        "__DATA__": _script_safe(json.dumps(data, separators=(",", ":"), allow_nan=False)),
        "__MODELJS__": (ASSETS / "model.js").read_text(encoding="utf-8"),
        "__SERVINGJS__": (ASSETS / "serving.js").read_text(encoding="utf-8"),
        "__CHARTJS__": (ASSETS / "chart.js").read_text(encoding="utf-8"),
        "__PLOTLYJS__": get_plotlyjs(),
    }
    html = (ASSETS / "page.html").read_text(encoding="utf-8")
    # one pass, so no placeholder text inside an inserted part is ever replaced
    import re

    return re.sub("|".join(re.escape(k) for k in parts), lambda m: parts[m.group(0)], html)


def _plotlyjs_version(plotly) -> str:
    try:
        from plotly.offline.offline import get_plotlyjs_version

        return get_plotlyjs_version()
    except Exception:  # noqa: BLE001 - only a label
        return f"(plotly.py {plotly.__version__})"


def write_chart(path: str | Path, **page_kwargs) -> dict:
    """Write the page to ``path`` atomically. Returns {path, bytes, data}."""
    from roofline.chart_data import page_data

    data = page_data(**page_kwargs)
    html = render_page(data)
    try:
        out = write_text_atomic(path, html)
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None
    return {"path": str(out), "bytes": len(html.encode("utf-8")), "data": data}


def export_pngs(html_path: str | Path, out_dir: str | Path, width: int = 900, timeout_s: float = 60.0) -> list[Path]:
    """Screenshot each chart of a written page into ``out_dir``/<chart>.png with headless chromium.

    The page is laid out one chart per row at ``width`` CSS pixels, so each PNG is that wide."""
    from roofline.browser import Browser

    html_path = Path(html_path).resolve()
    out_dir = Path(out_dir)
    written = []
    with Browser(width=width + 60, height=900, timeout_s=timeout_s) as b:
        b.open(html_path.as_uri())
        b.wait_for("window.rooflineReady === true", timeout_s=timeout_s)
        # one chart per row, each plot exactly ``width`` pixels wide, then redrawn at that size
        b.evaluate(
            "document.querySelector('header').style.position = 'static';"
            "document.head.insertAdjacentHTML('beforeend', '<style>.modebar-container { display: none !important; }</style>');"
            "document.querySelector('main').style.gridTemplateColumns = '1fr';"
            f"Promise.all(Array.from(document.querySelectorAll('.plot')).map(d => {{ d.style.width = '{width}px';"
            " return Plotly.Plots.resize(d); })).then(() => true)"
        )
        for plot_id in PLOT_IDS:
            rect = b.evaluate(
                f"(() => {{ const r = document.getElementById('{plot_id}').getBoundingClientRect();"
                " return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height}; })()"
            )
            png = b.screenshot(clip=rect)
            target = out_dir / f"{plot_id.removeprefix('plot-')}.png"
            try:
                write_bytes_atomic(target, png)
            except OSError as exc:
                raise RooflineError(f"cannot write {target}: {exc.strerror or exc}") from None
            written.append(target)
    return written


