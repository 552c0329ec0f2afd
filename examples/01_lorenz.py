"""Quick start: the Lyapunov spectrum of the Lorenz system.
========================================================

    python examples/01_lorenz.py [--quick]

Prints the three exponents (1/time units), their sum (exactly -(sigma+1+beta)
for this flow) and the Kaplan-Yorke dimension.
"""

import argparse

import jax

jax.config.update("jax_enable_x64", True)  # lyapax expects float64

import jax.numpy as jnp  # noqa: E402

from lyapax import kaplan_yorke_dimension, lyapunov_spectrum, ode_problem  # noqa: E402
from lyapax.systems import lorenz  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="Lorenz Lyapunov spectrum")
    parser.add_argument("--quick", action="store_true", help="short run (CI)")
    parser.add_argument("--out", default=None, help="unused; accepted for CI")
    args = parser.parse_args()
    n_steps = 10_000 if args.quick else 100_000

    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
    result = lyapunov_spectrum(
        problem, n_steps=n_steps, renorm_every=10, t_transient=50.0
    )
    print("exponents:", result.exponents)
    print("sum:", float(result.exponents.sum()))
    print("Kaplan-Yorke dimension:", kaplan_yorke_dimension(result.exponents))


if __name__ == "__main__":
    main()
