"""Private helpers that several subpackages share (equinox's ``internal``).

- :mod:`~lyapax._internal.sparse`: sparse weights as a padded neighbour list;
- :mod:`~lyapax._internal.fusion`: values computed once into memory instead
  of fused into their users (XLA:CPU; sparse products, phases, FTLE fields,
  DDE edge sums);
- :mod:`~lyapax._internal.checks`: weights, coupled rows and network states;
- :mod:`~lyapax._internal.history`: the delay ring buffer (layout, reads, writes);
- :mod:`~lyapax._internal.batching`: rows run in chunks, padded and split over
  devices (sweeps, the master stability function, FTLE fields);
- :mod:`~lyapax._internal.memory`: free host and device memory, for the
  checks made before a run (covariant vectors, FTLE fields).

Only :mod:`lyapax._engine` and this layer may be imported across subpackages
by private name (``tests/test_layout.py`` checks it). Nothing here imports a
subpackage above it.
"""
