"""Precision as an axis of every series: what a label computes in, and how
close two results of that precision can be expected to come.

A label's precision is the float dtype its JAX computes in (``float64`` with
x64 enabled, else ``float32``) and the matmul precision in force
(``jax_default_matmul_precision``; ``"default"`` when unset).  Its *effective*
precision is what a float32 matmul really keeps on that platform: a TPU's
default passes are bfloat16 (about 3 digits), a GPU's default may use
TensorFloat-32; ``highest`` keeps float32 everywhere, and float64 is float64
(emulated exactly enough on a TPU).  Recorded as ``extra_info["precision"] =
{"dtype", "matmul"}``; no pytest or JAX here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FLOAT64, FLOAT32 = "float64", "float32"
DTYPES = (FLOAT64, FLOAT32)
DEFAULT_MATMUL = "default"
# Effective precisions, from the widest to the narrowest, with their unit
# roundoff and the (rtol, atol) within which two results of that precision
# computed by the same code are taken to agree: a few thousand ulps of
# float64 (reductions summed in another order), about 100 ulps of float32,
# a few ulps of the reduced matmul formats (so a 1 % error still shows).
EFFECTIVE: dict[str, tuple[float, float, float]] = {
    FLOAT64: (2.0**-53, 1e-12, 1e-14),
    FLOAT32: (2.0**-24, 1e-5, 1e-6),
    "bfloat16_3x": (2.0**-17, 1e-4, 1e-5),
    "tensorfloat32": (2.0**-11, 2e-3, 2e-4),
    "bfloat16": (2.0**-8, 5e-3, 5e-4),
}
# The float32 matmul a platform runs for each jax_default_matmul_precision
# value (absent: float32); names as JAX spells them.
_REDUCED: dict[str, dict[str, str]] = {
    "tpu": {
        DEFAULT_MATMUL: "bfloat16",
        "fastest": "bfloat16",
        "bfloat16": "bfloat16",
        "high": "bfloat16_3x",
        "bfloat16_3x": "bfloat16_3x",
    },
    "gpu": {
        DEFAULT_MATMUL: "tensorfloat32",
        "fastest": "tensorfloat32",
        "high": "tensorfloat32",
        "tensorfloat32": "tensorfloat32",
        "bfloat16": "bfloat16",
    },
}
# Platforms (``jax.default_backend()``) that compute float64 in hardware;
# a TPU emulates it (slow to compile, slow to run).
NATIVE_FLOAT64 = ("cpu", "gpu")
EMULATED_FLOAT64 = ("tpu",)


def native_dtype(platform: str) -> str:
    """The precision a platform runs best: float64 where it is native,
    float32 elsewhere (a TPU)."""
    return FLOAT64 if platform in NATIVE_FLOAT64 else FLOAT32


@dataclass(frozen=True)
class Precision:
    """A label's precision: dtype, matmul precision in force and platform."""

    dtype: str
    matmul: str = DEFAULT_MATMUL
    platform: str = ""

    @property
    def effective(self) -> str:
        """The narrowest arithmetic its results went through."""
        if self.dtype == FLOAT64:
            return FLOAT64
        return _REDUCED.get(self.platform, {}).get(self.matmul, FLOAT32)

    @property
    def eps(self) -> float:
        """Unit roundoff of the effective precision."""
        return EFFECTIVE[self.effective][0]

    @property
    def rtol(self) -> float:
        return EFFECTIVE[self.effective][1]

    @property
    def atol(self) -> float:
        return EFFECTIVE[self.effective][2]

    @property
    def text(self) -> str:
        """``float32``, or ``float32 (matmul highest)`` when set, with the
        effective format when it is narrower than the dtype."""
        out = self.dtype
        if self.matmul != DEFAULT_MATMUL:
            out += f" (matmul {self.matmul})"
        if self.effective not in (self.dtype, FLOAT32):
            out += f" [{self.effective} matmul passes]"
        return out

    def to_json(self) -> dict[str, str]:
        return {"dtype": self.dtype, "matmul": self.matmul}

    @classmethod
    def from_json(cls, data: Any, platform: str = "") -> Precision | None:
        """Read ``extra_info["precision"]`` (untrusted: None when malformed)."""
        if not isinstance(data, Mapping) or data.get("dtype") not in DTYPES:
            return None
        matmul = data.get("matmul")
        return cls(
            str(data["dtype"]),
            matmul if isinstance(matmul, str) and matmul else DEFAULT_MATMUL,
            platform,
        )


def lower(a: Precision | None, b: Precision | None) -> Precision | None:
    """The narrower effective precision of two (None: unknown on both)."""
    known = [p for p in (a, b) if p is not None]
    if not known:
        return None
    order = list(EFFECTIVE)
    return max(known, key=lambda p: order.index(p.effective))


def record_precision(record: Mapping[str, Any]) -> str:
    """A record's precision as a short text for series identity and labels
    ("" when not recorded)."""
    info = record.get("extra_info")
    if not isinstance(info, Mapping):
        return ""
    platform = info.get("jax_backend")
    p = Precision.from_json(
        info.get("precision"), platform if isinstance(platform, str) else ""
    )
    if p is None:
        return ""
    return p.dtype if p.matmul == DEFAULT_MATMUL else f"{p.dtype}/{p.matmul}"


def backend_precision(backend: Mapping[str, Any]) -> str:
    """A report's backend entry's precision as its probe found it
    (:attr:`Precision.text`; "" when unknown)."""
    platform = backend.get("expected_backend")
    p = Precision.from_json(
        backend.get("precision"), platform if isinstance(platform, str) else ""
    )
    return "" if p is None else p.text
