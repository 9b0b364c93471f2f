"""A chart (infermeter.chart: a plot as data) drawn as a plotly.js figure for the HTML report (`plotly_figure`)."""

from __future__ import annotations

from typing import Any

from infermeter.chart import Chart, Trace

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")


def _axis_name(kind: str, index: int) -> str:
    return kind if index == 1 else f"{kind}{index}"


def plotly_figure(chart: Chart) -> dict[str, Any]:
    """The chart as a plotly.js figure ({"data", "layout"}), panels stacked top to bottom on one x axis."""
    layout = _layout(chart)
    data = [_trace(t, i, len(chart.panels)) for i, t in enumerate(chart.traces)]
    layout["shapes"], layout["annotations"] = _marks(chart)
    return {"data": data, "layout": layout}


def _layout(chart: Chart) -> dict[str, Any]:
    """The figure's title, legend and axes: the panels' y axes stacked on one x axis, the right-hand one if any."""
    n = len(chart.panels)
    gap = 0.04 if n > 1 else 0.0
    span = (1.0 - gap * (n - 1)) / n
    layout: dict[str, Any] = {
        "title": {"text": chart.title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "margin": {"l": 70, "r": 70 if chart.y2_title else 25, "t": 45, "b": 100},
        "height": chart.height or (340 + 170 * (n - 1)),
        # the legend sits at the page's bottom edge, under the x axis title
        "legend": {"orientation": "h", "yref": "container", "y": 0.01, "yanchor": "bottom", "x": 0},
        "hovermode": "closest",
        "template": None,
        "plot_bgcolor": "#fff",
        "barmode": "overlay" if any(t.kind == "histogram" for t in chart.traces) else "group",
        "xaxis": {
            "title": {"text": chart.x_title},
            "type": "log" if chart.x_log else "-",  # "-": plotly decides (numbers, or categories such as groups)
            "showgrid": True,
            "gridcolor": "#e5e5e5",
            "zeroline": False,
            "anchor": _axis_name("y", n),
        },
    }
    for i, title in enumerate(chart.panels, start=1):
        top = 1.0 - (i - 1) * (span + gap)
        layout[_axis_name("yaxis", i)] = {
            "title": {"text": title, "font": {"size": 12}},
            "type": "log" if chart.y_log else "linear",
            "domain": [max(0.0, top - span), top],
            "showgrid": True,
            "gridcolor": "#e5e5e5",
            "zeroline": False,
            "anchor": "x",
        }
    if chart.y2_title:
        layout[_axis_name("yaxis", n + 1)] = {
            "title": {"text": chart.y2_title, "font": {"size": 12}},
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "anchor": "x",
        }
    return layout


def _marks(chart: Chart) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The marks as dotted lines (shapes) and their labels (annotations): vertical at an x, horizontal at a y."""
    shapes, notes = [], []
    for k, m in enumerate(chart.marks):
        yref = _axis_name("y", m.row)
        if m.x is not None:
            shapes.append(_line("x", yref + " domain", m.x, (0, 1)))
            same = sum(o.x == m.x and o.row == m.row for o in chart.marks[:k])  # labels at one x stack, not overlap
            notes.append(
                {
                    "x": m.x,
                    "y": 1,
                    "xref": "x",
                    "yref": yref + " domain",
                    "text": m.label,
                    "showarrow": False,
                    "yanchor": "bottom",
                    "yshift": 14 * same,
                    "textangle": 0,
                    "font": {"size": 11},
                }
            )
        elif m.y is not None:
            shapes.append(_line("x domain", yref, m.y, None))
            notes.append(
                {
                    "x": 1,
                    "y": m.y,
                    "xref": "x domain",
                    "yref": yref,
                    "text": m.label,
                    "showarrow": False,
                    "xanchor": "right",
                    "yanchor": "bottom",
                    "font": {"size": 11},
                }
            )
    return shapes, notes


def _line(xref: str, yref: str, at: float, span: tuple[int, int] | None) -> dict[str, Any]:
    style = {"color": "#555", "width": 1, "dash": "dot"}
    if span is not None:  # vertical
        return {
            "type": "line",
            "xref": xref,
            "yref": yref,
            "x0": at,
            "x1": at,
            "y0": span[0],
            "y1": span[1],
            "line": style,
        }
    return {"type": "line", "xref": xref, "yref": yref, "x0": 0, "x1": 1, "y0": at, "y1": at, "line": style}


def _trace(t: Trace, index: int, panels: int) -> dict[str, Any]:
    color = t.color or PALETTE[index % len(PALETTE)]
    yaxis = _axis_name("y", panels + 1) if t.secondary else _axis_name("y", t.row)
    out: dict[str, Any] = {"name": t.name, "xaxis": "x", "yaxis": yaxis}
    if t.kind == "box":
        lo, q1, med, q3, hi = t.box or (0.0, 0.0, 0.0, 0.0, 0.0)
        at = [t.x[0] if t.x else t.name]
        return {
            **out,
            "type": "box",
            ("x" if t.orientation == "v" else "y"): at,
            "q1": [q1],
            "median": [med],
            "q3": [q3],
            "lowerfence": [lo],
            "upperfence": [hi],
            "marker": {"color": color},
            "orientation": t.orientation,
        }
    if t.kind == "histogram":
        return {**out, "type": "histogram", "x": t.x, "opacity": 0.6, "marker": {"color": color}}
    if t.kind == "bar":
        return {
            **out,
            "type": "bar",
            "x": t.x,
            "y": t.y,
            "marker": {"color": color},
            "orientation": t.orientation,
            **({"text": t.text, "hoverinfo": "text+name"} if t.text else {}),
        }
    mode = {"line": "lines", "step": "lines", "markers": "markers", "lines+markers": "lines+markers"}[t.kind]
    line: dict[str, Any] = {"color": color, "width": t.width or 2}
    if t.kind == "step":
        line["shape"] = "hv"
    if t.dash:
        line["dash"] = "dash"
    out.update(
        {
            "type": "scatter",
            "mode": mode,
            "x": t.x,
            "y": t.y,
            "line": line,
            "marker": {"color": color, "size": 5 if len(t.x) > 200 else 8},
        }
    )
    if t.text:
        out.update({"text": t.text, "hoverinfo": "text+name"})
    return out
