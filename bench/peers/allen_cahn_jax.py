# SPDX-License-Identifier: Apache-2.0
"""Allen–Cahn in JAX: the brief's exact workload, gradient dL/du0 by jax.grad under jit.

Variants: jax-jit (lax.scan over the steps; residuals kept), jax-checkpoint (jax.checkpoint
around each step: recomputed in the backward pass).
"""
from __future__ import annotations

import common
from allen_cahn_problem import DT, EPS2, size_string, timed_size


def make(steps: int, remat: bool):
    import jax
    import jax.numpy as jnp

    def step(u):
        lap = jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4 * u
        return u + DT * (EPS2 * lap + u - u ** 3)

    body = jax.checkpoint(step) if remat else step

    def run(u0):
        u, _ = jax.lax.scan(lambda u, _: (body(u), None), u0, None, length=steps)
        return u

    def loss(u0):
        u = run(u0)
        return 0.5 * jnp.sum(u * u)

    return jax.jit(run), jax.jit(jax.grad(loss)), loss


def check_gradient() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(7)
    u0 = jnp.asarray(rng.uniform(-0.9, 0.9, (5, 5)), dtype=jnp.float64)
    _, grad, loss = make(4, remat=False)
    g = np.asarray(grad(u0)).ravel()
    flat = np.asarray(u0).ravel().copy()
    fd = common.central_differences(lambda: loss(jnp.asarray(flat.reshape(u0.shape))), flat)
    err = common.relative_error(g.tolist(), fd)
    jax.config.update("jax_enable_x64", False)
    if not err < 1e-7:
        common.fail(f"allen_cahn_jax: jax.grad differs from finite differences ({err:.2e})")


def main() -> None:
    args = common.parse_args(__doc__)
    import jax
    import numpy as np

    check_gradient()
    n, steps = timed_size(args.quick)
    size = size_string(n, steps)
    u0 = jax.device_put(np.random.default_rng(1).uniform(-0.9, 0.9, (n, n)).astype(np.float32))
    rows = []
    primal_ms = None
    for name, remat in (("jax-jit", False), ("jax-checkpoint", True)):
        primal, grad, _ = make(steps, remat)
        if primal_ms is None:
            primal_ms = common.median_ms_jax(lambda: primal(u0), args.warmup, args.repeats)
        try:
            grad_ms = common.median_ms_jax(lambda: grad(u0), args.warmup, args.repeats)
            rows.append(common.row("allen-cahn", name, size, primal_ms, grad_ms, "jax"))
        except Exception as e:  # XLA reports exhausted memory as a runtime error
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
            rows.append({"workload": "allen-cahn", "variant": name, "size": size, "peer": "jax",
                         "error": "out of memory"})
            print(f"allen-cahn {name}: out of memory")
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
