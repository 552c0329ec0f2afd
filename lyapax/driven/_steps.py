"""The steps of driven and random problems: each reads the global step index.

The engine calls a step that declares ``uses_step_index`` as ``step(z, n)``
with ``n`` the run's int32 step counter, counted from the first transient
step and kept in checkpoints (the mechanism of time-dependent fields). A
driven step reads slice ``n`` of its inputs; a random step folds ``n`` into
its key, so the noise of step ``n`` is the same whether the run is done in
one piece, in chunks or resumed from a checkpoint.

Keys are carried as their raw ``uint32`` data (a pytree leaf every part of
the engine can hash, batch and save) with the key's implementation name as
static data (None: a legacy raw key, handed to the user's function raw).
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine.abstract import AbstractStep

__all__ = ["DrivenStep", "RandomStep", "SDEStep", "as_key", "key_at"]


def as_key(name: str, key: Any) -> tuple[Any, str | None]:
    """``(data, impl)`` of a JAX PRNG key: a typed key (``jax.random.key``)
    gives its ``uint32`` data and implementation name, a legacy raw key
    (``jax.random.PRNGKey``: ``uint32`` of shape ``(2,)``) itself and None.

    Raises:
        TypeError: ``key`` is not a single JAX PRNG key.
    """
    dtype = getattr(key, "dtype", None)
    shape = getattr(key, "shape", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if shape == ():
            return jax.random.key_data(key), str(jax.random.key_impl(key))
    elif dtype == np.uint32 and shape == (2,):
        return jnp.asarray(key), None
    raise TypeError(
        f"{name} must be one JAX PRNG key (jax.random.key(seed) or "
        f"jax.random.PRNGKey(seed)); got {type(key).__name__}"
        + (f" of dtype {dtype} and shape {shape}" if dtype is not None else "")
    )


def key_at(data: Any, impl: str | None, n: Any) -> Any:
    """``jax.random.fold_in(key, n)`` of the key whose data is ``data``."""
    key = data if impl is None else jax.random.wrap_key_data(data, impl=impl)
    return jax.random.fold_in(key, n)


class DrivenStep(AbstractStep):
    """``fn(z, u_n)`` with ``u_n`` slice ``n`` of every leaf of ``inputs``."""

    uses_step_index: ClassVar[bool] = True
    fn: Any
    inputs: Any

    def __call__(self, z: Any, *step_index: Any) -> Any:
        (n,) = step_index
        u = jax.tree.map(
            lambda leaf: jax.lax.dynamic_index_in_dim(leaf, n, 0, keepdims=False),
            self.inputs,
        )
        return self.fn(z, u)


class RandomStep(AbstractStep):
    """``fn(z, fold_in(key, n))``."""

    uses_step_index: ClassVar[bool] = True
    fn: Any
    key: Any
    impl: str | None = eqx.field(static=True)

    def __call__(self, z: Any, *step_index: Any) -> Any:
        (n,) = step_index
        return self.fn(z, key_at(self.key, self.impl, n))


class SDEStep(AbstractStep):
    """One Euler-Maruyama or stochastic Heun step of ``dz = f dt + g dW``.

    ``dW = sqrt(dt) * normal(fold_in(key, n), (m,))`` in the state's dtype;
    ``g(z) * dW`` for diagonal noise, ``g(z) @ dW`` for general noise.
    """

    uses_step_index: ClassVar[bool] = True
    drift: Any
    diffusion: Any
    key: Any
    dt: Any
    impl: str | None = eqx.field(static=True)
    m: int = eqx.field(static=True)
    general: bool = eqx.field(static=True)
    heun: bool = eqx.field(static=True)

    def increment(self, n: Any, dtype: Any) -> Any:
        """The Wiener increment ``dW (m,)`` of step ``n``."""
        scale = jnp.sqrt(jnp.asarray(self.dt, dtype))
        normal = jax.random.normal(key_at(self.key, self.impl, n), (self.m,), dtype)
        return scale * normal

    def _noise(self, z: Any, dW: Any) -> Any:
        g = self.diffusion(z)
        return g @ dW if self.general else g * dW

    def __call__(self, z: Any, *step_index: Any) -> Any:
        (n,) = step_index
        dt = jnp.asarray(self.dt, z.dtype)
        dW = self.increment(n, z.dtype)
        f, g = self.drift(z), self._noise(z, dW)
        predictor = z + f * dt + g
        if not self.heun:
            return predictor
        # Stochastic Heun: the trapezoidal average of drift and noise, which
        # converges to the Stratonovich solution.
        f2, g2 = self.drift(predictor), self._noise(predictor, dW)
        return z + 0.5 * (f + f2) * dt + 0.5 * (g + g2)
