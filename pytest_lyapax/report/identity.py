"""What a measurement *is*: the one identity every table, figure and tool uses.

A benchmark record (one entry of a report's ``benchmarks`` list) is one point
of a *series*.  :func:`series_id` names that series:

- ``test``: the test's full id without backend and size, module path included
  (``tests/cpu/test_ops.py::TestOps::test_x``), so same-named tests of two
  modules are two series;
- ``params``: its other parameters (``dtype=float32``), one series each;
- ``backend``: the backend label it ran on (``cpu``, ``gpu``, ``cpu2``);
- ``env``: the variables that label set (``--jax-backend-env``), so that two
  execution variants of one label (float32 and float64, say) never merge;
- ``precision``: the dtype (and matmul precision, when set) the record was
  computed in (``extra_info["precision"]``), so two precisions of one label,
  in one run or in two runs compared, never merge;
- ``machine``: host and CPU model (from ``machine_info``), device kind and
  jax/jaxlib versions (recorded per benchmark by the worker that ran it).

The size is the series' x axis, not part of its identity.  Nothing here
parses a test id beyond cutting its ``[...]`` parameter suffix, and nothing
imports pytest or JAX.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from pytest_lyapax.report.precision import record_precision

# Parameters the plugin adds itself; every other parameter makes its own series.
PLUGIN_PARAMS = ("jax_backend", "jax_size")


def _text(value: object, default: str = "") -> str:
    return value if isinstance(value, str) and value else default


@dataclass(frozen=True)
class Machine:
    """Where a series was measured.  Empty strings mean "not recorded"."""

    host: str = ""
    cpu: str = ""
    device: str = ""
    jax: str = ""
    jaxlib: str = ""

    @property
    def place(self) -> tuple[str, str, str]:
        """Host, CPU model and device kind: what makes timings comparable."""
        return (self.host, self.cpu, self.device)

    def __str__(self) -> str:
        return f"{self.host or 'unknown host'} ({self.cpu or 'CPU'})"

    def differences(self, other: Machine) -> list[str]:
        """How ``other`` differs from this machine, one phrase per field known
        on both sides (``host 'laptop' vs 'server'``)."""
        out = []
        for name in ("host", "cpu", "device", "jax", "jaxlib"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine and theirs and mine != theirs:
                out.append(f"{name} {mine!r} vs {theirs!r}")
        return out

    def same_place(self, other: Machine) -> bool:
        """Same host and device (fields unknown on either side are not held
        against it): the condition for a regression gate."""
        return not [
            d for d in self.differences(other) if d.split()[0] in ("host", "device")
        ]

    def to_json(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


@dataclass(frozen=True)
class SeriesId:
    """The identity of a series (see the module docstring)."""

    test: str
    params: str
    backend: str | None
    machine: Machine
    label: str | None = None  # the series label shown (merged: "cpu @ server")
    env: str = ""  # the label's own variables (--jax-backend-env), "A=1 B=2"
    precision: str = ""  # "float32", "float32/highest" ("": not recorded)

    @property
    def benchmark(self) -> str:
        """Test id and other parameters: the same benchmark on any backend."""
        return f"{self.test}[{self.params}]" if self.params else self.test

    @property
    def name(self) -> str:
        """The benchmark without its module path (``test_x[dtype=f32]``)."""
        short = self.test.rsplit("::", 1)[-1]
        return f"{short}[{self.params}]" if self.params else short

    def key(self, *, join_machines: bool = False) -> tuple[str, ...]:
        """A hashable key: benchmark, backend and, unless joined, the machine's
        host, CPU and device (versions are not part of it: a jax upgrade on
        the same machine is a step in one series, not a new series)."""
        where = () if join_machines else self.machine.place
        return (self.benchmark, self.backend or "", self.env, self.precision, *where)

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "params": self.params,
            "backend": self.backend,
            **({"env": self.env} if self.env else {}),
            **({"precision": self.precision} if self.precision else {}),
            "machine": self.machine.to_json(),
        }


def extra_info(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A benchmark record's ``extra_info`` (empty when absent or not a mapping).

    The one reader of that dict: each field has its accessor here (series
    identity) or in :mod:`~pytest_lyapax.report.details` (measurements).
    """
    info = record.get("extra_info")
    return info if isinstance(info, Mapping) else {}


def record_label(record: Mapping[str, Any]) -> str | None:
    """The series label of a record (the backend, or ``backend @ host`` once merged)."""
    label = extra_info(record).get("backend")
    return label if isinstance(label, str) else None


def is_size(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a problem size (or a device count, the size of
    the device axis): an int, and never a bool (``True`` is an int to
    ``isinstance``, and a report is untrusted input)."""
    return isinstance(value, int) and not isinstance(value, bool)


def record_size(record: Mapping[str, Any]) -> int | None:
    size = extra_info(record).get("size")
    return size if is_size(size) else None


def size_label(record: Mapping[str, Any]) -> str | None:
    """The name of the size axis (``@pytest.mark.jax_sizes(label=...)``), or None."""
    label = extra_info(record).get("size_label")
    return str(label) if label else None


def worker_fields(record: Mapping[str, Any]) -> dict[str, str]:
    """What the record's worker said about its JAX: ``device``,
    ``jax_version``, ``jaxlib_version`` and ``jax_backend`` (the platform JAX
    actually ran on: ``cpu`` for a label ``cpu2=cpu``), those it recorded."""
    info = extra_info(record)
    keys = ("device", "jax_version", "jaxlib_version", "jax_backend")
    return {key: info[key] for key in keys if info.get(key) is not None}


def bare_id(name: str) -> str:
    """A test's id without its parameters (``path::test``): the first part of
    a series' key, for a collected item and a stored record alike."""
    return name.split("[", 1)[0]


def param_text(params: Mapping[str, Any]) -> str:
    """Parameters other than backend and size, sorted, as ``k=v,...``: the
    part of a series' key that tells variants of one test apart."""
    return ",".join(
        f"{k}={params[k]}" for k in sorted(params) if k not in PLUGIN_PARAMS
    )


def series_key(
    test_id: str, params: Mapping[str, Any], label: str
) -> tuple[str, str, str]:
    """A series on one backend as a key: test id without its parameters,
    the other parameters (:func:`param_text`) and the label: a collected
    item's series (out-of-memory skips, time estimates) and a stored
    record's (:func:`series_id`)."""
    return (bare_id(test_id), param_text(params), label)


def machine_of(
    record: Mapping[str, Any], machine_info: Mapping[str, Any] | None
) -> Machine:
    """The machine a record was measured on.

    Host and CPU come from the record's own ``extra_info`` when a merge put
    them there, else from the report's ``machine_info``; device kind and
    versions from the record's ``extra_info`` (written by its worker).
    """
    info = extra_info(record)
    machine_info = machine_info if isinstance(machine_info, Mapping) else {}
    cpu_info = machine_info.get("cpu")
    brand = cpu_info.get("brand_raw") if isinstance(cpu_info, Mapping) else None
    return Machine(
        host=_text(info.get("host"), _text(machine_info.get("node"))),
        cpu=_text(info.get("cpu"), _text(brand, _text(machine_info.get("processor")))),
        device=_text(info.get("device")),
        jax=_text(info.get("jax_version")),
        jaxlib=_text(info.get("jaxlib_version")),
    )


def series_id(
    record: Mapping[str, Any], machine_info: Mapping[str, Any] | None = None
) -> SeriesId:
    """The identity of the series ``record`` belongs to (see the module docstring)."""
    info = extra_info(record)
    label = record_label(record)
    backend = _text(info.get("source_backend"), label or "") or None
    params = record.get("params")
    test, other, _ = series_key(
        str(record.get("fullname") or record.get("name") or ""),
        params if isinstance(params, Mapping) else {},
        label or "",
    )
    return SeriesId(
        test,
        other,
        backend,
        machine_of(record, machine_info),
        label,
        backend_env(record),
        record_precision(record),
    )


def backend_env(record: Mapping[str, Any]) -> str:
    """The variables the record's label set (``--jax-backend-env``) as
    ``VAR=VALUE`` words, or "" (a report is untrusted: other shapes are "")."""
    env = extra_info(record).get("backend_env")
    if not isinstance(env, Mapping):
        return ""
    return " ".join(f"{k}={v}" for k, v in env.items() if isinstance(v, str))


def unique_names(ids: Iterable[SeriesId]) -> dict[str, str]:
    """A display name per benchmark: its short name where that is unique among
    ``ids``, else its full id (two modules' ``test_x`` stay apart)."""
    benchmarks = {i.benchmark: i.name for i in ids}
    counts = Counter(benchmarks.values())
    return {
        full: short if counts[short] == 1 else full
        for full, short in benchmarks.items()
    }


def machine_suffixes(machines: Sequence[Machine]) -> dict[Machine, str]:
    """How to tell machines apart in a series label: nothing for one machine,
    the host when hosts differ, host and device when one host has several."""
    places = list(dict.fromkeys(m.place for m in machines))
    if len(places) <= 1:
        return {m: "" for m in machines}
    hosts = Counter(host for host, _, _ in places)
    out = {}
    for m in machines:
        host = m.host or "unknown host"
        out[m] = host if hosts[m.host] == 1 else f"{host} {m.device or m.cpu}".strip()
    return out
