# SPDX-License-Identifier: Apache-2.0
"""GMM (ADBench's objective, float64) in JAX: jax.jit of the objective against
jax.jit(jax.value_and_grad(...)) with respect to alphas, means and icf. The peer of the
tapeflow_bench suite `gmm` (same sizes, same size strings, same objective as gmm_torch.py).

    python3 bench/peers/gmm_jax.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]
"""
from __future__ import annotations

import functools
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from gmm_problem import FULL, GAMMA, QUICK, M, log_gamma_distrib, size_name  # noqa: E402


def make_objective(d: int, k: int, n: int, gamma: float = GAMMA, m: int = M):
    import jax.numpy as jnp
    import numpy as np

    rows = np.array([row for col in range(d) for row in range(col + 1, d)], dtype=np.int32)
    cols = np.array([col for col in range(d) for row in range(col + 1, d)], dtype=np.int32)
    constant = -n * d * 0.5 * math.log(2 * math.pi)
    dof = d + m + 1
    cw = dof * d * (math.log(gamma) - 0.5 * math.log(2)) - log_gamma_distrib(0.5 * dof, d)

    def objective(alphas, means, icf, x):
        from jax.scipy.special import logsumexp

        qdiags = jnp.exp(icf[:, :d])
        sum_qs = jnp.sum(icf[:, :d], 1)
        ls = jnp.zeros((k, d, d), dtype=icf.dtype).at[:, rows, cols].set(icf[:, d:])
        xcentered = x[:, None, :] - means[None, :, :]                    # N x K x d
        lx = qdiags[None] * xcentered + jnp.einsum("kij,nkj->nki", ls, xcentered)
        inner = alphas + sum_qs - 0.5 * jnp.sum(lx ** 2, 2)              # N x K
        slse = jnp.sum(logsumexp(inner, axis=1))
        prior = jnp.sum(0.5 * gamma * gamma * (jnp.sum(qdiags ** 2, 1) + jnp.sum(icf[:, d:] ** 2, 1)) - m * sum_qs)
        return constant + slse - n * logsumexp(alphas) + prior - k * cw

    return objective


def make_inputs(d: int, k: int, n: int, seed: int):
    import jax
    import jax.numpy as jnp

    ka, km, ki, kx = jax.random.split(jax.random.PRNGKey(seed), 4)
    f64 = jnp.float64
    return (jax.random.normal(ka, (k,), f64), jax.random.uniform(km, (k, d), f64),
            0.1 * jax.random.normal(ki, (k, d * (d + 1) // 2), f64), jax.random.uniform(kx, (n, d), f64))


def check_gradient() -> None:
    """jax.grad against central differences at a tiny size, once, before timing."""
    import jax
    import numpy as np

    d, k, n = 3, 3, 7
    f = make_objective(d, k, n)
    alphas, means, icf, x = make_inputs(d, k, n, 7)
    grads = jax.grad(f, argnums=(0, 1, 2))(alphas, means, icf, x)
    analytic = [float(v) for g in grads for v in np.asarray(g).ravel()]
    params = [np.array(p, dtype=np.float64) for p in (alphas, means, icf)]
    fd = []
    for which in range(3):
        fd += common.central_differences(lambda: f(*params, x), params[which].reshape(-1))
    common.check_gradient_error(analytic, fd, f"d{d} K{k} N{n} f64", "jax.grad", tol=1e-6)


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    import jax

    jax.config.update("jax_enable_x64", True)
    if not any(dev.platform == "gpu" for dev in jax.devices()):
        common.fail("gmm_jax: no GPU device")
    check_gradient()
    rows = []
    for d, k, n in QUICK if args.quick else FULL:
        f = make_objective(d, k, n)
        alphas, means, icf, x = make_inputs(d, k, n, 20261124 + d)
        inputs = (alphas, means, icf, x)
        primal = functools.partial(jax.jit(f), *inputs)
        value_and_grad = functools.partial(jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2))), *inputs)
        rows += common.jax_rows("gmm", size_name(d, k, n), primal, [("jax-jit", value_and_grad)], args)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
