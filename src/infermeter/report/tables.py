"""Plain-text grid tables in the draft's style (the RFC layout: '=' under the header, '-' between rows)."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.suite_result import Table


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None = None) -> str:
    """Render a table exactly as the draft's examples are drawn; the caption goes centred below."""
    cells = [list(map(str, headers)), *[list(map(str, r)) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def rule(ch: str) -> str:
        return "+" + "+".join(ch * (w + 2) for w in widths) + "+"

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"

    out = [rule("="), line(cells[0]), rule("=")]
    for r in cells[1:]:
        out += [line(r), rule("-")]
    if caption:
        out += ["", caption.center(len(out[0])).rstrip()]
    return "\n".join(out)


def fmt_ms(value: float | None, unit: str = " ms") -> str:
    """Milliseconds with precision that suits the magnitude ('127 ms', '42.5 ms', '5.74 ms')."""
    if value is None:
        return "n/a"
    if abs(round(value, 1)) >= 100:
        return f"{value:.0f}{unit}"
    if abs(round(value, 2)) >= 10:
        return f"{value:.1f}{unit}"
    return f"{value:.2f}{unit}"


def fmt_num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.{digits}f}"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def as_table(text: str) -> Table:
    """A table the console module drew with `grid` (one definition of each of the draft's tables), as cells for a
    suite or a report."""
    lines = text.splitlines()
    cells = [[c.strip() for c in ln.strip().strip("|").split(" | ")] for ln in lines if ln.startswith("|")]
    caption = lines[-1].strip() if lines and not lines[-1].startswith(("|", "+")) else ""
    return Table(caption=caption, headers=cells[0], rows=cells[1:])
