# SPDX-License-Identifier: Apache-2.0
"""LSTM peer in JAX: the same problem as tapeflow_bench's `lstm` suite (docs/workloads/lstm.md).

One layer, f32, gates i, f, g, o; x: T x B x I, h0 = c0 = 0; loss L = sum(h_T); gradient
dL/d(W, U, b). Variant "jax-jit": the steps as lax.scan over W x_t precomputed in one matmul,
jax.jit(loss) for the primal and jax.jit(jax.grad(loss)) for the gradient, every matmul at
precision HIGHEST (full fp32, no TF32), like tapeflow's cuBLAS calls. Before timing, the gradient
is checked once in float64 at a tiny size against central finite differences; the script exits
non-zero when it is wrong.

    python3 bench/peers/lstm_jax.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

WORKLOAD = "lstm"
SIZES = [(1024, 20, 300, 192), (1024, 300, 80, 256)]  # (B, T, I, H), as tapeflow_bench's lstm suite
QUICK_SIZES = [(64, 5, 16, 32)]
CHECK_SIZE = (3, 4, 4, 5)


def size_string(b: int, t: int, i: int, h: int) -> str:
    return f"B{b} T{t} I{i} H{h}"


def make_loss(remat: bool = False):
    """sum(h_T); with `remat`, each step is wrapped in jax.checkpoint (recomputed in the backward)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    highest = lax.Precision.HIGHEST

    def loss(params, x):
        w, u, b = params
        t_, b_, i_ = x.shape
        h_ = u.shape[1]
        wx = jnp.dot(x.reshape(t_ * b_, i_), w.T, precision=highest).reshape(t_, b_, 4 * h_)

        def step(carry, wx_t):
            h, c = carry
            z = wx_t + jnp.dot(h, u.T, precision=highest) + b
            i, f, g, o = jnp.split(z, 4, axis=-1)
            i = jax.nn.sigmoid(i)
            f = jax.nn.sigmoid(f)
            g = jnp.tanh(g)
            o = jax.nn.sigmoid(o)
            c = f * c + i * g
            h = o * jnp.tanh(c)
            return (h, c), None

        zeros = jnp.zeros((b_, h_), x.dtype)
        (h, _), _ = lax.scan(jax.checkpoint(step) if remat else step, (zeros, zeros), wx)
        return jnp.sum(h)

    return loss


def make_problem(shape, dtype, seed):
    """Weights uniform in +-1/sqrt(H) (PyTorch's initialisation), inputs uniform in +-1."""
    import numpy as np
    import jax.numpy as jnp

    b_, t_, i_, h_ = shape
    rng = np.random.default_rng(seed)
    k = 1.0 / h_ ** 0.5
    w = rng.uniform(-k, k, (4 * h_, i_))
    u = rng.uniform(-k, k, (4 * h_, h_))
    b = rng.uniform(-k, k, (4 * h_,))
    x = rng.uniform(-1.0, 1.0, (t_, b_, i_))
    return (jnp.asarray(w, dtype), jnp.asarray(u, dtype), jnp.asarray(b, dtype)), jnp.asarray(x, dtype)


def check_gradient(loss) -> None:
    """Once, in float64 at a tiny size: jax.grad against central finite differences."""
    import numpy as np
    import jax
    import jax.numpy as jnp

    params, x = make_problem(CHECK_SIZE, jnp.float64, seed=7)
    if params[0].dtype != jnp.float64:
        common.fail("lstm_jax: float64 is not enabled (jax_enable_x64)")
    grads = jax.jit(jax.grad(loss))(params, x)
    f = jax.jit(loss)
    h = 1e-6
    for which, p, gp in zip("WUb", params, grads):
        base = np.asarray(p)
        fd = []
        for k in range(base.size):
            up = base.copy().reshape(-1)
            down = base.copy().reshape(-1)
            up[k] += h
            down[k] -= h
            pu = list(params)
            pd = list(params)
            pu["WUb".index(which)] = jnp.asarray(up.reshape(base.shape))
            pd["WUb".index(which)] = jnp.asarray(down.reshape(base.shape))
            fd.append((float(f(tuple(pu), x)) - float(f(tuple(pd), x))) / (2 * h))
        err = common.relative_error(np.asarray(gp).reshape(-1).tolist(), fd)
        if not err < 1e-7:
            common.fail(f"lstm_jax: float64 dL/d{which} vs finite differences: relative error {err:.3e}")
    print("lstm_jax: gradient checks out (float64 vs finite differences)")


def peak_bytes() -> int:
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return int(stats.get("peak_bytes_in_use", 0))


def main() -> None:
    args = common.parse_args("LSTM peer in JAX: lax.scan, jit(grad), precision HIGHEST")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # for the float64 check; the timed runs are float32
    jax.config.update("jax_default_matmul_precision", "highest")
    if jax.devices()[0].platform != "gpu":
        common.fail(f"lstm_jax: no GPU (JAX runs on {jax.devices()[0].platform})")
    check_gradient(make_loss())
    check_gradient(make_loss(remat=True))

    rows = []
    for variant, remat in (("jax-jit", False), ("jax-checkpoint", True)):
        loss = make_loss(remat)
        primal = jax.jit(loss)
        grad = jax.jit(jax.grad(loss))
        for shape in QUICK_SIZES if args.quick else SIZES:
            params, x = make_problem(shape, jnp.float32, seed=20261124)
            primal_ms = common.median_ms_jax(lambda: primal(params, x), args.warmup, args.repeats)
            grad_ms = common.median_ms_jax(lambda: grad(params, x), args.warmup, args.repeats)
            rows.append(common.row(WORKLOAD, variant, size_string(*shape), primal_ms, grad_ms, "jax",
                                   peak_device_bytes=peak_bytes(), math="fp32, precision HIGHEST"))
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
