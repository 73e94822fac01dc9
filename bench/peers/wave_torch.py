# SPDX-License-Identifier: Apache-2.0
"""The acoustic wave equation in PyTorch: the peer of tapeflow_bench's `wave` suite
(docs/workloads/wave.md).

Same problem as tapeflow (wave_problem.py): a 2-D or 3-D grid, zero outside (the Laplacian over
a zero-padded copy), from rest, the Ricker source at the centre cell, the misfit of the
receivers' row against observed traces summed at every step, gradient dL/dm with respect to the
squared slowness by autograd; a model and traces of the same kind. primal = T steps (and the
misfit) without grad; grad = forward + backward of L.

    python3 bench/peers/wave_torch.py --out ROWS.json [--quick]

Rows: workload "wave", variants "pytorch-eager", "torch.compile" (the step compiled),
"torch-checkpoint" (torch.utils.checkpoint around every step) and "torch-save-on-cpu" (saved
tensors offloaded to pinned host memory), sizes "4096x4096 T100 f32" and "256x256x256 T100 f32"
("256x256 T20 f32" and "32x32x32 T20 f32" under --quick), peer "pytorch". Before timing, the eager
gradient is checked at 6x5 T12 and 5x4x3 T12 (the wavelet peaking within them), the compiled one
at 5x4x3 T12, in float64 against central differences; a wrong gradient exits non-zero. Without CUDA only --quick
runs, on the CPU (wall-clock times; rows say platform "cpu").
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from wave_problem import (DT, H, PEAK_FREQUENCY, model_factors, receiver_row, ricker, shape,  # noqa: E402
                          size_string, source_index, timed_sizes, traces)


def laplacian(torch, u):
    """The (2 dims + 1)-point Laplacian / h^2 of u, zero outside the grid."""
    p = torch.nn.functional.pad(u, (1, 1) * u.dim())
    inner = [slice(1, -1)] * u.dim()
    total = -2 * u.dim() * u
    for axis in range(u.dim()):
        for side in (slice(None, -2), slice(2, None)):
            at = list(inner)
            at[axis] = side
            total = total + p[tuple(at)]
    return total * (1 / (H * H))


def make_step(torch, nx: int, ny: int, nz: int):
    """(u_{t-1}, u_t, L_t) -> (u_t, u_{t+1}, L_{t+1}), given k = dt^2 / m, q_t and the traces d_t."""
    source, row = source_index(nx, ny, nz), receiver_row(nx, ny, nz)

    def step(u_prev, u, misfit, k, q_t, d_t):
        s = laplacian(torch, u)
        s[source] += q_t
        r = u[row] - d_t
        return u, 2 * u - u_prev + k * s, misfit + 0.5 * (r * r).sum()

    return step


def compiled(torch, step):
    """torch.compile of a step, static shapes. Dynamo compiles it once per grid, dtype, grad mode
    and set of inputs that require grad (from rest, the first two steps differ from the rest):
    up to 11 graphs in one run, past Dynamo's default limit of 8 per function."""
    config = torch._dynamo.config
    for limit in ("recompile_limit", "cache_size_limit"):  # the name of newer and older PyTorch
        if hasattr(config, limit):
            setattr(config, limit, max(getattr(config, limit), 16))
    return torch.compile(step, dynamic=False)


def loss(step, m, q, d, steps: int):
    """L for the model m (shape()), the wavelet q (T) and the traces d (T x nx)."""
    k = DT * DT / m
    u_prev, u, misfit = m.new_zeros(m.shape), m.new_zeros(m.shape), m.new_zeros(())
    for t in range(steps):
        u_prev, u, misfit = step(u_prev, u, misfit, k, q[t], d[t])
    return misfit


def inputs(torch, nx: int, ny: int, nz: int, steps: int, dtype, device, seed: int, f: float = PEAK_FREQUENCY):
    """m, q and d (wave_problem.py) as tensors."""
    def tensor(values):
        return torch.tensor(values, dtype=torch.float64, device=device)

    fx, fy, fz = (tensor(v) for v in model_factors(nx, ny, nz, seed))
    m = 0.55 + 0.35 * fz[:, None, None] * fy[None, :, None] * fx[None, None, :]
    q = tensor(ricker(steps, DT, f))
    d = tensor(traces(nx, steps, seed)).reshape(steps, nx)
    return m.reshape(shape(nx, ny, nz)).to(dtype), q.to(dtype), d.to(dtype)


def check_gradient(torch, device) -> None:
    """dL/dm at 6x5 T12 and 5x4x3 T12 (peak frequency 0.5: the wavelet peaks at step 10) in float64
    against central differences, for the eager step and (3-D, the same code) the compiled one."""
    steps = 12
    for nx, ny, nz in ((6, 5, 1), (5, 4, 3)):
        m, q, d = inputs(torch, nx, ny, nz, steps, torch.float64, device, seed=7, f=0.5)
        eager = make_step(torch, nx, ny, nz)
        checked = [("eager", eager)] + ([("torch.compile", compiled(torch, eager))] if nz > 1 else [])
        common.check_torch_gradient(torch, lambda step, x: loss(step, x, q, d, steps), m,
                                    size_string(nx, ny, nz, steps, "f64"), checked)


def main() -> None:
    args = common.parse_args("acoustic wave 2-D and 3-D (PyTorch peer of tapeflow_bench --suite wave)")
    import torch

    device = common.torch_device(torch, cpu_smoke=args.quick)
    check_gradient(torch, device)

    rows = []
    for nx, ny, nz, steps in timed_sizes(args.quick):
        m, q, d = inputs(torch, nx, ny, nz, steps, torch.float32, device, seed=20261140)
        eager = make_step(torch, nx, ny, nz)

        def grad(step):
            return common.torch_gradient(torch, lambda x: loss(step, x, q, d, steps), m)

        rows += common.torch_rows(torch, "wave", size_string(nx, ny, nz, steps),
                                  common.torch_step_variants(torch, eager, compiled(torch, eager)),
                                  lambda step: loss(step, m, q, d, steps), grad, args,
                                  platform="gpu" if device == "cuda" else "cpu")
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
