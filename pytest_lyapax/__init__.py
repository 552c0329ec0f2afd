"""pytest_lyapax: per-backend (CPU, GPU, ...) performance testing for JAX code."""
