"""Internal links and images of the built documentation resolve.

The site is built by ``python -m sphinx -W -b html docs docs/_build/html``
(CI does it in ``.ci/run``); without a build the site check is skipped, while
the checker itself is always tested on a small hand-made site.
"""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "docs" / "_build" / "html"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checker():
    return _load("check_links", ROOT / "docs" / "check_links.py")


def test_api_reference_covers_every_public_module():
    documented = _load("api_pages", ROOT / "docs" / "_scripts" / "api_pages.py")
    public = _load("test_public_api", ROOT / "tests" / "test_public_api.py")
    assert sorted(documented.PUBLIC_MODULES) == sorted(public.PUBLIC_MODULES)


def test_checker_finds_broken_links_images_and_anchors(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "img.png").write_bytes(b"\x89PNG")
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#here">ok</a> <img src="img.png">'
        '<a href="https://example.org/x">external</a>'
        '<a href="missing.html">gone</a> <img src="sub/none.png">'
        '<a href="sub/page.html#nowhere">bad anchor</a> <a href="#top">self</a>'
        '<div id="top"></div>'
    )
    (tmp_path / "sub" / "page.html").write_text(
        '<h1 id="here">x</h1><a href="../index.html">up</a>'
    )
    checked, problems = _checker().check_site(tmp_path)
    assert checked == 7
    assert sorted(p.split(" -> ")[1] for p in problems) == [
        "missing.html (no such file)",
        "sub/none.png (no such file)",
        "sub/page.html#nowhere (no such anchor)",
    ]


@pytest.mark.skipif(
    not (SITE / "index.html").is_file(),
    reason="docs not built (python -m sphinx -W -b html docs docs/_build/html)",
)
def test_built_site_has_no_broken_internal_links_or_images():
    checked, problems = _checker().check_site(SITE)
    assert checked > 0
    assert problems == []
    # The gallery and the stored GPU figure are part of the site.
    assert (SITE / "auto_examples" / "index.html").is_file()
    assert (SITE / "_images" / "gpu_acceleration_reference.png").is_file()


def _math_checker():
    return _load("check_math", ROOT / "docs" / "check_math.py")


def test_math_check_counts_typeset_formulas_and_raw_tex():
    scan = _math_checker()._MathScan()
    scan.feed(
        '<p><span class="math notranslate"><mjx-container><mjx-math/></mjx-container>'
        '</span> and <span class="math">\\(x^2\\)</span></p>'
        '<div class="math"><mjx-container/></div><script>var a = "\\(";</script>'
    )
    assert (scan.math, scan.typeset) == (3, 2)
    assert scan.raw == ["\\(x^2\\)"]


def test_local_mathjax_refuses_a_tarball_with_the_wrong_digest(tmp_path, monkeypatch):
    local = _load("local_mathjax", ROOT / "docs" / "_scripts" / "local_mathjax.py")
    fake = tmp_path / "mathjax.tgz"
    fake.write_bytes(b"not the registry's tarball")
    monkeypatch.setenv("LYAPAX_MATHJAX_TGZ", str(fake))
    with pytest.raises(local.MathJaxError, match="SHA-512"):
        local.ensure(tmp_path / "_static")
    assert not (tmp_path / "_static").exists()
