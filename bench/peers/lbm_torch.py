# SPDX-License-Identifier: Apache-2.0
"""LBM D2Q9 in PyTorch: the peer of tapeflow_bench's `lbm` suite (docs/workloads/lbm.md).

Same problem as tapeflow: a periodic nx x ny lattice, state f as 9 planes (here a (9, ny, nx)
tensor, cell = y*nx + x), T steps of BGK collision (tau = 0.8) then push streaming (torch.roll),
L = 0.5 * sum(f_T^2); the same near-equilibrium initial distribution (a different seed).
primal = T steps without grad; grad = forward + backward of L.

    python3 bench/peers/lbm_torch.py --out ROWS.json [--quick]

Rows: workload "lbm", variants "pytorch-eager", "torch.compile", "torch-checkpoint" and
"torch-save-on-cpu" (common.torch_step_variants), size "1024x1024 T100 f32"
("128x128 T10 f32" under --quick), peer "pytorch". Before timing, the gradient is checked at
6x5 T3 in float64 against central finite differences; a wrong gradient exits non-zero.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from lbm_lattice import CX, CY, TAU, W, equilibrium, size_string  # noqa: E402


def lattice(torch, dtype, device):
    shape = (9, 1, 1)
    return (torch.tensor(CX, dtype=dtype, device=device).reshape(shape),
            torch.tensor(CY, dtype=dtype, device=device).reshape(shape),
            torch.tensor(W, dtype=dtype, device=device).reshape(shape))


def initial_state(torch, nx: int, ny: int, dtype, device, seed: int):
    """rho = 1 + 0.1 r, u = 0.05 (r', r''), f_i = feq_i(rho, u) (1 + 0.05 r_i), r uniform in [-1, 1)."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def r(*shape):
        return torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1

    rho, ux, uy = 1 + 0.1 * r(ny, nx), 0.05 * r(ny, nx), 0.05 * r(ny, nx)
    cx, cy, w = lattice(torch, torch.float64, "cpu")
    f = equilibrium(rho, ux, uy, cx, cy, w) * (1 + 0.05 * r(9, ny, nx))
    return f.to(dtype=dtype, device=device)


def make_step(torch, dtype, device):
    cx, cy, w = lattice(torch, dtype, device)
    omega = 1.0 / TAU

    def step(f):
        rho = f.sum(0)
        ux = (cx * f).sum(0) / rho
        uy = (cy * f).sum(0) / rho
        post = f - omega * (f - equilibrium(rho, ux, uy, cx, cy, w))
        # Push: f_next(x + c_i, i) = post_i(x); dims (0, 1) of a plane are (y, x).
        return torch.stack([torch.roll(post[i], shifts=(CY[i], CX[i]), dims=(0, 1)) for i in range(9)])

    return step


def check_gradient(torch, device) -> None:
    """dL/df0 at 6x5 T3 in float64 against central differences, for eager and compiled steps."""
    nx, ny, steps = 6, 5, 3
    f0 = initial_state(torch, nx, ny, torch.float64, device, seed=7)
    checked = [("eager", make_step(torch, torch.float64, device)),
               ("torch.compile", torch.compile(make_step(torch, torch.float64, device)))]
    common.check_torch_gradient(torch, lambda step, f: common.final_energy(step, f, steps), f0,
                                size_string(nx, ny, steps, "f64"), checked)


def main() -> None:
    args = common.parse_args("LBM D2Q9 (PyTorch peer of tapeflow_bench --suite lbm)")
    import torch

    device = common.torch_device(torch)
    check_gradient(torch, device)

    nx, ny, steps = (128, 128, 10) if args.quick else (1024, 1024, 100)
    f0 = initial_state(torch, nx, ny, torch.float32, device, seed=20261140)
    variants = common.torch_step_variants(torch, make_step(torch, torch.float32, device),
                                          torch.compile(make_step(torch, torch.float32, device)))
    rows = common.torch_final_energy_rows(torch, "lbm", size_string(nx, ny, steps), variants, f0, steps, args)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
