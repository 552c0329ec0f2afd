"""Root conftest: float64 everywhere, as the numerics of lyapax expect.

``--jax-precision=float32`` (pytest_lyapax, without ``--jax-backend``) turns
x64 off again for a float32 run of the suite (docs/testing.md, "Running the
test suite on a TPU"). It deliberately leaves JAX_PLATFORMS alone so that
``--jax-backend`` can run the same suite on each backend.
"""

import jax

jax.config.update("jax_enable_x64", True)
