"""Check a built HTML site for broken internal links and missing images.

    python docs/check_links.py [docs/_build/html]

Every ``href`` and ``src`` in every ``.html`` file is resolved against the
file's own location.  A link to another scheme (``https:``, ``mailto:``,
``data:``) is external and not followed (the build machine may be offline);
everything else must name an existing file, and a ``#fragment`` must name an
``id`` (or ``<a name>``) in the target page.  Exit status 1 lists each
problem as ``page: attribute -> target (reason)``.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LINK_ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src"}


class _PageScan(HTMLParser):
    """Collects a page's link targets and its anchors."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (tag.attribute, target)
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name" if tag == "a" else "id"):
            if values.get(key):
                self.anchors.add(values[key])
        wanted = LINK_ATTRIBUTES.get(tag)
        if wanted and values.get(wanted):
            self.links.append((f"{tag}.{wanted}", values[wanted]))
        if tag == "img" and values.get("srcset"):
            for candidate in values["srcset"].split(","):
                if candidate.strip():
                    self.links.append(("img.srcset", candidate.split()[0]))


def _scan(page: Path, cache: dict[Path, _PageScan]) -> _PageScan:
    if page not in cache:
        scan = _PageScan()
        scan.feed(page.read_text(encoding="utf-8", errors="replace"))
        cache[page] = scan
    return cache[page]


def check_site(root: Path) -> tuple[int, list[str]]:
    """Return (number of internal links checked, problems found)."""
    root = root.resolve()
    cache: dict[Path, _PageScan] = {}
    problems: list[str] = []
    checked = 0
    for page in sorted(root.rglob("*.html")):
        for where, target in _scan(page, cache).links:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc:
                continue  # external: not reachable from an offline builder
            checked += 1
            name = page.relative_to(root).as_posix()
            path = unquote(parts.path)
            dest = (page.parent / path).resolve() if path else page
            if dest.is_dir():
                dest = dest / "index.html"
            if not dest.is_file():
                problems.append(f"{name}: {where} -> {target} (no such file)")
                continue
            if root not in dest.parents:
                problems.append(f"{name}: {where} -> {target} (outside the site)")
                continue
            fragment = unquote(parts.fragment)
            if fragment and dest.suffix == ".html":
                if fragment not in _scan(dest, cache).anchors:
                    problems.append(f"{name}: {where} -> {target} (no such anchor)")
    return checked, problems


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).parent / "_build" / "html"
    if not (root / "index.html").is_file():
        print(f"{root} holds no built site (index.html missing)", file=sys.stderr)
        return 2
    checked, problems = check_site(root)
    for problem in problems:
        print(problem)
    print(f"{checked} internal links and images checked, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
