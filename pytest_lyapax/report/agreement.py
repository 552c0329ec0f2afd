"""Results of one test compared across backends, leaf by leaf.

A recorded result (``jax_results.record(name, value, stderr=...)`` or a
benchmark's return value) travels as a JSON entry ``{"name", "kind",
"leaves"}``; each leaf is ``{"path", "shape", "dtype", "data" | "file",
"stderr"}`` (see :mod:`pytest_lyapax.measuring.agreement`).  This module
compares one backend's entries with the reference backend's and says, per
name, whether they agree and by how much they differ.

Rules (documented in ``docs/pytest_lyapax.md``):

* shapes and dtypes must match, except that two precision variants (labels
  whose ``--jax-backend-env`` set ``JAX_ENABLE_X64`` or
  ``JAX_DEFAULT_DTYPE_BITS`` differently) may differ in float width, and are
  then compared with the narrower dtype's tolerance;
* integers and booleans must be equal; floating leaves agree where
  ``|a - r| <= atol + rtol * |r|`` (``r`` the reference), with ``rtol`` and
  ``atol`` from ``@pytest.mark.jax_agree``, else the rounding of the lower
  effective precision of the two labels (dtype and matmul precision,
  :mod:`pytest_lyapax.report.precision`) or of the leaf's dtype
  (:data:`DEFAULT_TOLERANCES`), whichever is wider; complex leaves compare
  their real and imaginary parts with the tolerance of their component dtype;
* a leaf recorded with ``stderr`` (a statistical estimate) agrees where
  ``|a - r| <= z * sqrt(sa**2 + sr**2) + atol + rtol * |r|`` (``z`` default
  :data:`DEFAULT_Z`): its error bar plus that rounding;
* a benchmark's return value (no stderr) of two labels of different
  effective precision is not compared: the difference cannot tell a bug from
  rounding amplified by the computation (a chaotic run);
* the same non-finite value at the same place (NaN and NaN, inf and inf)
  agrees; a non-finite value on one side only never does;
* a name recorded on one backend and not on the other is a disagreement.

No pytest or JAX here; numpy is imported when something is compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.precision import Precision, lower

# dtype name -> (rtol, atol).  Chosen for results computed by the same code
# on two backends: a few thousand ulps of float64 (reductions summed in
# another order), about 100 ulps of float32 (so TF32 matmuls, ~1e-3, show),
# one or two ulps of the 16-bit formats.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-14),
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-4),
    "bfloat16": (1e-2, 1e-3),
}
DEFAULT_Z = 4.0
_COMPONENT = {"complex128": "float64", "complex64": "float32"}
# Floating dtypes from the narrowest (the widest tolerance) to the widest.
_FLOAT_WIDTHS = ("bfloat16", "float16", "float32", "float64")
# Variables whose values set the default float width of a label's worker:
# two labels that set them differently are precision variants.
PRECISION_VARIABLES = ("JAX_ENABLE_X64", "JAX_DEFAULT_DTYPE_BITS")


def precision_differs(
    env: Mapping[str, str] | Sequence[tuple[str, str]],
    other: Mapping[str, str] | Sequence[tuple[str, str]],
) -> bool:
    """Whether two labels' own variables (``--jax-backend-env``) set the
    float width differently (then their results may differ in dtype width)."""
    a, b = dict(env), dict(other)
    return any(a.get(name) != b.get(name) for name in PRECISION_VARIABLES)


def _narrower(dtype: str, other: str) -> str | None:
    """The narrower of two floating (or two complex) dtypes; None when they
    are not two widths of one kind."""
    parts = [_COMPONENT.get(d, d) for d in (dtype, other)]
    if any(p not in _FLOAT_WIDTHS for p in parts):
        return None
    if (dtype in _COMPONENT) != (other in _COMPONENT):
        return None  # real against complex
    return min((dtype, other), key=lambda d: _FLOAT_WIDTHS.index(_COMPONENT.get(d, d)))


# Kinds of a recorded entry.
RESULT, BENCHMARK = "result", "benchmark"


@dataclass(frozen=True)
class Tolerance:
    """A test's tolerance (``@pytest.mark.jax_agree``); None: the dtype's default."""

    rtol: float | None = None
    atol: float | None = None
    z: float = DEFAULT_Z

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Tolerance:
        data = data or {}
        return cls(data.get("rtol"), data.get("atol"), data.get("z", DEFAULT_Z))

    def to_json(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "z": self.z}

    def for_dtype(self, dtype: str) -> tuple[float, float] | None:
        """``(rtol, atol)`` for a leaf of ``dtype``; None: must be exact."""
        base = DEFAULT_TOLERANCES.get(_COMPONENT.get(dtype, dtype))
        if base is None and self.rtol is None and self.atol is None:
            return None
        rtol, atol = base or (0.0, 0.0)
        return (
            rtol if self.rtol is None else self.rtol,
            atol if self.atol is None else self.atol,
        )


def check_tolerance(kwargs: Mapping[str, Any]) -> Tolerance:
    """The ``jax_agree`` marker's keywords as a :class:`Tolerance`.

    Raises:
        ValueError: an unknown keyword, or a value that is not a finite
            number >= 0 (``z`` > 0).
    """
    unknown = sorted(set(kwargs) - {"rtol", "atol", "z"})
    if unknown:
        raise ValueError(
            f"@pytest.mark.jax_agree got {unknown[0]}={kwargs[unknown[0]]!r}; "
            "allowed keywords: rtol, atol, z"
        )
    for key, value in kwargs.items():
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if (
            not ok
            or not math.isfinite(value)
            or value < 0
            or (key == "z" and not value)
        ):
            raise ValueError(
                f"@pytest.mark.jax_agree got {key}={value!r}; expected a finite "
                f"number {'> 0' if key == 'z' else '>= 0'}"
            )
    z = kwargs.get("z", DEFAULT_Z)
    return Tolerance(kwargs.get("rtol"), kwargs.get("atol"), float(z))


@dataclass
class LeafVerdict:
    """How one leaf of one name compares with the reference."""

    name: str
    path: str
    shape: tuple[int, ...]
    dtype: str
    ok: bool
    problem: str = ""  # why it disagrees, in words ("" when it agrees)
    max_abs: float | None = None
    max_rel: float | None = None
    index: tuple[int, ...] | None = None  # the worst element
    reference: Any = None
    value: Any = None
    tolerance: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "agree": self.ok,
            "problem": self.problem,
            "max_abs": _finite_or_none(self.max_abs),
            "max_rel": _finite_or_none(self.max_rel),
            "index": None if self.index is None else list(self.index),
            "reference": _jsonable(self.reference),
            "value": _jsonable(self.value),
            "tolerance": self.tolerance,
        }


def _finite_or_none(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # "nan", "inf": strict JSON has no such numbers
    return value


Loader = Callable[[Mapping[str, Any]], Any]


def leaf_array(leaf: Mapping[str, Any], load: Loader | None = None) -> Any:
    """A leaf's values as a float64/int array (complex: a trailing axis of 2);
    None when they are in a file that cannot be read here."""
    import numpy as np

    if "data" in leaf and leaf["data"] is not None:
        data = np.asarray(leaf["data"])
    elif load is not None:
        data = load(leaf)
        if data is None:
            return None
        if np.iscomplexobj(data):
            data = np.stack([data.real, data.imag], axis=-1)
    else:
        return None
    kind = np.dtype(leaf["dtype"]).kind if leaf["dtype"] != "bfloat16" else "f"
    if kind in "fc":
        return np.asarray(data, dtype=np.float64)
    return np.asarray(data)


def load_file(leaf: Mapping[str, Any]) -> Any:
    """A leaf's array from its ``.npy`` file; None when it is not readable here."""
    from pathlib import Path

    import numpy as np

    path = (leaf.get("file") or {}).get("path")
    if not isinstance(path, str) or not Path(path).is_file():
        return None
    return np.load(path, allow_pickle=False)


def _element(array: Any, index: tuple[Any, ...]) -> Any:
    value = array[index]
    return value.tolist() if hasattr(value, "tolist") else value


def compare_leaf(
    name: str,
    ref: Mapping[str, Any],
    other: Mapping[str, Any],
    tolerance: Tolerance,
    load: Loader | None = None,
    widths_may_differ: bool = False,
    precision: Precision | None = None,
) -> LeafVerdict:
    """One leaf of ``other`` against the same leaf of the reference.

    ``widths_may_differ`` (two precision variants): float32 against float64
    is no mismatch; the values are compared with the narrower's tolerance.
    ``precision``: the lower effective precision of the two labels (None:
    unknown, the dtype's tolerance alone).
    """
    import numpy as np

    shape, dtype = tuple(ref["shape"]), str(ref["dtype"])
    narrower = _narrower(dtype, str(other["dtype"])) if widths_may_differ else None
    if narrower is not None:
        dtype = narrower
    verdict = LeafVerdict(name, str(ref["path"]), shape, dtype, ok=True)
    if tuple(other["shape"]) != shape or (
        narrower is None and str(other["dtype"]) != dtype
    ):
        verdict.ok = False
        verdict.problem = (
            f"shape/dtype {tuple(other['shape'])} {other['dtype']} against the "
            f"reference's {shape} {dtype}"
        )
        return verdict
    a, r = leaf_array(other, load), leaf_array(ref, load)
    if a is None or r is None:
        return _compare_by_summary(verdict, ref, other)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return _compare_arrays(verdict, a, r, other, ref, tolerance, precision)


def _limits(
    tolerance: Tolerance, dtype: str, precision: Precision | None
) -> tuple[float, float, str] | None:
    """``(rtol, atol, rule)`` for a leaf: the marker's, else the wider of
    the dtype's default and the lower label precision's rounding; None:
    must be exact (integers, booleans)."""
    limits = tolerance.for_dtype(dtype)
    if limits is None:
        return None
    rtol, atol = limits
    if tolerance.rtol is not None or tolerance.atol is not None:
        return rtol, atol, f"jax_agree rtol {rtol:g}, atol {atol:g}"
    name = _COMPONENT.get(dtype, dtype)
    if precision is not None and precision.rtol > rtol:
        rtol, atol = precision.rtol, max(atol, precision.atol)
        name = precision.effective
    return rtol, atol, f"rounding of {name} (rtol {rtol:g}, atol {atol:g})"


def _compare_arrays(
    verdict: LeafVerdict,
    a: Any,
    r: Any,
    other: Mapping[str, Any],
    ref: Mapping[str, Any],
    tolerance: Tolerance,
    precision: Precision | None = None,
) -> LeafVerdict:
    """The values of two leaves of equal shape and dtype (``a``: this backend's)."""
    import numpy as np

    shape, dtype = verdict.shape, verdict.dtype
    limits = _limits(tolerance, dtype, precision)
    diff = np.abs(a - r) if a.dtype.kind in "fc" else np.abs(a.astype(float) - r)
    rel = np.where(r != 0, diff / np.abs(r), np.where(diff == 0, 0.0, np.inf))
    if limits is None:
        allowed = np.zeros(diff.shape)
        verdict.tolerance = "exact"
    else:
        rtol, atol, rule = limits
        allowed = atol + rtol * np.abs(r)
        verdict.tolerance = rule
    sa, sr = other.get("stderr"), ref.get("stderr")
    if sa is not None or sr is not None:
        sigma = np.hypot(
            np.broadcast_to(np.asarray(sa if sa is not None else 0.0, float), r.shape),
            np.broadcast_to(np.asarray(sr if sr is not None else 0.0, float), r.shape),
        )
        allowed = allowed + tolerance.z * sigma
        verdict.tolerance = f"z {tolerance.z:g} x stderr + {verdict.tolerance}"
    finite_a, finite_r = np.isfinite(a), np.isfinite(r)
    same_special = ~finite_a & ~finite_r & ((a == r) | (np.isnan(a) & np.isnan(r)))
    one_sided = finite_a != finite_r
    both = finite_a & finite_r
    excess = np.where(both, diff - allowed, 0.0)
    bad = (excess > 0) | one_sided | (~finite_a & ~finite_r & ~same_special)
    if diff.size:
        verdict.max_abs = float(np.max(np.where(both, diff, 0.0)))
        # Relative to a non-zero reference only (a zero makes any change inf).
        nonzero = both & (r != 0)
        verdict.max_rel = float(np.max(rel[nonzero])) if nonzero.any() else None
    if not bad.any():
        return verdict
    verdict.ok = False
    # The worst element: a one-sided non-finite first, else the largest
    # deviation beyond what is allowed, relative to what is allowed.
    score = np.where(both, diff / np.where(allowed > 0, allowed, 1e-300), 0.0)
    score = np.where(bad & ~both, np.inf, np.where(bad, score, -1.0))
    flat = int(np.argmax(score))
    index = np.unravel_index(flat, bad.shape)
    verdict.index = tuple(int(i) for i in index[: len(shape)])
    verdict.reference, verdict.value = _element(r, index), _element(a, index)
    count = int(bad.sum())
    verdict.problem = (
        f"{count} of {bad.size} element(s) beyond the tolerance"
        if not (one_sided | (~finite_a & ~same_special)).any()
        else f"{count} of {bad.size} element(s) differ, non-finite on one side"
    )
    return verdict


def _compare_by_summary(
    verdict: LeafVerdict, ref: Mapping[str, Any], other: Mapping[str, Any]
) -> LeafVerdict:
    """Leaves whose files are not readable here: equal hashes agree."""
    a, r = other.get("file") or {}, ref.get("file") or {}
    verdict.tolerance = "sha256 (file not readable here)"
    if a.get("sha256") and a.get("sha256") == r.get("sha256"):
        return verdict
    verdict.ok = False
    verdict.problem = (
        f"stored in a file not readable here and its sha256 differs (mean "
        f"{a.get('mean')} against {r.get('mean')})"
    )
    return verdict


@dataclass
class NameVerdict:
    """One recorded name of one test on one backend against the reference."""

    name: str
    kind: str
    leaves: list[LeafVerdict]
    problem: str = ""  # a disagreement of the whole name (missing, structure)
    not_compared: str = ""  # why the name was not judged ("": it was)

    @property
    def rule(self) -> str:
        """The rule that judged the name: its leaves' (the first
        disagreeing leaf's when they differ), or why it was not compared."""
        if self.not_compared:
            return self.not_compared
        bad = [leaf for leaf in self.leaves if not leaf.ok]
        rules = [leaf.tolerance for leaf in bad or self.leaves if leaf.tolerance]
        return rules[0] if rules else ""

    @property
    def ok(self) -> bool:
        return not self.problem and all(leaf.ok for leaf in self.leaves)

    def to_json(self) -> dict[str, Any]:
        worst = [leaf for leaf in self.leaves if leaf.max_abs is not None]
        return {
            "name": self.name,
            "kind": self.kind,
            "agree": self.ok,
            "problem": self.problem,
            "compared": not self.not_compared,
            "rule": self.rule,
            "max_abs": max((leaf.max_abs or 0.0 for leaf in worst), default=None),
            "max_rel": max((leaf.max_rel or 0.0 for leaf in worst), default=None),
            "leaves": [leaf.to_json() for leaf in self.leaves if not leaf.ok],
        }


def compare_entries(
    reference: Sequence[Mapping[str, Any]],
    other: Sequence[Mapping[str, Any]],
    tolerance: Tolerance,
    load: Loader | None = None,
    widths_may_differ: bool = False,
    precisions: tuple[Precision | None, Precision | None] = (None, None),
) -> list[NameVerdict]:
    """Every name recorded on either side, in the reference's order
    (``widths_may_differ``: see :func:`compare_leaf`; ``precisions``: the
    reference's and this label's, None where unknown)."""
    ref_p, other_p = precisions
    low = lower(ref_p, other_p)
    apart = ""
    if (
        ref_p is not None
        and other_p is not None
        and ref_p.effective != other_p.effective
    ):
        widths_may_differ = True
        apart = (
            f"not compared: {other_p.text} against the reference's {ref_p.text}, "
            "and a benchmark's return value has no stderr (record it with "
            "jax_results.record(name, value, stderr=...) to compare it)"
        )
    ref_by = {e["name"]: e for e in reference}
    other_by = {e["name"]: e for e in other}
    out = []
    for name in [*ref_by, *(n for n in other_by if n not in ref_by)]:
        r, a = ref_by.get(name), other_by.get(name)
        kind = str((r or a or {}).get("kind", RESULT))
        if r is None or a is None:
            side = "reference" if r is None else "this backend"
            out.append(NameVerdict(name, kind, [], f"not recorded on {side}"))
            continue
        r_paths = [leaf["path"] for leaf in r["leaves"]]
        a_paths = [leaf["path"] for leaf in a["leaves"]]
        if r_paths != a_paths:
            out.append(
                NameVerdict(
                    name,
                    kind,
                    [],
                    f"pytree leaves {a_paths} against the reference's {r_paths}",
                )
            )
            continue
        if apart and kind == BENCHMARK and not _has_stderr(r, a):
            out.append(NameVerdict(name, kind, [], not_compared=apart))
            continue
        leaves = [
            compare_leaf(name, rl, al, tolerance, load, widths_may_differ, low)
            for rl, al in zip(r["leaves"], a["leaves"], strict=True)
        ]
        out.append(NameVerdict(name, kind, leaves))
    return out


def _has_stderr(*entries: Mapping[str, Any]) -> bool:
    return any(leaf.get("stderr") is not None for e in entries for leaf in e["leaves"])


def identical_entries(
    first: Sequence[Mapping[str, Any]],
    second: Sequence[Mapping[str, Any]],
    load: Loader | None = None,
) -> list[dict[str, Any]]:
    """Each name recorded by a run and by its rerun (``--jax-rerun``): whether
    every leaf holds the same values bit for bit (NaN where the other has NaN,
    the sign of a zero kept), how many elements differ and by how much."""
    by_first = {e["name"]: e for e in first}
    by_second = {e["name"]: e for e in second}
    out = []
    for name in [*by_first, *(n for n in by_second if n not in by_first)]:
        a, b = by_first.get(name), by_second.get(name)
        row: dict[str, Any] = {
            "name": name,
            "identical": False,
            "differing": 0,
            "elements": 0,
            "max_abs": None,
            "problem": "",
        }
        out.append(row)
        if a is None or b is None:
            row["problem"] = f"not recorded by the {'rerun' if b is None else 'run'}"
            continue
        if [leaf["path"] for leaf in a["leaves"]] != [
            leaf["path"] for leaf in b["leaves"]
        ]:
            row["problem"] = "the pytree leaves differ"
            continue
        for la, lb in zip(a["leaves"], b["leaves"], strict=True):
            problem = _leaf_bits(row, la, lb, load)
            if problem:
                row["problem"] = problem
                break
        row["identical"] = not row["problem"] and row["differing"] == 0
    return out


def _leaf_bits(
    row: dict[str, Any],
    first: Mapping[str, Any],
    second: Mapping[str, Any],
    load: Loader | None,
) -> str:
    """Add one leaf's differing elements to ``row``; the problem, if any."""
    import numpy as np

    if first["shape"] != second["shape"] or first["dtype"] != second["dtype"]:
        return (
            f"shape/dtype {tuple(second['shape'])} {second['dtype']} against "
            f"{tuple(first['shape'])} {first['dtype']}"
        )
    a, b = leaf_array(first, load), leaf_array(second, load)
    if a is None or b is None:  # in files not readable here: their hashes
        same = (first.get("file") or {}).get("sha256") == (
            second.get("file") or {}
        ).get("sha256")
        row["elements"] += int(np.prod(first["shape"], dtype=np.int64))
        return "" if same else "stored in files not readable here; sha256 differs"
    row["elements"] += int(a.size)
    if a.dtype.kind == "f":
        same = ((a == b) & (np.signbit(a) == np.signbit(b))) | (
            np.isnan(a) & np.isnan(b)
        )
        both = np.isfinite(a) & np.isfinite(b) & ~same
        if both.any():
            worst = float(np.max(np.abs(a[both] - b[both])))
            row["max_abs"] = max(row["max_abs"] or 0.0, worst)
    else:
        same = a == b
    row["differing"] += int(np.count_nonzero(~same))
    return ""
