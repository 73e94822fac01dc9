# SPDX-License-Identifier: Apache-2.0
"""LBM D2Q9 in JAX: the peer of tapeflow_bench's `lbm` suite (docs/workloads/lbm.md).

Same problem as tapeflow: a periodic nx x ny lattice, state f as 9 planes (here a (9, ny, nx)
array, cell = y*nx + x), T steps of BGK collision (tau = 0.8) then push streaming (jnp.roll),
L = 0.5 * sum(f_T^2); the same near-equilibrium initial distribution (a different seed).
primal = jax.jit of T steps; grad = jax.jit(jax.grad(loss)) (forward + backward of L).

    python3 bench/peers/lbm_jax.py --out ROWS.json [--quick]

Rows: workload "lbm", variants "jax-jit" and "jax-checkpoint" (jax.checkpoint around each step),
size "1024x1024 T100 f32" ("128x128 T10 f32" under --quick), peer "jax". Before timing, the
gradient is checked at 6x5 T3 in float64 against central finite differences; a wrong gradient
exits non-zero.
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
    _, loss = make_functions(jax, jnp, steps)
    f0 = initial_state(np, nx, ny, np.float64, seed=7)
    common.check_jax_gradient(jax, loss, f0, size_string(nx, ny, steps, "f64"))


def main() -> None:
    args = common.parse_args("LBM D2Q9 (JAX peer of tapeflow_bench --suite lbm)")
    jax, jnp, np = common.import_jax()  # float64 for the check; the timed run is float32
    check_gradient(jax, jnp, np)

    nx, ny, steps = (128, 128, 10) if args.quick else (1024, 1024, 100)
    f0 = jax.device_put(jnp.asarray(initial_state(np, nx, ny, np.float32, seed=20261140)))
    rows = common.jax_remat_rows(jax, "lbm", size_string(nx, ny, steps),
                                 lambda remat: make_functions(jax, jnp, steps, remat), (f0,), args,
                                 platform=jax.devices()[0].platform)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
