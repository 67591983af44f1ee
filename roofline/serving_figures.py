"""plotly figures of a server choice: latency percentiles against the arrival rate.

``server_choice_figure(choice)``: two panels sharing the arrival-rate axis, TTFT (log scale, s)
and TPOT (ms), each with the best candidate's p50 / p90 / p99 at every rate the sweep simulated,
the other candidates' SLO percentile as thin lines, the SLO as a dashed line, the chosen rate as
a vertical line with its point marked, and the capacity (every request queued at once) dotted.
``write_server_chart`` writes it as one self-contained HTML file (plotly.js embedded: it opens
offline). plotly is imported here, inside the functions, so ``import roofline`` never imports it.
"""

from __future__ import annotations

from pathlib import Path

COLORS = {50: "#1f5fbf", 90: "#7a4fbf", 99: "#d2452f"}
SLO_COLOR = "#333333"


def server_choice_figure(choice):
    """The figure (module docstring) of a roofline.server_choice.ServerChoice."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    slo = choice.slo
    q = slo["slo_percentile"]
    main = choice.best or max(choice.sweeps, key=lambda s: s.capacity_req_s)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT (s)", "TPOT (ms)"), horizontal_spacing=0.09)
    for col, (name, scale, unit) in enumerate((("ttft", 1.0, "s"), ("tpot", 1e3, "ms")), 1):
        for other in choice.sweeps:
            if other is main:
                continue
            pts = [p for p in other.points if p.get(f"{name}_p{q}_s") is not None]
            fig.add_trace(go.Scatter(
                x=[p["rate_req_s"] for p in pts], y=[p[f"{name}_p{q}_s"] * scale for p in pts], mode="lines",
                line={"width": 1, "color": "#9aa5b1"}, name=f"{other.candidate.label} p{q}", legendgroup=other.candidate.label,
                showlegend=col == 1, hovertemplate=f"%{{x:.3g}} req/s<br>p{q} %{{y:.4g}} {unit}<extra>{other.candidate.label}</extra>",
            ), row=1, col=col)
        for pct in (50, 90, 99):
            pts = [p for p in main.points if p.get(f"{name}_p{pct}_s") is not None]
            fig.add_trace(go.Scatter(
                x=[p["rate_req_s"] for p in pts], y=[p[f"{name}_p{pct}_s"] * scale for p in pts], mode="lines+markers",
                marker={"size": 5}, line={"color": COLORS[pct], "width": 2.5 if pct == q else 1.5},
                name=f"p{pct}", legendgroup=f"p{pct}", showlegend=col == 1,
                hovertemplate=f"%{{x:.3g}} req/s<br>p{pct} %{{y:.4g}} {unit}<extra></extra>",
            ), row=1, col=col)
        limit = slo[f"slo_{name}_s"]
        if limit is not None:
            fig.add_hline(y=limit * scale, line_dash="dash", line_color=SLO_COLOR, row=1, col=col,
                          annotation_text=f"SLO p{q} {limit * scale:g} {unit}", annotation_position="top left")
        if choice.best is not None:
            best = choice.best.best
            value = best.get(f"{name}_p{q}_s")
            if value is not None:
                fig.add_trace(go.Scatter(
                    x=[best["rate_req_s"]], y=[value * scale], mode="markers",
                    marker={"size": 13, "symbol": "star", "color": "#f0b020", "line": {"width": 1, "color": "#333"}},
                    name="chosen", legendgroup="chosen", showlegend=col == 1,
                    hovertemplate=f"chosen: %{{x:.3g}} req/s<br>p{q} %{{y:.4g}} {unit}<extra></extra>",
                ), row=1, col=col)
            fig.add_vline(x=best["rate_req_s"], line_color="#f0b020", line_width=2, row=1, col=col)
        fig.add_vline(x=main.capacity_req_s, line_dash="dot", line_color="#777", row=1, col=col)
        fig.update_xaxes(title_text="arrival rate (requests/s, Poisson)", type="log", row=1, col=col)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    title = f"{choice.meta['model']}: latency vs arrival rate, {main.candidate.label}"
    if choice.best is not None:
        title += f"; chosen {choice.best.best_rate_req_s:.3g} req/s (capacity {main.capacity_req_s:.3g}, dotted)"
    else:
        title += "; no rate meets the SLOs"
    fig.update_layout(title=title, template="plotly_white", legend={"orientation": "h", "y": -0.22}, height=520)
    return fig


def write_server_chart(choice, path) -> str:
    """Write the figure as a self-contained HTML page (plotly.js inline); returns the path."""
    from roofline.atomic import write_text_atomic

    html = server_choice_figure(choice).to_html(include_plotlyjs=True, full_html=True)
    path = Path(path)
    write_text_atomic(path, html)
    return str(path)
