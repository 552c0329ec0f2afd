"""The terminal summary (text), ``summary.md`` (GitHub-flavoured markdown)
and ``report.html`` (one file).

All three render the sections of :func:`pytest_lyapax.views.explain.report_sections`;
none adds data.
Every string that comes from a report is untrusted: in markdown the
characters that would start formatting, a table cell or inline HTML are
escaped, in HTML everything goes through :func:`html.escape`.  The HTML page
loads nothing: its style is inline, its figure a ``data:`` PNG, it has no
script and no link to another host.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_lyapax.views import document
from pytest_lyapax.views.document import Figure, Lines, ReportView, Section, Table
from pytest_lyapax.views.explain import report_sections
from pytest_lyapax.views.tables import render_table

SUMMARY_NAME = "summary.md"
HTML_NAME = "report.html"
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")
_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.6em; text-align: left; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
ul { margin-top: 0.2em; }
img { max-width: 100%; border: 1px solid #ddd; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
""".strip()
_NUMERIC = re.compile(r"^[-+]?[0-9.]+(e[-+]?\d+)?( ?[a-zA-Z%]+)?x?$")


def md_escape(text: str) -> str:
    """Literal text in a markdown paragraph or table cell."""
    text = " ".join(str(text).split())  # no newline may end a table row
    text = html.escape(text, quote=False)  # no inline HTML
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_table(table: Table) -> list[str]:
    header = table.header if any(table.header) else ("", "")
    lines = [
        "| " + " | ".join(md_escape(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in table.rows]
    return lines


def render_markdown(sections: Sequence[Section]) -> str:
    """The sections as GitHub-flavoured markdown (figures are left out: a
    step summary cannot embed a local image)."""
    out: list[str] = []
    for i, section in enumerate(sections):
        out += [("# " if i == 0 else "## ") + md_escape(section.title), ""]
        for block in section.blocks:
            if isinstance(block, Table):
                out += [*_md_table(block), ""]
            elif isinstance(block, Lines) and block.lines:
                out += [f"- {md_escape(line)}" for line in block.lines] + [""]
    return "\n".join(out).rstrip() + "\n"


def text_lines(section: Section) -> list[str]:
    """A section's body as plain text, as the terminal shows it under its
    title (figures are left out)."""
    out: list[str] = []
    for block in section.blocks:
        if isinstance(block, Table):
            out += render_table(block.header, block.rows, block.left, block.ruled)
        elif isinstance(block, Lines):
            out += block.lines
    return out


def title_line(rule: str, title: str, width: int = 80) -> str:
    """``title`` centred in a line of ``rule``, as pytest's terminal writes
    a section title (``TerminalWriter.sep``) at ``width`` columns."""
    fill = rule * max((width - len(title) - 2) // (2 * len(rule)), 1)
    line = f"{fill} {title} {fill}"
    if len(line) + len(rule.rstrip()) <= width:
        line += rule.rstrip()
    return line


def render_text(sections: Sequence[Section], width: int = 80) -> str:
    """The sections as the terminal summary's text (``width`` columns)."""
    out: list[str] = []
    for section in sections:
        out += [title_line(section.rule, section.title, width), *text_lines(section)]
    return "\n".join(out) + "\n" if out else ""


def write_terminal(terminalreporter: Any, sections: Sequence[Section]) -> None:
    """The sections through pytest's terminal reporter (its width, colours)."""
    for section in sections:
        markup = {"red": True} if section.red else {}
        terminalreporter.write_sep(section.rule, section.title, **markup)
        for line in text_lines(section):
            terminalreporter.write_line(line)


def summary_text(view: ReportView, run: document.RunFacts | None = None) -> bytes:
    """The terminal summary of a report (``run``: the running session's
    facts; a saved report has none)."""
    return render_text(report_sections(view, run=run or document.RunFacts())).encode()


def _cell(text: str, tag: str = "td") -> str:
    cls = ' class="num"' if tag == "td" and _NUMERIC.match(text) else ""
    return f"<{tag}{cls}>{html.escape(text)}</{tag}>"


def _html_table(table: Table) -> list[str]:
    lines = ["<table>"]
    if any(table.header):
        lines.append("<tr>" + "".join(_cell(h, "th") for h in table.header) + "</tr>")
    lines += ["<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in table.rows]
    return [*lines, "</table>"]


def render_html(sections: Sequence[Section]) -> str:
    """The sections as one self-contained HTML page."""
    title = html.escape(sections[0].title if sections else "report")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # No request may leave the page, even if something slipped through.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">",
        f"<title>{title}</title>",
        f"<style>\n{_STYLE}\n</style>",
        "</head>",
        "<body>",
    ]
    for i, section in enumerate(sections):
        tag = "h1" if i == 0 else "h2"
        out.append(f"<section><{tag}>{html.escape(section.title)}</{tag}>")
        for block in section.blocks:
            if isinstance(block, Table):
                out += _html_table(block)
            elif isinstance(block, Lines) and block.lines:
                out.append("<ul>")
                out += [f"<li>{html.escape(line)}</li>" for line in block.lines]
                out.append("</ul>")
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png).decode("ascii")
                out.append(
                    f'<figure><img id="{block.ident}" alt="{html.escape(block.alt)}"'
                    f' src="data:image/png;base64,{data}"></figure>'
                )
        out.append("</section>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def summary_markdown(view: ReportView) -> bytes:
    """``summary.md`` of a report."""
    return render_markdown(report_sections(view)).encode()


def figure_of(view: ReportView) -> bytes | str:
    """The report's figure as PNG bytes, or why it could not be drawn."""
    try:
        return view.figure_png()
    except ImportError as exc:  # matplotlib is optional
        return f"{exc} (pip install matplotlib)"


def report_html(view: ReportView, figure: bytes | str | None = None) -> bytes:
    """``report.html`` of a report; ``figure`` as :func:`figure_of` gives it
    (drawn here when not given)."""
    if figure is None:
        figure = figure_of(view)
    sections = report_sections(view, figure=figure, machine=True)
    return render_html(sections).encode()


def outputs(
    data: Mapping[str, Any], figure: bytes | str | None = None
) -> dict[str, bytes]:
    """Both files of one report document, by file name."""
    view = document.view_of(data)
    return {SUMMARY_NAME: summary_markdown(view), HTML_NAME: report_html(view, figure)}
