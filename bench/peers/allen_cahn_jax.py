# SPDX-License-Identifier: Apache-2.0
"""Allen–Cahn in JAX: the brief's exact workload, gradient dL/du0 by jax.grad under jit.

Variants: jax-jit (lax.scan over the steps; residuals kept), jax-checkpoint (jax.checkpoint
around each step: recomputed in the backward pass).
"""
from __future__ import annotations

import common
from allen_cahn_problem import DT, EPS2, size_string, timed_size


def make_functions(steps: int, remat: bool = False):
    """(run, loss) for T steps (common.jax_scan_functions)."""
    import jax
    import jax.numpy as jnp

    def step(u):
        lap = jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4 * u
        return u + DT * (EPS2 * lap + u - u ** 3)

    return common.jax_scan_functions(jax, jnp, step, steps, remat)


def make(steps: int, remat: bool):
    """(jax.jit(run), jax.jit(jax.grad(loss)), loss): the definition tools/bench_cpu.py times."""
    import jax

    run, loss = make_functions(steps, remat)
    return jax.jit(run), jax.jit(jax.grad(loss)), loss


def check_gradient() -> None:
    """jax.grad against central differences in float64 on a tiny grid (float64 enabled for it alone)."""
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    u0 = np.random.default_rng(7).uniform(-0.9, 0.9, (5, 5))
    common.check_jax_gradient(jax, make_functions(4)[1], u0, "5x5 T4 f64")
    jax.config.update("jax_enable_x64", False)


def main() -> None:
    args = common.parse_args(__doc__)
    import jax
    import numpy as np

    check_gradient()
    n, steps = timed_size(args.quick)
    u0 = jax.device_put(np.random.default_rng(1).uniform(-0.9, 0.9, (n, n)).astype(np.float32))
    rows = common.jax_remat_rows(jax, "allen-cahn", size_string(n, steps),
                                 lambda remat: make_functions(steps, remat), (u0,), args)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
