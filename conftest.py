"""Root conftest: float64 everywhere, as the numerics of lyapax expect.

It deliberately leaves JAX_PLATFORMS alone so that ``--jax-backend`` can run the
same suite on each backend.
"""

import jax

jax.config.update("jax_enable_x64", True)
