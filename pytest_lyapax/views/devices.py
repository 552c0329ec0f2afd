"""``scaling.png``: speedup and efficiency against the device count.

One line per test, split label and size (``report/devices.py`` rows), the
ideal (speedup ``p``, efficiency 1) dashed; each line's legend says what its
devices run on, so CPU devices that share a few cores are not read as more
processors.  Drawn from the report alone (matplotlib's object API, Agg
canvas), so ``pytest-lyapax html`` redraws the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_lyapax.views.figure import png_bytes


def render_scaling_png(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The figure as PNG bytes, from :func:`scaling.scaling_rows` rows."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lines: dict[tuple[str, str, str, Any], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (row["test"], row["backend"], row["scaling"], row["size"])
        lines.setdefault(key, []).append(row)
    fig = Figure(figsize=(10.0, 4.6))
    FigureCanvasAgg(fig)
    speed, eff = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    counts = sorted({int(r["devices"]) for r in rows})
    speed.plot(counts, counts, "--", color="0.6", label="ideal")
    eff.plot(counts, [1.0] * len(counts), "--", color="0.6", label="_nolegend_")
    for i, ((test, backend, mode, size), points) in enumerate(lines.items()):
        done = [r for r in points if r["efficiency"] is not None]
        if not done:
            continue
        ps = [int(r["devices"]) for r in done]
        where = f"size {size}" if size is not None else "unsized"
        label = f"{test} {backend} {mode} {where}; p={ps[-1]}: {done[-1]['on']}"
        color = f"C{i % 10}"
        speed.plot(ps, [r["speedup"] for r in done], "o-", color=color, label=label)
        eff.plot(ps, [r["efficiency"] for r in done], "o-", color=color)
    for ax, name in ((speed, "speedup (t1 / tp; weak: p t1 / tp)"), (eff, "")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(p) for p in counts])
        ax.set_xlabel("devices p")
        ax.grid(True, alpha=0.3)
        if name:
            ax.set_ylabel(name)
    eff.set_ylabel("efficiency (t1 / (p tp); weak: t1 / tp)")
    eff.set_ylim(bottom=0)
    fig.legend(loc="lower center", fontsize=7, ncol=1, frameon=False)
    fig.subplots_adjust(bottom=0.12 + 0.05 * min(len(lines) + 1, 8), wspace=0.3)
    return png_bytes(fig)
