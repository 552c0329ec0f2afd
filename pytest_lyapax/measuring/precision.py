"""The precision in force in this process's JAX, and the tolerance that fits
it (the ``jax_precision`` and ``jax_tolerance`` fixtures,
``extra_info["precision"]``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.precision import (
    DEFAULT_MATMUL,
    FLOAT32,
    FLOAT64,
    Precision,
)


def _flag(jax: Any, name: str) -> Any:
    # jax.config declares its flags at run time: none is typed for mypy.
    return getattr(jax.config, name)


def in_force() -> Precision:
    """dtype (x64 on or off), ``jax_default_matmul_precision`` and platform
    of this process's JAX (starts its backend)."""
    import jax

    matmul = _flag(jax, "jax_default_matmul_precision")
    return Precision(
        FLOAT64 if _flag(jax, "jax_enable_x64") else FLOAT32,
        str(matmul).lower() if matmul else DEFAULT_MATMUL,
        jax.default_backend(),
    )


@dataclass(frozen=True)
class JaxTolerance:
    """``rtol`` and ``atol`` fitting a label's effective precision (two
    results of the same code in that precision agree within them), its unit
    roundoff ``eps``, the ``dtype``, the ``matmul`` precision in force and
    the ``effective`` arithmetic (e.g. ``bfloat16`` for a TPU's default
    float32 matmul passes).  A test widens its own bound with them, e.g.
    ``abs=max(1e-6, 100 * jax_tolerance.atol)``."""

    dtype: str
    matmul: str
    effective: str
    rtol: float
    atol: float
    eps: float

    @classmethod
    def of(cls, precision: Precision) -> JaxTolerance:
        return cls(
            precision.dtype,
            precision.matmul,
            precision.effective,
            precision.rtol,
            precision.atol,
            precision.eps,
        )
