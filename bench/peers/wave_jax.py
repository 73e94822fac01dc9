# SPDX-License-Identifier: Apache-2.0
"""The acoustic wave equation in JAX: the peer of tapeflow_bench's `wave` suite
(docs/workloads/wave.md).

Same problem as tapeflow (wave_problem.py): a 2-D or 3-D grid, zero outside (the Laplacian over
a zero-padded copy), from rest, the Ricker source at the centre cell, the misfit of the
receivers' row against observed traces summed at every step, gradient dL/dm with respect to the
squared slowness; a model and traces of the same kind. primal = jax.jit of T steps and the misfit
(lax.scan over the wavelet and the traces); grad = jax.jit(jax.grad(loss)) (forward + backward).

    python3 bench/peers/wave_jax.py --out ROWS.json [--quick]

Rows: workload "wave", variants "jax-jit" (residuals kept) and "jax-checkpoint" (jax.checkpoint
around each step: recomputed in the backward pass), sizes "4096x4096 T100 f32" and
"256x256x256 T100 f32" ("256x256 T20 f32" and "32x32x32 T20 f32" under --quick), peer "jax".
Before timing, the gradient is checked at 6x5 T12 and 5x4x3 T12 (the wavelet peaking within them)
in float64 against central differences; a wrong gradient exits non-zero.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from wave_problem import (DT, H, PEAK_FREQUENCY, model_factors, receiver_row, ricker, shape,  # noqa: E402
                          size_string, source_index, timed_sizes, traces)


def inputs(np, nx: int, ny: int, nz: int, steps: int, dtype, seed: int, f: float = PEAK_FREQUENCY):
    """m, q and d (wave_problem.py) as NumPy arrays."""
    fx, fy, fz = (np.asarray(v, dtype=np.float64) for v in model_factors(nx, ny, nz, seed))
    m = 0.55 + 0.35 * fz[:, None, None] * fy[None, :, None] * fx[None, None, :]
    q = np.asarray(ricker(steps, DT, f))
    d = np.asarray(traces(nx, steps, seed)).reshape(steps, nx)
    return m.reshape(shape(nx, ny, nz)).astype(dtype), q.astype(dtype), d.astype(dtype)


def make_functions(jax, jnp, nx: int, ny: int, nz: int, remat: bool = False):
    """(run, loss) of (m, q, d): run gives (u_T, L), loss L. With `remat`, each step is wrapped in
    jax.checkpoint: its residuals are recomputed in the backward pass."""
    source, row = source_index(nx, ny, nz), receiver_row(nx, ny, nz)

    def laplacian(u):
        p = jnp.pad(u, 1)
        inner = [slice(1, -1)] * u.ndim
        total = -2 * u.ndim * u
        for axis in range(u.ndim):
            for side in (slice(None, -2), slice(2, None)):
                at = list(inner)
                at[axis] = side
                total = total + p[tuple(at)]
        return total * (1 / (H * H))

    def step(k, carry, q_t, d_t):
        u_prev, u, misfit = carry
        s = laplacian(u).at[source].add(q_t)
        r = u[row] - d_t
        return u, 2 * u - u_prev + k * s, misfit + 0.5 * jnp.sum(r * r)

    body = jax.checkpoint(step) if remat else step

    def run(m, q, d):
        k = DT * DT / m
        start = (jnp.zeros_like(m), jnp.zeros_like(m), jnp.zeros((), m.dtype))
        (_, u, misfit), _ = jax.lax.scan(lambda c, qd: (body(k, c, *qd), None), start, (q, d))
        return u, misfit

    def loss(m, q, d):
        return run(m, q, d)[1]

    return run, loss


def check_gradient(jax, jnp, np) -> None:
    """dL/dm at 6x5 T12 and 5x4x3 T12 (peak frequency 0.5: the wavelet peaks at step 10) in float64
    against central differences."""
    steps = 12
    for nx, ny, nz in ((6, 5, 1), (5, 4, 3)):
        m, q, d = inputs(np, nx, ny, nz, steps, np.float64, seed=7, f=0.5)
        _, loss = make_functions(jax, jnp, nx, ny, nz)
        common.check_jax_gradient(jax, loss, m, size_string(nx, ny, nz, steps, "f64"), q, d)


def main() -> None:
    args = common.parse_args("acoustic wave 2-D and 3-D (JAX peer of tapeflow_bench --suite wave)")
    jax, jnp, np = common.import_jax()  # float64 for the check; the timed run is float32
    check_gradient(jax, jnp, np)

    rows = []
    for nx, ny, nz, steps in timed_sizes(args.quick):
        arrays = tuple(jax.device_put(a) for a in inputs(np, nx, ny, nz, steps, np.float32, seed=20261140))
        rows += common.jax_remat_rows(jax, "wave", size_string(nx, ny, nz, steps),
                                      lambda remat: make_functions(jax, jnp, nx, ny, nz, remat), arrays, args,
                                      platform=jax.devices()[0].platform)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
