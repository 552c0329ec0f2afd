"""Sphinx configuration for the lyapax documentation.

Build (warnings are errors)::

    python -m sphinx -W -b html docs docs/_build/html

Add ``-D plot_gallery=0`` to render the gallery without running the examples.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from datetime import date
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this checkout, not an installed copy
sys.path.insert(0, str(DOCS / "_scripts"))

os.environ.setdefault("MPLBACKEND", "Agg")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # as the examples and tests do

import api_pages  # noqa: E402
import local_mathjax  # noqa: E402
from docs_tables import write_generated_pages  # noqa: E402

import lyapax  # noqa: E402

project = "lyapax"
author = "the lyapax developers"
copyright = f"{date.today().year}, {author}"
release = lyapax.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# Option names such as --jax-backend must keep both hyphens.
smartquotes = False

html_theme = "furo"
html_title = f"lyapax {release}"
html_static_path = ["_static"]
# MathJax from the site itself (a pinned, checked copy), not from a CDN: the
# formulas must render with no network (see _scripts/local_mathjax.py).
mathjax_path = local_mathjax.ensure(DOCS / "_static")
html_show_sourcelink = False

autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes as fields: a property named there is then documented only once.
napoleon_use_ivar = True
# Return/field names such as ``exponents`` are plain words, not references.
nitpicky = False


# --------------------------------------------------------------------------
# Gallery: every script in examples/ becomes a page.  The examples accept
# ``--quick``, which keeps the whole gallery inside the CI time budget; CI
# builds it (.ci/run), so this is where the examples are run there.
# Example 14 times CPU against GPU in fresh processes; the docs builder has
# no GPU and must not benchmark, so it is rendered but not run, and its page
# shows the stored reference measurement (see GPU_REFERENCE below).
# Example 36 starts copies of itself as the processes of a distributed job,
# which a script executed inside the docs builder cannot do: rendered, not
# run (CI runs it in its own --quick line with the other examples).
# --------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/\d+_(?!gpu_acceleration|several_processes)[^/]*\.py$",
    # Matched against the bare file name: _common.py is the examples' helper.
    "ignore_pattern": r"(^_|/_|__init__\.py)",
    "reset_argv": "gallery_argv.quick_argv",  # a name keeps the config picklable
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "show_memory": False,
    "matplotlib_animations": False,
    # The examples run in worker processes, one per core (at most 4): most of
    # an example's quick run is single-threaded XLA compilation.
    "parallel": max(1, min(4, os.cpu_count() or 1)),
}


# --------------------------------------------------------------------------
# Stored GPU reference measurement: its caption is read from the JSON that
# the figure was drawn from, so the page cannot disagree with the data.
# --------------------------------------------------------------------------
GPU_REFERENCE = json.loads(
    (DOCS / "_static" / "gpu_acceleration_reference.json").read_text()
)


def _caption_parts(report: dict) -> dict[str, str]:
    """Machine, jax version, date and GPU status of a pytest_lyapax report."""
    machine = report["machine_info"]
    cpu = machine.get("cpu", {})
    backends = {b["label"]: b for b in report["pytest_lyapax"]["backends"]}
    jax_versions = sorted({b["jax_version"] for b in backends.values()})
    gpu = backends.get("gpu", {})
    if gpu.get("status") == "ok":
        note = f"Both backends were measured; the GPU is a {gpu['device']}."
    else:
        note = (
            f"The GPU was {gpu.get('status', 'not requested')} on that machine "
            f"({gpu.get('reason') or 'no reason recorded'}): only the CPU curve is "
            "a measurement, and no GPU timing is drawn."
        )
    return {
        "gpu_ref_machine": (
            f"{machine['node']} ({cpu.get('brand_raw', machine['machine'])}, "
            f"{cpu.get('count', '?')} cores, {machine['system']})"
        ),
        "gpu_ref_jax": ", ".join(jax_versions),
        "gpu_ref_date": report["datetime"][:10],
        "gpu_ref_note": note,
    }


def _rst_escape(text: str) -> str:
    """Literal text for a substitution (a reason may hold ``*`` or ``_``)."""
    for char in "\\*`|_":
        text = text.replace(char, "\\" + char)
    return text


rst_epilog = "\n".join(
    f".. |{name}| replace:: {_rst_escape(text)}"
    for name, text in _caption_parts(GPU_REFERENCE).items()
)

# Tables on the validation and performance pages are written at build time.
write_generated_pages(DOCS / "_generated", ROOT)
# Stubs of objects that left the public API must not linger (and warn).
shutil.rmtree(DOCS / "api" / "generated", ignore_errors=True)
api_pages.write(DOCS)  # api.rst and api/*.rst: generated, not committed
autosummary_ignore_module_all = False  # a module page lists its __all__ only
