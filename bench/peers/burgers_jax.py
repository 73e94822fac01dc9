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
    """(run, loss) for T steps (common.jax_scan_functions). With `remat`, each step is wrapped in
    jax.checkpoint."""
    def step(u):
        left, right = jnp.roll(u, 1), jnp.roll(u, -1)  # u_{j-1}, u_{j+1}
        return u - A * u * (right - left) + B * (right - 2 * u + left)

    return common.jax_scan_functions(jax, jnp, step, steps, remat)


def check_gradient(jax, jnp, np) -> None:
    """dL/du0 at n16 T6 in float64 against central differences."""
    n, steps = 16, 6
    _, loss = make_functions(jax, jnp, steps)
    common.check_jax_gradient(jax, loss, initial_state(np, n, np.float64, seed=7), size_string(n, steps, "f64"))


def main() -> None:
    args = common.parse_args("Burgers 1-D (JAX peer of tapeflow_bench --suite burgers)")
    jax, jnp, np = common.import_jax()  # float64 for the check; the timed run is float32
    check_gradient(jax, jnp, np)

    n, steps = timed_size(args.quick)
    u0 = jax.device_put(jnp.asarray(initial_state(np, n, np.float32, seed=20261140)))
    rows = common.jax_remat_rows(jax, "burgers", size_string(n, steps),
                                 lambda remat: make_functions(jax, jnp, steps, remat), (u0,), args,
                                 platform=jax.devices()[0].platform)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
