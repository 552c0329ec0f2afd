"""The terminal's own sections: where each backend ran, the live comparison,
how points were timed, and the run's facts (files written, verdicts).

:func:`~pytest_lyapax.views.explain.report_sections` places them among the
report's sections when it composes the terminal summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_lyapax.backends.labels import CRASHED, outcome_text
from pytest_lyapax.report import busy, details
from pytest_lyapax.report.compare import ComparisonResult
from pytest_lyapax.report.gates import refusal
from pytest_lyapax.report.precision import backend_precision
from pytest_lyapax.views import tables
from pytest_lyapax.views.document import Lines, ReportView, RunFacts, Section, Table


def variables(backend: Mapping[str, Any]) -> str:
    """A backend's own variables (``--jax-backend-env``) as ``VAR=VALUE``
    words; "" for none (or a report that holds something else there)."""
    env = backend.get("env")
    if not isinstance(env, Mapping):
        return ""
    return " ".join(f"{k}={v}" for k, v in env.items())


def backend_lines(view: ReportView) -> Section:
    """The terminal's backend table: where each ran, then why not ok."""
    rows: list[tuple[str, ...]] = []
    for b in view.backends:
        device = b.get("device") or ""
        if b.get("jax_version"):
            device += f", jax {b['jax_version']}"
        environment = f"JAX_PLATFORMS={b.get('platform')} {variables(b)}".strip()
        if b.get("gateway"):  # a backend on another host (remote.py)
            environment += f" @ {b.get('host') or '?'} ({b['gateway']})"
        outcomes = b.get("outcomes")
        tests = outcome_text(outcomes) if isinstance(outcomes, Mapping) else ""
        rows.append(
            (
                str(b["label"]),
                environment,
                str(b.get("status")),
                backend_precision(b) or "-",
                tests or "-",
                str(b.get("n_benchmarks")),
                device.strip(", ") or "-",
            )
        )
    header: tuple[str, ...] = (
        "backend",
        "environment",
        "status",
        "precision",
        "tests",
        "benchmarks",
        "device",
    )
    modes = details.rounds_modes(view.records)
    if modes:  # how the rounds were timed (--jax-sequential)
        header = (*header[:6], "rounds", header[6])
        rows = [(*row[:6], modes.get(row[0], "-"), row[6]) for row in rows]
    reasons = tuple(
        f"{b['label']}: {b['reason']}" for b in view.backends if b.get("reason")
    )
    return Section(
        "pytest-lyapax: backends",
        [Table(header, tuple(rows), left=len(header)), Lines(reasons)],
    )


def comparison_title(c: Mapping[str, Any]) -> str:
    title = f"comparison with {c.get('with')}"
    gates = c.get("gates")
    if isinstance(gates, list) and gates:
        title += f" (fail above {', '.join(map(str, gates))})"
    return title


def live_comparison(
    c: Mapping[str, Any], compared: ComparisonResult, refused: str | None
) -> Section:
    """The terminal's comparison: the values of both runs, as measured."""
    lines = tables.comparison_table(compared.comparisons, compared.thresholds)
    if not compared.comparisons:
        lines = ["no benchmark of this run appears in the saved run"]
    lines += tables.machine_lines(compared.machines)
    lines += busy.comparison_lines(compared.to_json(), "--jax-busy")
    if refused:
        lines.append(f"gate refused, the runs were measured apart: {refused}")
    elif compared.refusal():
        lines.append(f"measured apart (gated anyway): {compared.refusal()}")
    if compared.missing:
        lines.append(
            f"{len(compared.missing)} saved benchmark(s) missing from this run:"
        )
        lines += [f"  {name}" for name in compared.missing[:20]]
        if len(compared.missing) > 20:
            lines.append(f"  ... and {len(compared.missing) - 20} more")
    unjudged = [(c.fullname, w) for c in compared.comparisons for w in c.not_comparable]
    if unjudged:
        lines.append(f"{len(unjudged)} counter gate(s) could not judge:")
        lines += [f"  {name}: {why}" for name, why in unjudged[:20]]
    regressed = len(compared.regressions)
    if regressed:
        lines.append(f"{regressed} benchmark(s) regressed")
    return Section(comparison_title(c), [Lines(tuple(lines))])


def _listed(title: str, intro: str, names: object) -> Section | None:
    if not isinstance(names, list) or not names:
        return None
    return Section(title, [Lines((intro, *(f"  {n}" for n in names[:20])))])


def timing_notes(view: ReportView) -> list[Section]:
    """The terminal's warnings about how points were timed, or not."""
    points = view.key.get("points")
    points = (
        [p for p in points if isinstance(p, Mapping)]
        if isinstance(points, list)
        else []
    )
    notes = (
        _listed(
            "pytest-lyapax: timed by dispatch only",
            "these results had no JAX array to wait for, so only the dispatch was "
            "timed; return the arrays, or register the class as a pytree "
            "(jax.tree_util.register_dataclass, equinox.Module):",
            view.key.get("dispatch_only"),
        ),
        _listed(
            "pytest-lyapax: host arguments",
            "warning: timed with NumPy (host) arguments on a non-CPU backend, so "
            "every call includes the copy to the device; pass jax.device_put(x) "
            "to time the computation alone (or parametrize to time both):",
            details.host_argument_benchmarks(view.records),
        ),
        Section(
            "pytest-lyapax: sizes not timed",
            [
                Lines(
                    tuple(
                        f"{p.get('fullname')}: {p.get('status')}: {p.get('message')}"
                        for p in points[:20]
                    )
                )
            ],
        )
        if points
        else None,
    )
    return [n for n in notes if n is not None]


def run_sections(view: ReportView, run: RunFacts) -> list[Section]:
    """Files written and the verdicts of the run (a saved report: the crashed
    backends only)."""
    out = []
    if run.live and not view.records:
        lines: tuple[str, ...] = (
            f"no benchmark was measured: nothing written to {run.report_dir}",
        )
        out.append(Section("pytest-lyapax: reports", [Lines(lines)]))
    elif run.written or run.figure_error:
        lines = tuple(f"wrote {p}" for p in run.written)
        lines += (run.figure_error,) if run.figure_error else ()
        out.append(Section("pytest-lyapax: reports", [Lines(lines)]))
    if run.collection_errors:
        title = (
            f"Interrupted: {run.collection_errors} error(s) during collection; no "
            "test was run (--continue-on-collection-errors runs them)"
        )
        out.append(Section(title, rule="!"))
    gates = " ".join(f"--jax-compare-fail={t}" for t in run.gates)
    if run.gate_refused:
        why = f"the saved run was measured elsewhere: {run.gate_refused}"
        title = f"pytest-lyapax: {gates} refused (usage error): " + refusal(
            why, "--jax-compare-across-machines"
        )
        out.append(Section(title, rule="=", red=True))
    if run.gate_failures:
        title = f"pytest-lyapax: {gates} failed: {len(run.gate_failures)} problem(s)"
        lines = tuple(f"  {line}" for line in run.gate_failures[:20])
        out.append(Section(title, [Lines(lines)], "=", red=True))
    crashed = [str(b["label"]) for b in view.backends if b.get("status") == CRASHED]
    if crashed:
        title = f"pytest-lyapax: backend(s) crashed: {', '.join(crashed)}"
        out.append(Section(title, rule="=", red=True))
    if run.mismatched:
        title = (
            f"pytest-lyapax: code mismatch on {', '.join(run.mismatched)}: not run "
            f"(exit code {run.mismatch_exit}; --jax-allow-code-mismatch runs it "
            "anyway)"
        )
        out.append(Section(title, rule="=", red=True))
    return out
