"""The command line and figure output shared by the examples.

Not an example itself: the leading underscore keeps it out of the gallery
(``ignore_pattern`` in docs/conf.py), which CI builds, running every
example whose name starts with two digits. An example run as ``python
examples/NN_name.py`` imports it from its own folder; the gallery runs the
examples with that folder on ``sys.path``.
"""

import argparse
import tempfile
from pathlib import Path

FIGURE_DIR = Path(tempfile.gettempdir()) / "lyapax-examples"


def example_args(
    description: str,
    figure: str,
    *,
    quick_help: str = "short run (CI, docs)",
) -> argparse.Namespace:
    """``--quick`` (a short run for CI and the docs) and ``--out`` (the
    figure's path, default ``FIGURE_DIR / figure``); arguments this parser
    does not know (the gallery's, pytest's) are ignored."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument(
        "--out", type=Path, default=FIGURE_DIR / figure, help="figure path (PNG)"
    )
    args, _ = parser.parse_known_args()
    return args


def save_figure(fig, path: Path, dpi: int = 110) -> None:
    """Write ``fig`` to ``path`` (its folder created) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    print(f"figure written to {path}")
