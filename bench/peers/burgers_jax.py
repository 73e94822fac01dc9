# SPDX-License-Identifier: Apache-2.0
"""Burgers 1-D in JAX: the peer of tapeflow_bench's `burgers` suite (docs/workloads/burgers.md).

Same problem as tapeflow: a periodic line of n cells, T steps of
u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1}) (a = 0.1, b = 0.2; the
neighbours by jnp.roll), L = 0.5 sum u_T^2; a smooth random start of the same kind.
primal = jax.jit of T steps (lax.scan); grad = jax.jit(jax.grad(loss)) (forward + backward of L).

    python3 bench/peers/burgers_jax.py --out ROWS.json [--quick]

Rows: workload "burgers", variants "jax-jit" (residuals kept) and "jax-checkpoint" (jax.checkpoint
around each step: recomputed in the backward pass), size "n67108864 T100 f32" ("n1048576 T20 f32"
under --quick), peer "jax". Before timing, the gradient is checked at n16 T6 in float64 against
central differences; a wrong gradient exits non-zero.
"""
from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from burgers_problem import A, B, size_string, start_modes, timed_size  # noqa: E402


def initial_state(np, n: int, dtype, seed: int):
    x = np.arange(n, dtype=np.float64) * (2 * math.pi / n)
    u = np.zeros(n, dtype=np.float64)
    for m, (amp, phase) in enumerate(start_modes(seed)):
        u += amp * np.sin((m + 1) * x + phase)
    return u.astype(dtype)


def make_functions(jax, jnp, steps: int, remat: bool = False):
    """(run, loss) for T steps. With `remat`, each step is wrapped in jax.checkpoint."""
    def step(u):
        left, right = jnp.roll(u, 1), jnp.roll(u, -1)  # u_{j-1}, u_{j+1}
        return u - A * u * (right - left) + B * (right - 2 * u + left)

    body = jax.checkpoint(step) if remat else step

    def run(u0):
        u, _ = jax.lax.scan(lambda u, _: (body(u), None), u0, None, length=steps)
        return u

    def loss(u0):
        u = run(u0)
        return 0.5 * jnp.sum(u * u)

    return run, loss


def check_gradient(jax, jnp, np) -> None:
    """dL/du0 at n16 T6 in float64 against central differences."""
    n, steps = 16, 6
    u0 = initial_state(np, n, np.float64, seed=7)
    _, loss = make_functions(jax, jnp, steps)
    g = np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(u0)))
    loss_jit = jax.jit(loss)
    flat = u0.copy()
    fd = common.central_differences(lambda: loss_jit(jnp.asarray(flat)), flat)
    err = common.relative_error(g.tolist(), fd)
    print(f"gradient check (n16 T6 f64, jax.grad vs central differences): relative error {err:.2e}")
    if not err < 1e-7:
        common.fail(f"burgers_jax: the gradient is wrong (relative error {err:.3e})")


def main() -> None:
    args = common.parse_args("Burgers 1-D (JAX peer of tapeflow_bench --suite burgers)")
    import jax

    jax.config.update("jax_enable_x64", True)  # for the float64 check; the timed run is float32
    import jax.numpy as jnp
    import numpy as np

    check_gradient(jax, jnp, np)

    n, steps = timed_size(args.quick)
    size = size_string(n, steps)
    u0 = jax.device_put(jnp.asarray(initial_state(np, n, np.float32, seed=20261140)))
    device = jax.devices()[0]
    rows = []
    primal_ms = None
    for variant, remat in (("jax-jit", False), ("jax-checkpoint", True)):
        run, loss = make_functions(jax, jnp, steps, remat)
        primal = jax.jit(run)
        grad = jax.jit(jax.grad(loss))
        if primal_ms is None:  # remat changes only the gradient
            primal_ms = common.median_ms_jax(lambda: primal(u0), args.warmup, args.repeats)
        try:
            if grad(u0).dtype != jnp.float32:
                common.fail("burgers_jax: the timed gradient is not float32")
            grad_ms = common.median_ms_jax(lambda: grad(u0), args.warmup, args.repeats)
        except Exception as e:  # XLA reports exhausted memory as a runtime error
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
            rows.append({"workload": "burgers", "variant": variant, "size": size, "peer": "jax",
                         "error": "out of memory"})
            print(f"burgers {variant}: out of memory")
            continue
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        peak = int(stats.get("peak_bytes_in_use", 0)) if stats else 0
        rows.append(common.row("burgers", variant, size, primal_ms, grad_ms, "jax", peak_device_bytes=peak,
                               platform=device.platform))
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
