"""HTML building blocks of the reports: escaping, tables, and the page shell.

Every piece of text that comes from a model, a rule file or a trace goes through `esc`
(or a helper that calls it); fragments that are already HTML are wrapped in `Html` so the
helpers insert them verbatim. The page references nothing outside itself: its CSS and its
small script are inline, and it loads no fonts, scripts or stylesheets from the network.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence


class Html(str):
    """A string that is already HTML: inserted as is by the helpers below."""

    __slots__ = ()


def esc(text: object) -> str:
    """`text` escaped for HTML content and attribute values (`<`, `>`, `&`, quotes)."""
    if isinstance(text, Html):
        return str(text)
    return html.escape(str(text), quote=True)


def slug(text: str) -> str:
    """A fragment identifier made of letters, digits, `-` and `_` (for anchors)."""
    kept = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "-" for c in text)
    return kept.strip("-") or "x"


def table(
    header: Sequence[str] | None,
    rows: Iterable[Sequence[object]],
    *,
    numeric: Sequence[int] = (),
    css_class: str = "",
) -> Html:
    """A table; cells are escaped unless they are `Html`; `numeric` columns align right.

    With `header=None` the table has no header row (a list of name/value pairs).
    """
    right = set(numeric)
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i in right else f"<th>{esc(h)}</th>"
        for i, h in enumerate(header or ())
    )
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{esc(c)}</td>' if i in right else f"<td>{esc(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    attr = f' class="{esc(css_class)}"' if css_class else ""
    thead = f"<thead><tr>{head}</tr></thead>" if header is not None else ""
    return Html(f"<table{attr}>{thead}<tbody>{''.join(body)}</tbody></table>")


def section(section_id: str, title: str, body: str, *, level: int = 2) -> Html:
    """A `<section>` with an anchor and a heading."""
    return Html(
        f'<section id="{esc(section_id)}"><h{level}>{esc(title)}</h{level}>{body}</section>'
    )


def human_bytes(n: int) -> str:
    """`1234567` -> `1.2 MiB`."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def seconds(value: float) -> str:
    """A duration for people: `0.8 ms`, `12.3 ms`, `1.25 s`."""
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f} s"


_CSS = """
:root { --matched: #c62828; --created: #2e7d32; --muted: #777; --line: #ddd; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 0; color: #222; background: #fafafa; }
main { max-width: 1240px; margin: 0 auto; padding: 16px 24px 48px; }
header.page { background: #263238; color: #fff; padding: 14px 24px; }
header.page h1 { margin: 0; font-size: 20px; }
header.page p { margin: 4px 0 0; color: #cfd8dc; }
.overview { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1.25fr); gap: 28px; }
.overview svg.chart { max-width: 100%; height: auto; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 32px; }
h3 { margin: 16px 0 6px; }
h3 .where { font-size: 13px; font-weight: normal; color: var(--muted); margin-left: 8px; }
section.rule { background: #fff; border: 1px solid var(--line); border-radius: 6px;
               padding: 4px 16px 12px; margin: 16px 0; }
table { border-collapse: collapse; margin: 8px 0; background: #fff; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left;
         vertical-align: top; }
th { background: #f0f0f0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px; padding: 8px;
      overflow-x: auto; margin: 6px 0; }
pre.source { max-height: 13em; overflow-y: auto; }
pre.source .ln { color: #aaa; user-select: none; }
.meta { color: var(--muted); }
.ok { color: var(--created); font-weight: 600; }
.bad { color: var(--matched); font-weight: 600; }
.note { background: #fff8e1; border: 1px solid #ffe082; border-radius: 4px; padding: 8px 12px; }
nav.contents { background: #fff; border: 1px solid var(--line); border-radius: 6px;
                padding: 6px 12px; margin: 4px 0 0; }
nav.contents ul { margin: 0; padding-left: 18px; }
nav.contents > ul > li + li { margin-top: 2px; }
.kind { font-size: 12px; font-weight: 600; padding: 0 6px; border-radius: 3px;
        background: #eceff1; color: #455a64; vertical-align: middle; }
.kind.fusion { background: #e3f4e4; color: #1b5e20; }
.kind.cleanup { background: #f3f3f3; color: #777; }
h3 .proof { font-size: 12px; margin-left: 6px; cursor: help; }
table.timings td { padding-top: 1px; padding-bottom: 1px; }
table.timings td:last-child { width: 160px; }
table.timings td:last-child span { display: block; height: 10px; margin-top: 5px;
                                   background: #4c78a8; }
.controls { display: flex; flex-wrap: wrap; align-items: center; gap: 4px 24px; }
.controls p { margin: 6px 0; }
details.app { border-top: 1px dashed var(--line); padding: 6px 0; }
details.app > summary { cursor: pointer; }
.pair { display: flex; align-items: flex-start; gap: 12px; flex-wrap: wrap; margin-top: 6px; }
figure { margin: 0; flex: 1 1 340px; min-width: 0; }
figure figcaption { font-weight: 600; color: var(--muted); margin-bottom: 2px; }
figure svg { max-width: 100%; height: auto; }
.arrow { align-self: center; font-size: 28px; color: #999; }
pre.listing .matched { color: var(--matched); }
pre.listing .created { color: var(--created); }
pre.listing .context { color: #999; }
.legend span { display: inline-block; padding: 0 6px; margin-right: 8px; border-radius: 3px; }
.legend .matched { background: #fde0dc; border: 1px solid var(--matched); }
.legend .created { background: #e3f4e4; border: 1px solid var(--created); }
.legend .context { background: #f3f3f3; border: 1px dashed #b0b0b0; color: #999; }
.toolbar button { margin-right: 6px; }
svg.chart text { font: 11px system-ui, Helvetica, Arial, sans-serif; fill: #333; }
"""

_SCRIPT = """
(function () {
  function setAll(open) {
    document.querySelectorAll("details.app").forEach(function (d) { d.open = open; });
  }
  document.querySelectorAll("[data-expand]").forEach(function (button) {
    button.addEventListener("click", function () {
      setAll(button.getAttribute("data-expand") === "all");
    });
  });
  document.body.setAttribute("data-report-ready", "1");
})();
"""


def page(title: str, subtitle: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n"
        f'<body><header class="page"><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>'
        f"<main>{body}</main><script>{_SCRIPT}</script></body></html>\n"
    )
