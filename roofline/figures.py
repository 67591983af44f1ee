"""plotly figures of a Prediction, for Jupyter: ``roofline.predict(...).figure()``.

plotly is imported here, inside the functions, so ``import roofline`` never imports it.
"""

from __future__ import annotations

import numpy as np


def prediction_figure(prediction, show_bend: bool = True):
    """Throughput (left axis) and TPOT (right axis, ms) against batch on a log2 axis, with the
    bend (``prediction.bend``) marked as a shaded region and its crossing batch."""
    import plotly.graph_objects as go

    cols = prediction.columns
    sc = prediction.scenario
    batch = np.asarray(cols["batch"])
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=batch, y=cols["throughput_tok_s"], name="throughput (tok/s)", mode="lines+markers",
        line={"color": "#1f5fbf", "width": 2.5}, hovertemplate="batch %{x}<br>%{y:,.0f} tok/s<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=batch, y=np.asarray(cols["tpot_s"]) * 1e3, name="TPOT (ms)", mode="lines+markers", yaxis="y2",
        line={"color": "#e0701a", "width": 2.5}, hovertemplate="batch %{x}<br>TPOT %{y:.2f} ms<extra></extra>",
    ))
    ticks = [int(2**k) for k in range(0, int(np.log2(batch.max())) + 2) if 2**k <= 2 * batch.max()]
    fig.update_layout(
        title=f"{sc.model.name} on {sc.card.id}: prompt {sc.prompt_tokens}, gen {sc.gen_tokens}",
        xaxis={"type": "log", "title": "batch", "tickvals": ticks, "ticktext": [str(t) for t in ticks]},
        yaxis={"title": "throughput (tok/s)", "rangemode": "tozero"},
        yaxis2={"title": "TPOT (ms)", "overlaying": "y", "side": "right", "rangemode": "tozero", "showgrid": False},
        legend={"orientation": "h", "y": -0.2},
        template="plotly_white",
    )
    if show_bend:
        # on a log axis plotly places annotations at log10(x), shapes at x
        b = prediction.bend
        if b.region_low_batch is not None:
            fig.add_vrect(x0=b.region_low_batch, x1=b.region_high_batch, fillcolor="rgba(240,180,40,0.18)",
                          line_width=0, layer="below")
            fig.add_annotation(x=np.log10(np.sqrt(b.region_low_batch * b.region_high_batch)), y=1, yref="paper",
                               text="bends", showarrow=False, yanchor="bottom")
        if b.crossing_batch is not None:
            fig.add_vline(x=b.crossing_batch, line_dash="dash", line_color="#333")
            fig.add_annotation(x=np.log10(b.crossing_batch), y=0.5, yref="paper", xanchor="right", showarrow=False,
                               text=f"intensity = balance point<br>at batch {b.crossing_batch}",
                               bgcolor="rgba(255,255,255,0.8)")
    return fig
