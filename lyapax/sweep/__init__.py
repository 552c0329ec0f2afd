"""Sweeps: Lyapunov spectra of many parameter sets and initial states at once.

- :mod:`~lyapax.sweep.spectrum`: :func:`sweep_lyapunov_spectrum`;
- :mod:`~lyapax.sweep.trajectory`: :func:`sweep_trajectory`;
- :mod:`~lyapax.sweep._setup` (the large-trajectory warning both share),
  ``_kernels`` (the vmapped programs); what a row runs is
  :mod:`lyapax._internal.rows` (shared with the indicators), chunks, padding
  and devices :mod:`lyapax._internal.batching` (shared with the master
  stability function, FTLE fields and covariant sweeps).

``sweep_lyapunov_spectrum`` runs the Benettin/QR engine for a whole batch of
parameters (a pytree whose leaves share a leading batch axis) and/or initial
states in one ``jax.vmap``-ed, jitted program; every field of the returned
:class:`~lyapax.core.LyapunovResult` gains that leading axis. The compiled
program is cached by the structure of ``step_fn`` and the static arguments, so
a second sweep with new numbers of the same shapes does not recompile.

Devices. When several devices are visible (GPUs, TPU cores, or CPU devices
forced with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``), the batch
axis is split over a 1-D mesh with ``jax.sharding`` and each device runs its
share through ``jax.shard_map``; the numbers are those of a single-device run.
The same code scales to several hosts: start every process with
:func:`lyapax.distributed.initialize` and call the sweep with the same
arguments in each; ``jax.devices()`` then lists every process's devices, each
process places and computes its own rows (a batch that does not divide over
them is padded), and the returned arrays are global ``jax.Array`` s, which
:func:`lyapax.distributed.gather` brings to NumPy::

    from lyapax.distributed import gather, initialize
    initialize()                        # one process per host (or per GPU)
    from lyapax.sweep import sweep_lyapunov_spectrum
    res = sweep_lyapunov_spectrum(step, x0, {"rho": rhos}, dt, n_steps)
    lam = gather(res.exponents)         # (n, k) NumPy in every process
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax._internal.rows import ProblemFamily, problem_family
    from lyapax.sweep._setup import TRAJECTORY_WARN_BYTES
    from lyapax.sweep.spectrum import sweep_lyapunov_spectrum
    from lyapax.sweep.trajectory import sweep_trajectory

__all__ = [
    "TRAJECTORY_WARN_BYTES",
    "ProblemFamily",
    "problem_family",
    "sweep_lyapunov_spectrum",
    "sweep_trajectory",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax._internal.rows": ("ProblemFamily", "problem_family"),
        "lyapax.sweep._setup": ("TRAJECTORY_WARN_BYTES",),
        "lyapax.sweep.spectrum": ("sweep_lyapunov_spectrum",),
        "lyapax.sweep.trajectory": ("sweep_trajectory",),
    },
)
