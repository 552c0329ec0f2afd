"""Check that a built page's formulas render in a browser with no network.

    python docs/check_math.py docs/_build/html/method.html [--screenshot FILE]

Opens the page in headless Chromium with every host name unresolvable (so a
formula that needed a CDN would stay raw TeX), lets its scripts run, and reads
the resulting DOM.  Passes when MathJax typeset every ``math`` element of the
page (each holds an ``mjx-container``) and no unprocessed ``\\(`` or ``\\[``
delimiter is left in the text.  Exit status 1 says what was found; 2 means no
Chromium (``chromium`` or ``chromium-browser`` on PATH, or ``$CHROMIUM``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

# Flags for a closed network: no background connections, no name resolution.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


class _MathScan(HTMLParser):
    """Counts math elements, the typeset ones among them, and raw TeX text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.math = 0
        self.typeset = 0
        self.raw: list[str] = []
        self._stack: list[tuple[str, bool]] = []  # (tag, is a math element)
        self._skip = 0  # inside <script>/<style>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        is_math = tag in ("span", "div") and "math" in classes
        if is_math:
            self.math += 1
        if tag == "mjx-container" and any(m for _, m in self._stack):
            # Count each math element once, at its first container.
            for index in range(len(self._stack) - 1, -1, -1):
                name, flag = self._stack[index]
                if flag:
                    self._stack[index] = (name, False)
                    self.typeset += 1
                    break
        if tag in ("script", "style"):
            self._skip += 1
        self._stack.append((tag, is_math))

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            name, _ = self._stack.pop()
            if name in ("script", "style"):
                self._skip -= 1
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self._skip and re.search(r"\\[(\[]", data):
            self.raw.append(data.strip()[:80])


def chromium() -> str | None:
    """The Chromium executable, or None."""
    return (
        os.environ.get("CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )


def rendered_dom(page: Path, screenshot: Path | None, browser: str) -> str:
    """The page's DOM after its scripts ran, from headless Chromium."""
    with tempfile.TemporaryDirectory() as profile:
        common = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        common.append("--virtual-time-budget=20000")
        url = page.resolve().as_uri()
        dom = subprocess.run(
            [*common, "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        if screenshot is not None:
            subprocess.run(
                [*common, f"--screenshot={screenshot}", "--window-size=1200,1600", url],
                capture_output=True,
                timeout=120,
                check=True,
            )
    return dom


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--screenshot", type=Path, default=None)
    args = parser.parse_args(argv)
    browser = chromium()
    if browser is None:
        print("check_math: no chromium found (install Debian's chromium)")
        return 2
    scan = _MathScan()
    scan.feed(rendered_dom(args.page, args.screenshot, browser))
    problems = []
    if scan.math == 0:
        problems.append("the page holds no math element")
    if scan.typeset < scan.math:
        missing = scan.math - scan.typeset
        problems.append(f"{missing} of {scan.math} formulas not typeset")
    if scan.raw:
        problems.append(f"raw TeX left in the text, e.g. {scan.raw[0]!r}")
    if problems:
        print(f"{args.page}: " + "; ".join(problems))
        return 1
    shot = f", screenshot {args.screenshot}" if args.screenshot else ""
    print(f"{args.page}: {scan.math} formulas typeset offline{shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
