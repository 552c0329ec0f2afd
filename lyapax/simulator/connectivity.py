"""Connectomes: weights, tract lengths and conduction speed (per-edge delays)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate

__all__ = ["Connectivity"]


class Connectivity:
    """A connectome: coupling weights, tract lengths and conduction speed.

    Args:
        weights: ``(n, n)`` coupling weights indexed ``[target, source]``.
        tract_lengths: ``(n, n)`` non-negative lengths (same index order), or
            ``None`` for no delays. Units are those of ``speed * time``
            (e.g. mm with mm/ms and ms).
        speed: conduction speed, > 0.

    Raises:
        ValueError: non-square or mismatched arrays, negative or non-finite
            lengths, a non-positive speed.
    """

    def __init__(self, weights: Any, tract_lengths: Any = None, speed: float = 1.0):
        w = np.asarray(weights)
        if w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(
                f"weights must be a square (n, n) matrix; got shape {w.shape}"
            )
        if tract_lengths is not None:
            lengths = np.asarray(tract_lengths, dtype=float)
            if lengths.shape != w.shape:
                raise ValueError(
                    f"tract_lengths must have the shape of weights {w.shape}; "
                    f"got {lengths.shape}"
                )
            if not np.all(np.isfinite(lengths)) or np.any(lengths < 0):
                raise ValueError("tract_lengths must be finite and >= 0")
        else:
            lengths = None
        speed = validate.positive_float("speed", speed, why="(it sets the delays)")
        self.weights = jnp.asarray(weights)
        self.tract_lengths = lengths
        self.speed = speed

    @property
    def n_nodes(self) -> int:
        """Number of nodes ``n``."""
        return int(self.weights.shape[0])

    @property
    def has_delays(self) -> bool:
        """True when some edge has a positive tract length (a nonzero delay)."""
        return self.tract_lengths is not None and bool(np.any(self.tract_lengths > 0))

    def delays(self) -> np.ndarray:
        """Per-edge conduction delays ``tract_lengths / speed`` (time units)."""
        if self.tract_lengths is None:
            return np.zeros(self.weights.shape)
        return self.tract_lengths / self.speed

    def delay_steps(self, dt: float) -> np.ndarray:
        """Per-edge delays in whole steps of ``dt``: ``round(delay / dt)``, int32.

        Raises:
            ValueError: ``dt`` is not a finite number > 0.
        """
        dt = validate.positive_float("dt", dt, why="(it sets the delay steps)")
        return np.rint(self.delays() / dt).astype(np.int32)

    def horizon(self, dt: float) -> int:
        """Ring-buffer length that holds the longest delay: ``max steps + 1``."""
        return int(self.delay_steps(dt).max()) + 1

    def __repr__(self) -> str:
        delayed = "with" if self.tract_lengths is not None else "without"
        return f"Connectivity(n_nodes={self.n_nodes}, {delayed} tract lengths)"
