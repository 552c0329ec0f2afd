"""The plugin's per-run state, kept on ``config.stash``.

One :class:`LyapaxSession` exists in every process of a run.  Its ``role`` says
which part that process plays:

``controller``  starts one xdist worker per runnable backend, merges results
                and writes the report; it never initialises JAX.
``worker``      runs the tests of exactly one backend (its ``own_label``).
``inprocess``   no xdist: runs the backend of the current process, skips others.
``collect``     ``--collect-only``/``--help`` and friends: parametrize only.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_lyapax.backends.labels import (
    MISMATCH,
    NOT_RUN,
    OK,
    RUNNABLE,
    UNAVAILABLE,
    Backend,
)
from pytest_lyapax.measuring.rounds import NoTurns, Turns
from pytest_lyapax.run import chip, devices
from pytest_lyapax.run.options import Settings
from pytest_lyapax.run.payload import settings_from_json, settings_to_json

if TYPE_CHECKING:
    from pytest_lyapax.run.budget import Limits

CONTROLLER, WORKER, INPROCESS, COLLECT = "controller", "worker", "inprocess", "collect"
WORKERINPUT_KEY = "pytest_lyapax"


@dataclass
class BackendState:
    """What is known about one backend in this run."""

    backend: Backend
    status: str = OK
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)

    @property
    def runnable(self) -> bool:
        return self.status in RUNNABLE

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.backend.label,
            "platform": self.backend.platform,
            **({"env": dict(self.backend.env)} if self.backend.env else {}),
            **({"rerun_of": self.backend.rerun_of} if self.backend.rerun_of else {}),
            # What --jax-precision asked; "precision" (from the probe's info,
            # below) is what the label computes in: {"dtype", "matmul"}.
            **(
                {"precision_asked": self.backend.precision}
                if self.backend.precision
                else {}
            ),
            **({"ab_of": self.backend.ab_of} if self.backend.ab_of else {}),
            **(
                {
                    "devices": self.backend.devices,
                    "devices_of": self.backend.devices_of,
                    **devices.hardware(self.backend, self.info),
                }
                if self.backend.devices
                else {}
            ),
            "expected_backend": self.backend.expected,
            "status": self.status,
            "reason": self.reason,
            **{k: v for k, v in self.info.items() if v is not None},
            "outcomes": dict(self.outcomes),
            "crashes": list(self.crashes),
        }


@dataclass
class LyapaxSession:
    """Settings, backend states and collected benchmark records of one run."""

    settings: Settings
    role: str
    states: dict[str, BackendState]
    own_label: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    # Out-of-memory points (measure.OOM, measure.SKIPPED_AFTER_OOM), as reported.
    points: list[dict[str, Any]] = field(default_factory=list)
    pending_detection: str = ""  # why xdist is not used, until detection ran
    figure_error: str = ""
    gate_failures: list[str] = field(default_factory=list)
    gate_refused: str = ""  # why --jax-compare-fail may not judge (other machine)
    # One-line notes for the report header (never warnings: a project with
    # ``filterwarnings = error`` would turn them into errors).
    notes: list[str] = field(default_factory=list)
    # Per label of the process that runs them: tests handed out, tests finished.
    expected: Counter[str] = field(default_factory=Counter)
    finished: Counter[str] = field(default_factory=Counter)
    # Controller: the label of the worker each test id was handed to.
    test_labels: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C, as opposed to -x or --maxfail
    benchmark_disabled: bool = False  # the user's --benchmark-disable
    collection_errors: int = 0  # seen by the controller (xdist runs)
    # Controller: the backend label of each xdist worker (WorkerController),
    # decided once when xdist configures it (scheduling.assign_label).
    worker_labels: dict[Any, str] = field(default_factory=dict)
    # Who may run now among the workers (run/turns.py); NoTurns: anyone.
    turns: Turns = field(default_factory=NoTurns)
    # Each feature's own state (the agreement's, the A/B's, the searches',
    # the remote hosts', the chip's), under a key its module owns, read
    # through its accessor: agreement.state_of(session.stash), likewise
    # ab, search, remote and chip.  The session keeps only what every feature
    # shares (tests/test_plugin/test_plugin_layout.py lists it).
    stash: pytest.Stash = field(default_factory=pytest.Stash)

    @property
    def limits(self) -> Limits:
        """The run's time budget and first-call ceiling (see budget.py)."""
        from pytest_lyapax.run.budget import Limits

        return Limits(self.settings.budget_s, self.settings.max_call_s)

    @property
    def labels(self) -> tuple[str, ...]:
        return self.settings.labels

    @property
    def order(self) -> tuple[str, ...]:
        """Labels whose tests run, in run order."""
        return tuple(label for label, s in self.states.items() if s.runnable)

    def backend(self, label: str) -> Backend:
        return self.states[label].backend

    def marked_as(self, label: str) -> str:
        """The label that ``jax_backend`` markers name for ``label``'s tests:
        a rerun (--jax-rerun) and a B side (--jax-ab) run exactly their
        original's, a device-count label (--jax-devices) those of the label it
        splits."""
        state = self.states.get(label)
        if state is None:
            return label
        backend = state.backend
        if backend.rerun_of or backend.ab_of:
            return self.marked_as(backend.rerun_of or backend.ab_of)
        return backend.devices_of or label

    def runs_here(self, label: str) -> bool:
        """Whether this worker runs (or, for a backend that cannot run, skips
        with a reason) the items of ``label``: every item goes to exactly one
        worker, chosen from the item's own label."""
        if label == self.own_label:
            return True
        order = self.order
        return label not in order and bool(order) and order[0] == self.own_label

    def skip_reason(self, label: str) -> str | None:
        """Why items of ``label`` must not run in this process (None: run them)."""
        state = self.states.get(label)
        if state is None:
            return None
        if state.status == UNAVAILABLE:
            return f"jax backend {label!r} unavailable: {state.reason}"
        if state.status == MISMATCH:
            return f"jax backend {label!r} not run (code mismatch): {state.reason}"
        if self.role == INPROCESS and label != self.own_label:
            return f"jax backend {label!r} not run: {state.reason}"
        return None

    def worker_payload(
        self,
        label: str,
        turns: str | None = None,
        rank: int = 0,
        chip_lock: str | None = None,
    ) -> str:
        """Serialise what a worker needs (as a JSON string, as xdist prefers):
        every setting (payload.py) and each backend's state; ``turns``: the
        address of the controller's turn server and ``rank`` the worker's
        place in the run order (turns.py); ``chip_lock``: the lock file of
        the chip it shares with other labels (chip.py)."""
        return json.dumps(
            {
                "label": label,
                "turns": turns,
                "chip_lock": chip_lock,
                "rank": rank,
                "benchmark_disabled": self.benchmark_disabled,
                "settings": settings_to_json(self.settings),
                "states": [
                    {"label": s.backend.label, "status": s.status, "reason": s.reason}
                    for s in self.states.values()
                ],
            }
        )

    @classmethod
    def for_worker(cls, payload: str) -> LyapaxSession:
        data = json.loads(payload)
        settings = settings_from_json(data["settings"])
        backends = {b.label: b for b in settings.backends}
        states = {
            s["label"]: BackendState(backends[s["label"]], s["status"], s["reason"])
            for s in data["states"]
        }
        session = cls(
            settings,
            WORKER,
            states,
            own_label=data["label"],
            benchmark_disabled=data["benchmark_disabled"],
        )
        chip.state_of(session.stash).lock = data.get("chip_lock")
        if data.get("turns"):
            from pytest_lyapax.run.turns import TurnClient

            session.turns = TurnClient(str(data["turns"]), int(data.get("rank", 0)))
        return session


def detect_process_label(session: LyapaxSession) -> tuple[str | None, str]:
    """Find which requested backend this (non-xdist) process itself runs.

    Returns the label (or None) and a description of the process's backend.
    Reads ``JAX_PLATFORMS`` first; only if it is unset does it ask JAX, which
    initialises a backend -- acceptable here because this process runs tests.
    """
    env = os.environ.get("JAX_PLATFORMS", "").strip().lower()
    # A backend bound to another host never runs in this process.
    backends = [s.backend for s in session.states.values() if s.backend.host is None]
    if env:
        for backend in backends:
            if backend.platform == env:
                return backend.label, f"JAX_PLATFORMS={env!r}"
        first = env.split(",")[0]
        for backend in backends:
            if backend.platform.split(",")[0] == first:
                return backend.label, f"JAX_PLATFORMS={env!r}"
        return None, f"JAX_PLATFORMS={env!r}"
    import jax  # deferred: only in-process runs may initialise JAX here

    try:
        actual = jax.default_backend()
    except RuntimeError as exc:
        # An accelerator held by another process (a TPU admits one) or broken:
        # say so once, not as an internal error of the session.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        asked = ", ".join(
            f"JAX_PLATFORMS={b.platform} for {b.label!r}" for b in backends
        )
        raise pytest.UsageError(
            "pytest-lyapax: this process runs the tests (no xdist workers), and "
            f"JAX's default backend could not start here: {type(exc).__name__}: "
            f"{first}. Name the platform to run in this process ({asked}), or "
            "let workers run the labels (-n N with pytest-xdist)"
        ) from exc
    for backend in backends:
        if backend.expected == actual:
            return backend.label, f"JAX default backend {actual!r}"
    return None, f"JAX default backend {actual!r}"


def mark_inprocess_states(session: LyapaxSession, why_no_xdist: str) -> None:
    """Record which backend an in-process run covers and why the others do not run."""
    label, described = detect_process_label(session)
    session.own_label = label
    if label is not None and session.backend(label).precision:
        # No worker to start with it: this process's JAX takes the label's
        # dtype now, before any test computes (x64 is a global flag).
        import jax

        x64 = session.backend(label).precision == "float64"
        jax.config.update("jax_enable_x64", x64)
    for state in session.states.values():
        if state.backend.label == label or state.status == UNAVAILABLE:
            continue
        state.status = NOT_RUN
        here = f"this process runs {described}"
        if label is not None:
            here += f" (backend {label!r})"
        state.reason = f"{why_no_xdist}; {here}"


def check_required(session: LyapaxSession) -> None:
    """``--jax-require``: a required backend that cannot run is a usage error."""
    for label in session.settings.required:
        state = session.states[label]
        if not state.runnable:
            raise pytest.UsageError(
                f"--jax-require: backend {label!r} (JAX_PLATFORMS="
                f"{state.backend.platform}) is {state.status}: {state.reason}"
            )


STASH_KEY = pytest.StashKey[LyapaxSession]()


def get_session(config: pytest.Config) -> LyapaxSession | None:
    """Return the run's session object, or None if the plugin is inactive."""
    return config.stash.get(STASH_KEY, None)
