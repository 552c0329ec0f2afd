"""The module trees of docs/architecture.md, as the layout tests read them."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


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
