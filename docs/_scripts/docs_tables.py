"""Tables generated while the documentation builds.

* ``validation_table.md``: small oracle runs, computed now with the lyapax
  being documented, each compared with an exact or structural reference.  A
  result outside its tolerance stops the build, so the page cannot show a
  failing row as if it passed.
* ``benchmark_scripts.md``: what each script in ``benchmarks/`` measures
  (the first line of its docstring) and the command that reproduces it.

Run on its own with ``python docs/_scripts/docs_tables.py OUTDIR`` to see the
tables without building the site.
"""

from __future__ import annotations

import ast
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Oracle:
    """One row: a quantity lyapax computes and the value theory gives."""

    system: str
    quantity: str
    reference: str  # where the known value comes from
    known: float
    tolerance: float
    why: str  # what limits the agreement at this run length
    compute: Callable[[], float]


def _oracles() -> list[Oracle]:
    import jax

    jax.config.update("jax_enable_x64", True)  # the table is about float64
    import jax.numpy as jnp
    from scipy.special import lambertw

    from lyapax import lyapunov_spectrum, ode_problem
    from lyapax.dde import dde_problem, lyapunov_spectrum_dde
    from lyapax.systems import (
        henon_map,
        kuramoto_network,
        linear_scalar_dde,
        linear_system,
        logistic_map,
        lorenz,
        lorenz96,
        tent_map,
    )

    cache: dict[str, np.ndarray] = {}

    def once(key: str, run: Callable[[], object]) -> np.ndarray:
        # Several rows read the same run (e.g. Lorenz's sum and its exponents).
        if key not in cache:
            cache[key] = np.asarray(run().exponents)
        return cache[key]

    a_lin = np.array([[-0.2, 2.0, 0.3], [-2.0, -0.2, 0.0], [0.0, 0.0, -0.9]])
    eig_lin = np.sort(np.linalg.eigvals(a_lin).real)[::-1]

    def linear():
        return lyapunov_spectrum(
            ode_problem(linear_system(a_lin), jnp.ones(3), 0.01),
            n_steps=40_000,
            renorm_every=10,
            t_transient=20.0,
        )

    def lorenz_run():
        return lyapunov_spectrum(
            ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), 0.01),
            n_steps=100_000,
            renorm_every=10,
            t_transient=50.0,
        )

    def henon():
        return lyapunov_spectrum(
            henon_map(), jnp.array([0.1, 0.1]), dt=1.0, n_steps=100_000,
            t_transient=100,
        )  # fmt: skip

    def kuramoto_sync():
        problem = kuramoto_network(
            12, omega=0.3, K=1.5, theta0=jnp.full(12, 0.7), dt=0.01
        )
        return lyapunov_spectrum(
            problem, n_steps=1000, k=2, renorm_every=10, t_transient=5.0
        )

    def scalar_dde():
        problem = dde_problem(
            linear_scalar_dde(1.0), 1.0, 0.317, 0.01, integrator="rk4",
            interpolate=True,
        )  # fmt: skip
        return lyapunov_spectrum_dde(
            problem, n_steps=2000, k=1, renorm_every=10, t_transient=10.0
        )

    def l96():
        x0 = 8.0 * jnp.ones(8) + 0.01 * jnp.arange(8)
        return lyapunov_spectrum(
            ode_problem(lorenz96(F=8.0), x0, 0.01),
            n_steps=20_000,
            renorm_every=10,
            t_transient=20.0,
        )

    sigma, beta = 10.0, 8.0 / 3.0
    lam = {
        "linear": lambda: once("linear", linear),
        "lorenz": lambda: once("lorenz", lorenz_run),
        "henon": lambda: once("henon", henon),
    }
    linear_rows = [
        Oracle(
            "linear ODE, eigenvalues -0.2 ± 2i, -0.9",
            f"λ{i + 1}",
            f"Re of eigenvalue {i + 1} of A (sorted by real part)",
            float(eig_lin[i]),
            5e-3,
            "a frame-alignment offset that decays like 1/T (T = 400, RK4, dt = 0.01)",
            lambda i=i: lam["linear"]()[i],
        )
        for i in (0, 2)
    ]
    return [
        *linear_rows,
        Oracle(
            "tent map",
            "λ1",
            "|f'| = 2 everywhere, so exactly ln 2",
            float(np.log(2.0)),
            1e-12,
            "rounding",
            lambda: np.asarray(
                lyapunov_spectrum(
                    tent_map(), jnp.array([0.1234]), dt=1.0, n_steps=5000
                ).exponents
            )[0],
        ),
        Oracle(
            "logistic map, r = 4",
            "λ1",
            "conjugate to the tent map, so ln 2",
            float(np.log(2.0)),
            1e-2,
            "the statistical error, ~σ/√N for N = 2·10⁵ iterations",
            lambda: np.asarray(
                lyapunov_spectrum(
                    logistic_map(4.0),
                    jnp.array([0.3]),
                    dt=1.0,
                    n_steps=200_000,
                    t_transient=100,
                ).exponents
            )[0],  # fmt: skip
        ),
        Oracle(
            "Hénon map, a = 1.4, b = 0.3",
            "λ1 + λ2",
            "|det J| = b everywhere, so exactly ln 0.3",
            float(np.log(0.3)),
            1e-10,
            "rounding",
            lambda: lam["henon"]().sum(),
        ),
        Oracle(
            "Hénon map, a = 1.4, b = 0.3",
            "λ1",
            "no closed form; literature value 0.419",
            0.419,
            1e-2,
            "the statistical error of 10⁵ iterations",
            lambda: lam["henon"]()[0],
        ),
        Oracle(
            "Lorenz, σ = 10, ρ = 28, β = 8/3",
            "λ1 + λ2 + λ3",
            "the divergence is constant, -(σ + 1 + β)",
            -(sigma + 1.0 + beta),
            2e-4,
            "the RK4 truncation error at dt = 0.01 (order dt⁴)",
            lambda: lam["lorenz"]().sum(),
        ),
        Oracle(
            "Lorenz, σ = 10, ρ = 28, β = 8/3",
            "λ1",
            "no closed form; literature value 0.906",
            0.906,
            3e-2,
            "the statistical error of a run of T = 1000 (RK4, dt = 0.01)",
            lambda: lam["lorenz"]()[0],
        ),
        Oracle(
            "Lorenz, σ = 10, ρ = 28, β = 8/3",
            "λ2",
            "the flow direction of an autonomous flow: exactly 0",
            0.0,
            3e-2,
            "the statistical error of a run of T = 1000 (RK4, dt = 0.01)",
            lambda: lam["lorenz"]()[1],
        ),
        Oracle(
            "Lorenz-96, N = 8, F = 8",
            "λ1 + … + λ8",
            "the divergence is constant, -N",
            -8.0,
            1e-4,
            "the RK4 truncation error at dt = 0.01",
            lambda: once("l96", l96).sum(),
        ),
        Oracle(
            "Kuramoto, 12 identical nodes in sync, K = 1.5",
            "λ2",
            "the Jacobian at sync has eigenvalues 0 and -K (N - 1 times)",
            -1.5,
            1e-4,
            "the gap between the Heun map's exponent and the flow's, "
            "~h²K³/6 at h = 0.01",
            lambda: once("kur", kuramoto_sync)[1],
        ),
        Oracle(
            "linear scalar DDE x' = -x(t - 0.317)",
            "λ1",
            "rightmost characteristic root, Re W₀(-aτ)/τ (Lambert W)",
            float((lambertw(-0.317, k=0) / 0.317).real),
            1e-6,
            "the discretisation error of RK4 with Hermite-interpolated "
            "history at dt = 0.01",
            lambda: np.asarray(scalar_dde().exponents)[0],
        ),
    ]


def _table_row(cells) -> str:
    """A Markdown table row; a literal ``|`` (as in ``|det J|``) is escaped."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def validation_table() -> str:
    """Run every oracle and return the Markdown table (raises on a failure)."""
    lines = [
        "| system | quantity | known value | lyapax | error (tolerance) |",
        "|---|---|---|---|---|",
    ]
    notes = []
    failures = []
    start = time.perf_counter()
    for number, row in enumerate(_oracles(), start=1):
        got = float(row.compute())
        error = abs(got - row.known)
        if not error <= row.tolerance:
            failures.append(f"{row.system} {row.quantity}: {got} vs {row.known}")
        cells = (
            f"{row.system} [{number}]",
            row.quantity,
            f"{row.known:.10g}",
            f"{got:.10g}",
            f"{error:.1e} ({row.tolerance:.0e})",
        )
        lines.append(_table_row(cells))
        notes.append(
            f"{number}. {row.system}, {row.quantity}: {row.reference}; "
            f"the tolerance allows for {row.why}."
        )
    if failures:
        raise RuntimeError("validation oracles failed: " + "; ".join(failures))
    seconds = time.perf_counter() - start
    import jax

    lines += ["", "Where each known value comes from:", "", *notes, ""]
    lines.append(
        f"Computed while this page was built ({seconds:.0f} s, jax "
        f"{jax.__version__}, backend {jax.default_backend()}, float64)."
    )
    return "\n".join(lines) + "\n"


def benchmark_scripts_table(root: Path) -> str:
    """One row per script in ``benchmarks/``: its docstring's first line and command."""
    lines = ["| command | what it measures |", "|---|---|"]
    for path in sorted((root / "benchmarks").glob("[!_]*.py")):  # _x.py: helpers
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        summary = doc.strip().splitlines()[0] if doc.strip() else ""
        rel = path.relative_to(root).as_posix()
        lines.append(_table_row((f"`python {rel}`", summary)))
    return "\n".join(lines) + "\n"


def plugin_options_table() -> str:
    """The plugin's command-line options and ini keys, from its own parser.

    The plugin's ``pytest_addoption`` fills a fresh pytest parser, so the
    table lists exactly what ``pytest`` accepts, with the help text users see.
    """
    from _pytest.config.argparsing import Parser  # no public way to do this

    from pytest_lyapax import plugin

    parser = Parser(_ispytest=True)
    plugin.pytest_addoption(parser)
    rows = ["| option | meaning |", "|---|---|"]
    for group in parser._groups:
        for option in group.options:
            attrs = option.attrs()
            names = ", ".join(option.names())
            metavar = attrs.get("metavar")
            flag = f"`{names}={metavar}`" if metavar else f"`{names}`"
            help_text = " ".join(str(attrs.get("help", "")).replace("%%", "%").split())
            rows.append(_table_row((flag, help_text)))
    rows += ["", "| ini key | meaning |", "|---|---|"]
    for name, spec in parser._inidict.items():
        rows.append(_table_row((f"`{name}`", " ".join(str(spec[0]).split()))))
    return "\n".join(rows) + "\n"


def plugin_markers_table(root: Path) -> str:
    """The plugin's markers as ``pytest --markers`` prints them."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"],
        cwd=root / "docs",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = ["| marker | meaning |", "|---|---|"]
    for line in out.splitlines():
        if line.startswith("@pytest.mark.jax_"):
            signature, _, meaning = line.partition(": ")
            rows.append(_table_row((f"`{signature}`", meaning)))
    if len(rows) == 2:
        raise RuntimeError("pytest --markers listed no pytest_lyapax marker")
    return "\n".join(rows) + "\n"


# What each field of the report's ``pytest_lyapax`` key means.  The table on
# the plugin page lists the fields of a real report; a field missing here is
# shown as undocumented, so a new field cannot go unnoticed.
REPORT_FIELDS = {
    "schema": "version of this key's layout",
    "plugin_version": "version of the pytest-lyapax that wrote the report",
    "complete": "false when a backend was partial, interrupted or crashed",
    "backends": "one entry per requested backend, in run order (fields below)",
    "run_order": "backend labels in the order they ran",
    "crossovers": "per sized benchmark: where one backend overtakes another",
    "figure": "file name of the figure drawn from this report",
    "noise_test": "the test behind faster / within noise: name, alpha, "
    "min_effect, min_rounds",
    "dispatch_only": "benchmarks whose result held no JAX array (timed by "
    "dispatch only)",
    "comparison": "with --jax-compare: gates, per-backend machine match, "
    "whether the gate was refused, regressions",
    "cost_model": "per sized benchmark: t(n) = a + b*n^p fitted per backend "
    "(a, p, bootstrap intervals, or why it does not fit) and the predicted "
    "crossover next to the measured one",
    "backends[].label": "the label given to --jax-backend",
    "backends[].platform": "the JAX_PLATFORMS value its worker ran with",
    "backends[].expected_backend": "what jax.default_backend() had to return",
    "backends[].status": "ok, unavailable, or how the run ended for it",
    "backends[].reason": "why it is not ok (the probe's or the worker's words)",
    "backends[].device": "jax.devices()[0].device_kind in its worker",
    "backends[].device_count": "number of devices its worker saw",
    "backends[].jax_version": "jax version in its worker",
    "backends[].jaxlib_version": "jaxlib version in its worker",
    "backends[].jax_backend": "jax.default_backend() in its worker",
    "backends[].outcomes": "test outcomes counted per kind (passed, skipped, ...)",
    "backends[].crashes": "worker crashes, with their reasons",
    "backends[].n_benchmarks": "number of timings it contributed",
}


def report_fields_table(report_path: Path) -> str:
    """The fields of a real report's ``pytest_lyapax`` key, with meanings."""
    import json

    key = json.loads(report_path.read_text())["pytest_lyapax"]
    found = [(name, value) for name, value in key.items()]
    if key.get("backends"):
        merged: dict = {}
        for backend in key["backends"]:
            for name, value in backend.items():
                merged.setdefault(name, value)
        found += [(f"backends[].{name}", value) for name, value in merged.items()]
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, value in found:
        meaning = REPORT_FIELDS.get(name, "(not described yet)")
        rows.append(_table_row((f"`{name}`", type(value).__name__, meaning)))
    return "\n".join(rows) + "\n"


def report_excerpt(report_path: Path) -> str:
    """One benchmark entry and the plugin's key from a real report, as JSON."""
    import json

    report = json.loads(report_path.read_text())
    entry = dict(report["benchmarks"][0])
    entry["stats"] = {
        k: entry["stats"][k]
        for k in ("min", "median", "iqr", "rounds")
        if k in entry["stats"]
    }
    excerpt = {
        "machine_info": {"node": report["machine_info"]["node"], "...": "..."},
        "commit_info": report.get("commit_info", {}),
        "benchmarks": [entry, "..."],
        "datetime": report["datetime"],
        "version": report["version"],
        "pytest_lyapax": report["pytest_lyapax"],
    }
    return "```json\n" + json.dumps(excerpt, indent=2) + "\n```\n"


def gpu_explanation(report_path: Path, only: tuple[str, ...] = ()) -> str:
    """The GPU page's reading of a stored report (``gpu_explain.py``)."""
    from gpu_explain import explanation

    return explanation(report_path, only)


# The TPU v5e section of the GPU page: the main job measured on the lent chip.
TPU_REPORT = Path("docs") / "_static" / "measured" / "tpu-v5e" / "benchmark.json"
TPU_SERIES = ("test_kuramoto_dense", "test_lorenz_rho_sweep", "test_rnn_driven")


def write_generated_pages(outdir: Path, root: Path) -> None:
    """Write the generated Markdown fragments into ``outdir``."""
    outdir.mkdir(parents=True, exist_ok=True)
    pieces = {
        "benchmark_scripts.md": benchmark_scripts_table(root),
        "validation_table.md": validation_table(),
        "plugin_options.md": plugin_options_table(),
        "plugin_markers.md": plugin_markers_table(root),
        "report_fields.md": report_fields_table(
            root / "docs" / "_static" / "gpu_acceleration_reference.json"
        ),
        "report_excerpt.md": report_excerpt(
            root / "docs" / "_static" / "gpu_acceleration_reference.json"
        ),
        "gpu_explained.rst": gpu_explanation(
            root / "docs" / "_static" / "gpu_acceleration_reference.json"
        ),
        "tpu_explained.rst": gpu_explanation(root / TPU_REPORT, TPU_SERIES),
    }
    for name, text in pieces.items():
        target = outdir / name
        # Rewrite only on change, so Sphinx does not rebuild pages needlessly.
        if not target.exists() or target.read_text() != text:
            target.write_text(text)


if __name__ == "__main__":
    here = Path(__file__).resolve()
    write_generated_pages(Path(sys.argv[1]), here.parents[2])
