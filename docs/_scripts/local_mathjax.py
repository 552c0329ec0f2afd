"""A local copy of MathJax for the documentation, so formulas render offline.

Sphinx's default loads MathJax from a CDN: opened without network, the method
page then shows raw TeX.  The site instead serves one pinned MathJax build
from its own ``_static/mathjax`` folder.  The file is not committed: it is
taken once from the npm registry's tarball of :data:`VERSION`, checked
against the registry's published SHA-512 integrity value, and kept in
``docs/_static/mathjax`` (ignored by git) for later builds.

``tex-svg.js`` is the single-file build: its SVG output carries the glyph
outlines itself, so no font files have to be fetched when a page is read.

Offline build machines can place the file by hand (``npm pack mathjax@3.2.2``
and copy ``package/es5/tex-svg.js``), or point :envvar:`LYAPAX_MATHJAX_TGZ` at
a downloaded tarball; it is checked the same way.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import urllib.request
from pathlib import Path

VERSION = "3.2.2"
TARBALL = f"https://registry.npmjs.org/mathjax/-/mathjax-{VERSION}.tgz"
# From `npm view mathjax@3.2.2 dist.integrity`.
INTEGRITY = (
    "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/"
    "O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="
)
MEMBER = "package/es5/tex-svg.js"
# Relative to html_static_path, as Sphinx's mathjax_path expects.
STATIC_PATH = "mathjax/tex-svg.js"
_MAX_TARBALL = 64 * 1024 * 1024


class MathJaxError(RuntimeError):
    """The local MathJax copy could not be made; the message says what to do."""


def _checked(data: bytes, source: str) -> bytes:
    digest = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if f"sha512-{digest}" != INTEGRITY:
        raise MathJaxError(
            f"{source}: SHA-512 does not match the npm registry's integrity value "
            f"for mathjax {VERSION}; refusing to use it"
        )
    return data


def _tarball() -> tuple[bytes, str]:
    local = os.environ.get("LYAPAX_MATHJAX_TGZ")
    if local:
        path = Path(local)
        return _checked(path.read_bytes(), str(path)), str(path)
    try:
        with urllib.request.urlopen(TARBALL, timeout=60) as response:
            data = response.read(_MAX_TARBALL + 1)
    except OSError as error:
        raise MathJaxError(
            f"could not download {TARBALL} ({error}); without network, set "
            "LYAPAX_MATHJAX_TGZ to a copy of that tarball"
        ) from error
    if len(data) > _MAX_TARBALL:
        raise MathJaxError(f"{TARBALL}: larger than {_MAX_TARBALL} bytes")
    return _checked(data, TARBALL), TARBALL


def ensure(static_dir: Path) -> str:
    """Make sure ``static_dir/mathjax/tex-svg.js`` exists; return its Sphinx path."""
    target = static_dir / STATIC_PATH
    if target.is_file() and target.stat().st_size > 0:
        return STATIC_PATH
    data, source = _tarball()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        try:
            member = archive.extractfile(MEMBER)
        except KeyError:
            member = None
        if member is None:
            raise MathJaxError(f"{source} holds no {MEMBER}")
        script = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".js.partial")
    partial.write_bytes(script)
    partial.replace(target)  # never a half-written script for a later build
    return STATIC_PATH
