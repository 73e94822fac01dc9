# SPDX-License-Identifier: Apache-2.0
"""LBM D2Q9 in JAX: the peer of tapeflow_bench's `lbm` suite (docs/workloads/lbm.md).

Same problem as tapeflow: a periodic nx x ny lattice, state f as 9 planes (here a (9, ny, nx)
array, cell = y*nx + x), T steps of BGK collision (tau = 0.8) then push streaming (jnp.roll),
L = 0.5 * sum(f_T^2); the same near-equilibrium initial distribution (a different seed).
primal = jax.jit of T steps; grad = jax.jit(jax.grad(loss)) (forward + backward of L).

    python3 bench/peers/lbm_jax.py --out ROWS.json [--quick]

Rows: workload "lbm", variant "jax-jit", size "1024x1024 T100 f32" ("128x128 T10 f32" under
--quick), peer "jax". Before timing, the gradient is checked at 6x5 T3 in float64 against central
finite differences; a wrong gradient exits non-zero.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from lbm_lattice import CX, CY, TAU, W, equilibrium, size_string  # noqa: E402


def initial_state(np, nx: int, ny: int, dtype, seed: int):
    """rho = 1 + 0.1 r, u = 0.05 (r', r''), f_i = feq_i(rho, u) (1 + 0.05 r_i), r uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)

    def r(*shape):
        return rng.uniform(-1.0, 1.0, size=shape)

    rho, ux, uy = 1 + 0.1 * r(ny, nx), 0.05 * r(ny, nx), 0.05 * r(ny, nx)
    cx = np.array(CX, dtype=np.float64).reshape(9, 1, 1)
    cy = np.array(CY, dtype=np.float64).reshape(9, 1, 1)
    w = np.array(W, dtype=np.float64).reshape(9, 1, 1)
    f = equilibrium(rho, ux, uy, cx, cy, w) * (1 + 0.05 * r(9, ny, nx))
    return f.astype(dtype)


def make_functions(jax, jnp, steps: int, remat: bool = False):
    """(run, loss) for T steps; the lattice constants take the state's dtype. With `remat`, each
    step is wrapped in jax.checkpoint: its residuals are recomputed in the backward pass."""
    omega = 1.0 / TAU

    def step(f):
        cx = jnp.asarray(CX, dtype=f.dtype).reshape(9, 1, 1)
        cy = jnp.asarray(CY, dtype=f.dtype).reshape(9, 1, 1)
        w = jnp.asarray(W, dtype=f.dtype).reshape(9, 1, 1)
        rho = f.sum(0)
        ux = (cx * f).sum(0) / rho
        uy = (cy * f).sum(0) / rho
        post = f - omega * (f - equilibrium(rho, ux, uy, cx, cy, w))
        # Push: f_next(x + c_i, i) = post_i(x); axes (0, 1) of a plane are (y, x).
        return jnp.stack([jnp.roll(post[i], shift=(CY[i], CX[i]), axis=(0, 1)) for i in range(9)])

    body = jax.checkpoint(step) if remat else step

    def run(f):
        return jax.lax.fori_loop(0, steps, lambda _, g: body(g), f)

    def loss(f):
        return 0.5 * jnp.sum(run(f) ** 2)

    return run, loss


def check_gradient(jax, jnp, np) -> None:
    """dL/df0 at 6x5 T3 in float64 against central differences."""
    nx, ny, steps = 6, 5, 3
    f0 = initial_state(np, nx, ny, np.float64, seed=7)
    _, loss = make_functions(jax, jnp, steps)
    g = np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(f0))).ravel()
    loss_jit = jax.jit(loss)
    flat = f0.ravel().copy()
    fd = common.central_differences(lambda: loss_jit(jnp.asarray(flat.reshape(f0.shape))), flat)
    err = common.relative_error(g.tolist(), fd)
    print(f"gradient check (6x5 T3 f64, jax.grad vs central differences): relative error {err:.2e}")
    if not err < 1e-7:
        common.fail(f"lbm_jax: the gradient is wrong (relative error {err:.3e})")


def main() -> None:
    args = common.parse_args("LBM D2Q9 (JAX peer of tapeflow_bench --suite lbm)")
    import jax

    jax.config.update("jax_enable_x64", True)  # for the float64 check; the timed run is float32
    import jax.numpy as jnp
    import numpy as np

    check_gradient(jax, jnp, np)

    nx, ny, steps = (128, 128, 10) if args.quick else (1024, 1024, 100)
    size = size_string(nx, ny, steps)
    f0 = jax.device_put(jnp.asarray(initial_state(np, nx, ny, np.float32, seed=20261140)))
    device = jax.devices()[0]
    rows = []
    for variant, remat in (("jax-jit", False), ("jax-checkpoint", True)):
        run, loss = make_functions(jax, jnp, steps, remat)
        primal = jax.jit(run)
        grad = jax.jit(jax.grad(loss))
        if grad(f0).dtype != jnp.float32:
            common.fail("lbm_jax: the timed gradient is not float32")
        primal_ms = common.median_ms_jax(lambda: primal(f0), args.warmup, args.repeats)
        grad_ms = common.median_ms_jax(lambda: grad(f0), args.warmup, args.repeats)
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        peak = int(stats.get("peak_bytes_in_use", 0)) if stats else 0
        rows.append(common.row("lbm", variant, size, primal_ms, grad_ms, "jax", peak_device_bytes=peak,
                               platform=device.platform))
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
