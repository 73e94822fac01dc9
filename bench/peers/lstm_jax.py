# SPDX-License-Identifier: Apache-2.0
"""LSTM peer in JAX: the same problem as tapeflow_bench's `lstm` suite (docs/workloads/lstm.md).

One layer, f32, gates i, f, g, o; x: T x B x I, h0 = c0 = 0; loss L = sum(h_T); gradient
dL/d(W, U, b). Variant "jax-jit": the steps as lax.scan over W x_t precomputed in one matmul,
jax.jit(loss) for the primal and jax.jit(jax.grad(loss)) for the gradient, every matmul at
precision HIGHEST (full fp32, no TF32), like tapeflow's cuBLAS calls; "jax-checkpoint": the same
with each step under jax.checkpoint.

The packed size ("B1024 T300 I80 H256 packed": sequence b runs packed_lengths' L_b steps, h_T
being each sequence's last h) runs both variants as JAX code does variable lengths: shapes under
jit are static, so every step runs over the whole padded batch and a mask keeps the state of the
sequences that have ended (jnp.where), as Flax's RNN does with seq_lengths. It computes the same
gradient as a packed LSTM, with the padded batch's work.

Before timing, the gradients are checked once in float64 at a tiny size, padded and packed,
against central finite differences; the script exits non-zero when one is wrong.

    python3 bench/peers/lstm_jax.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]
"""
from __future__ import annotations

import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

from lstm_sizes import CHECK_SIZE, packed_lengths, size_string, timed_sizes  # noqa: E402

WORKLOAD = "lstm"


def make_loss(remat: bool = False):
    """sum(h_T); with `remat`, each step is wrapped in jax.checkpoint (recomputed in the backward).
    The loss takes a `running` mask (T x B x 1, true while sequence b is longer than t) for packed
    sequences, or None."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    highest = lax.Precision.HIGHEST

    def loss(params, x, running=None):
        w, u, b = params
        t_, b_, i_ = x.shape
        h_ = u.shape[1]
        wx = jnp.dot(x.reshape(t_ * b_, i_), w.T, precision=highest).reshape(t_, b_, 4 * h_)

        def step(carry, inputs):
            h, c = carry
            wx_t, running_t = inputs
            z = wx_t + jnp.dot(h, u.T, precision=highest) + b
            i, f, g, o = jnp.split(z, 4, axis=-1)
            i = jax.nn.sigmoid(i)
            f = jax.nn.sigmoid(f)
            g = jnp.tanh(g)
            o = jax.nn.sigmoid(o)
            c_next = f * c + i * g
            h_next = o * jnp.tanh(c_next)
            if running_t is not None:  # ended sequences keep their state
                c_next = jnp.where(running_t, c_next, c)
                h_next = jnp.where(running_t, h_next, h)
            return (h_next, c_next), None

        zeros = jnp.zeros((b_, h_), x.dtype)
        (h, _), _ = lax.scan(jax.checkpoint(step) if remat else step, (zeros, zeros), (wx, running))
        return jnp.sum(h)

    return loss


def running_mask(lengths, t_: int):
    """T x B x 1: whether sequence b is still running at step t; None for a padded batch."""
    if lengths is None:
        return None
    import numpy as np
    import jax.numpy as jnp

    return jnp.asarray(np.arange(t_)[:, None, None] < np.asarray(lengths)[None, :, None])


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


def check_gradient(loss, lengths=None) -> None:
    """Once, in float64 at a tiny size (packed when `lengths` are given): jax.grad against central
    finite differences."""
    import numpy as np
    import jax
    import jax.numpy as jnp

    params, x = make_problem(CHECK_SIZE, jnp.float64, seed=7)
    if params[0].dtype != jnp.float64:
        common.fail("lstm_jax: float64 is not enabled (jax_enable_x64)")
    running = running_mask(lengths, CHECK_SIZE[1])
    grads = jax.jit(jax.grad(loss))(params, x, running)
    f = jax.jit(loss)
    h = 1e-6
    what = "packed" if lengths else "padded"
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
            fd.append((float(f(tuple(pu), x, running)) - float(f(tuple(pd), x, running))) / (2 * h))
        err = common.relative_error(np.asarray(gp).reshape(-1).tolist(), fd)
        if not err < 1e-7:
            common.fail(f"lstm_jax: float64 {what} dL/d{which} vs finite differences: relative error {err:.3e}")
    if lengths:
        # The mask is the packing: the batch's gradient is the sum of each sequence's alone, run
        # for its own length only.
        def flat(gs):
            return np.concatenate([np.asarray(g_).reshape(-1) for g_ in gs]).tolist()

        alone = [jax.grad(loss)(params, x[:n, k:k + 1, :]) for k, n in enumerate(lengths)]
        err = common.relative_error(flat(grads), flat([sum(g_[j] for g_ in alone) for j in range(3)]))
        if not err < 1e-12:
            common.fail(f"lstm_jax: the masked batch's gradient is not the sum of its sequences': {err:.3e}")
    print(f"lstm_jax: {what} gradient checks out (float64 vs finite differences"
          + (", and vs its sequences run alone)" if lengths else ")"))


def main() -> None:
    args = common.parse_args("LSTM peer in JAX: lax.scan, jit(grad), precision HIGHEST")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # for the float64 check; the timed runs are float32
    jax.config.update("jax_default_matmul_precision", "highest")
    if jax.devices()[0].platform != "gpu":
        common.fail(f"lstm_jax: no GPU (JAX runs on {jax.devices()[0].platform})")
    for remat in (False, True):
        for lengths in (None, packed_lengths(CHECK_SIZE[0], CHECK_SIZE[1])):
            check_gradient(make_loss(remat), lengths)

    rows = []
    for variant, remat in common.JAX_VARIANTS:
        loss = make_loss(remat)
        primal = jax.jit(loss)
        grad = jax.jit(jax.grad(loss))
        # Every size padded, then the longer one packed (a masked scan), as tapeflow_bench's suite.
        for shape, lengths in timed_sizes(args.quick):
            params, x = make_problem(shape, jnp.float32, seed=20261124)
            inputs = (params, x, running_mask(lengths, shape[1]))
            math = "fp32, precision HIGHEST" + ("; masked scan over the padded batch" if lengths else "")
            size = size_string(*shape, packed=lengths is not None)
            rows += common.jax_rows(WORKLOAD, size, functools.partial(primal, *inputs),
                                    [(variant, functools.partial(grad, *inputs))], args, math=math)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
