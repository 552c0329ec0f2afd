"""Shared set-up of the per-backend benchmarks.

Run them with ``pytest perf_tests --jax-backend=cpu,gpu`` (the pytest.ini here
makes ``cpu,gpu`` the default); see pytest_lyapax for what the plugin does.
The precision each backend computes in is the plugin's (``--jax-precision``,
here ``native`` by default: float64 on cpu and gpu, float32 on a TPU); the
tests read it from the ``jax_precision`` / ``jax_tolerance`` fixtures.
"""
