"""The module trees of docs/architecture.md, as the layout tests read them."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def listed_modules(heading: str) -> dict[str, set[str]]:
    """The ``.py`` names in the ``text`` block of the section ``## heading``,
    by folder: a line that starts with ``name/`` opens the folder ``name``
    (continuation lines stay in it); one that starts with ``name.py`` is a
    top-level module (folder ``""``)."""
    page = PAGE.read_text()
    section = page.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    tree = re.search(r"```text\n(.*?)```", section, flags=re.S).group(1)
    listed: dict[str, set[str]] = {}
    folder = None
    for line in tree.splitlines():
        head = re.match(r"(\w+)/", line)
        if head:
            folder = head.group(1)
        elif re.match(r"\w+\.py", line):
            folder = ""
        listed.setdefault(folder, set()).update(re.findall(r"(\w+)\.py", line))
    return listed


def diagram_layers() -> list[list[str]]:
    """The layers of the ``## Layers`` diagram, top first: each line's leading
    names (``core.py`` -> ``core``, ``sweep/`` -> ``sweep``,
    ``lyapax/__init__.py`` -> ``lyapax``); the rest of a line describes it."""
    page = PAGE.read_text()
    section = page.split("## Layers\n", 1)[1].split("\n## ", 1)[0]
    tree = re.search(r"```text\n(.*?)```", section, flags=re.S).group(1)
    layers = []
    for line in tree.splitlines():
        names = []
        for token in line.split():
            if token == "lyapax/__init__.py":
                names.append("lyapax")
            elif m := re.fullmatch(r"(\w+)(?:\.py|/)", token):
                names.append(m.group(1))
            else:
                break
        if names:
            layers.append(names)
    return layers
