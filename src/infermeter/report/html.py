"""A report Document as one self-contained HTML file that works offline: plotly.js is inlined once, gzip-compressed
and base64-encoded (2.0 MB instead of 4.8 MB; the browser inflates it with DecompressionStream), the figures follow
as one JSON block.  Every chart's div declares how many traces and points it draws, for the browser tests."""

from __future__ import annotations

import base64
import functools
import gzip
from importlib import resources
from pathlib import Path

import jinja2
import orjson
from markupsafe import Markup

from infermeter import __version__
from infermeter.errors import UserError
from infermeter.report.chart import plotly_figure
from infermeter.report.document import Document, Section

TEMPLATE = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True).from_string(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="infermeter {{ version }}">
<title>{{ doc.title }}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px;background:#fff}
h1{font-size:22px;margin:8px 0 12px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
h3{font-size:16px;margin-top:20px}
ul{padding-left:20px}li{margin:2px 0}
.banner{background:#fff3cd;border:1px solid #e0c36c;padding:8px 12px;margin:8px 0;border-radius:4px}
table{border-collapse:collapse;margin:10px 0 4px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.tnote{font-size:12px;color:#555;margin:2px 0 12px}
.chart{margin:14px 0 4px;border:1px solid #eee;min-height:120px}
.cnote{font-size:12px;color:#444;margin:0 0 16px}
.met{color:#176b21;font-weight:600}.unmet{color:#b00020;font-weight:600}
#render-error{color:#b00020}
</style></head>
<body data-charts="{{ figures|length }}"><main>
<h1>{{ doc.title }}</h1>
{% for b in doc.banners %}<div class="banner">{{ b }}</div>{% endfor %}
{% for section in doc.sections %}{{ render_section(section, 2) }}{% endfor %}
<p id="render-error"></p>
<footer class="tnote">Written by infermeter {{ version }}
{%- if figures %}; plots drawn offline with plotly.js {{ plotly_version }}{% endif %}.
</footer>
</main>
{% if figures %}
<script id="plotly-gz" type="application/octet-stream">{{ plotly_gz }}</script>
<script id="figures" type="application/json">{{ figures_json }}</script>
<script>
(async () => {
  try {
    const b64 = document.getElementById("plotly-gz").textContent.trim();
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const code = await new Response(stream).text();
    const script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);
    const figures = JSON.parse(document.getElementById("figures").textContent);
    for (const [id, fig] of Object.entries(figures)) {
      await Plotly.newPlot(id, fig.data, fig.layout, {responsive: true, displaylogo: false});
    }
    document.body.dataset.rendered = String(Object.keys(figures).length);
  } catch (err) {
    document.getElementById("render-error").textContent = "The plots could not be drawn: " + err;
    document.body.dataset.renderError = String(err);
    throw err;
  }
})();
</script>
{% endif %}
</body></html>
"""
)

SECTION = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True).from_string(
    """<section>
<h{{ level }}>{{ section.title }}</h{{ level }}>
{% if section.bullets %}<ul>{% for b in section.bullets %}<li>{{ b }}</li>{% endfor %}</ul>{% endif %}
{% for t in section.tables %}
<table><caption>{{ t.caption }}</caption>
<thead><tr>{% for h in t.headers %}<th>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in t.rows %}<tr>{% for c in row %}<td{{ cls(c) }}>{{ c }}</td>{% endfor %}</tr>{% endfor %}</tbody>
</table>
{% for n in t.notes %}<p class="tnote">{{ n }}</p>{% endfor %}
{% endfor %}
{% for c in section.charts %}
<div class="chart" id="{{ dom_id(c) }}" data-chart="{{ c.id }}" data-traces="{{ c.traces|length }}"
 data-points="{{ c.points() }}" role="img" aria-label="{{ c.title }}"></div>
{% if c.note %}<p class="cnote">{{ c.note }}</p>{% endif %}
{% endfor %}
{% for sub in section.subsections %}{{ render_section(sub, level + 1) }}{% endfor %}
</section>
"""
)


def _class(cell: str) -> Markup:
    """Right-align figures; colour a compliance status (markup of our own, so that autoescape keeps its quotes)."""
    text = str(cell).strip()
    if text in ("met", "significant"):
        return Markup(' class="met"')
    if text == "NOT MET":
        return Markup(' class="unmet"')
    head = text.replace(".", "", 1).replace("-", "", 1).replace("+", "", 1)[:1]
    return Markup(' class="num"' if head.isdigit() else "")


@functools.cache
def plotly_payload() -> tuple[str, str]:
    """plotly.js (the version the plotly package ships) gzip-compressed and base64-encoded, and its version."""
    import plotly

    try:
        js = resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    except OSError as exc:  # pragma: no cover - a broken plotly install
        raise UserError(f"plotly's plotly.min.js cannot be read ({exc}): reinstall plotly") from None
    return base64.b64encode(gzip.compress(js, 6, mtime=0)).decode("ascii"), plotly.__version__


def render_html(doc: Document) -> str:
    """The document as one HTML page (each chart's element id is unique: its position, then its own id)."""
    charts = doc.charts()
    dom = {id(c): f"chart-{i}-{c.id}" for i, c in enumerate(charts)}
    figures = {dom[id(c)]: plotly_figure(c) for c in charts}

    def render_section(section: Section, level: int) -> jinja2.utils.markupsafe.Markup:
        return jinja2.utils.markupsafe.Markup(
            SECTION.render(
                section=section, level=level, dom_id=lambda c: dom[id(c)], cls=_class, render_section=render_section
            )
        )

    payload, version = plotly_payload() if figures else ("", "")
    figures_json = orjson.dumps(figures, option=orjson.OPT_SERIALIZE_NUMPY).decode().replace("</", "<\\/")
    return TEMPLATE.render(
        doc=doc,
        figures=figures,
        figures_json=jinja2.utils.markupsafe.Markup(figures_json),
        plotly_gz=payload,
        plotly_version=version,
        version=__version__,
        render_section=render_section,
    )


def write_report(doc: Document, path: Path, markdown: bool = False) -> None:
    """Write the report as HTML (or Markdown); a path that cannot be written is a one-line error."""
    from infermeter.report.markdown import render_markdown

    text = render_markdown(doc) if markdown else render_html(doc)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path} cannot be written ({exc.strerror}): choose another file") from None
