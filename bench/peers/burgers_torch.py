# SPDX-License-Identifier: Apache-2.0
"""Burgers 1-D in PyTorch: the peer of tapeflow_bench's `burgers` suite (docs/workloads/burgers.md).

Same problem as tapeflow: a periodic line of n cells, T steps of
u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1}) (a = 0.1, b = 0.2; the
neighbours by torch.roll), L = 0.5 sum u_T^2, gradient dL/du0 by autograd; a smooth random start
of the same kind. primal = T steps without grad; grad = forward + backward of L.

    python3 bench/peers/burgers_torch.py --out ROWS.json [--quick]

Rows: workload "burgers", variants "pytorch-eager", "torch.compile" (the step compiled),
"torch-checkpoint" (torch.utils.checkpoint around every step) and "torch-save-on-cpu" (saved
tensors offloaded to pinned host memory), size "n67108864 T100 f32" ("n1048576 T20 f32" under
--quick), peer "pytorch". Before timing, the eager and compiled gradients are checked at n16 T6 in
float64 against central differences; a wrong gradient exits non-zero. Without CUDA only --quick
runs, on the CPU (wall-clock times; rows say platform "cpu").
"""
from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from burgers_problem import A, B, size_string, start_modes, timed_size  # noqa: E402


def step(u):
    import torch

    left, right = torch.roll(u, 1), torch.roll(u, -1)  # u_{j-1}, u_{j+1}
    return u - A * u * (right - left) + B * (right - 2 * u + left)


def initial_state(torch, n: int, dtype, device, seed: int):
    x = torch.arange(n, dtype=torch.float64, device=device) * (2 * math.pi / n)
    u = torch.zeros(n, dtype=torch.float64, device=device)
    for m, (amp, phase) in enumerate(start_modes(seed)):
        u += amp * torch.sin((m + 1) * x + phase)
    return u.to(dtype)


def check_gradient(torch, device) -> None:
    """dL/du0 at n16 T6 in float64 against central differences, for eager and compiled steps."""
    n, steps = 16, 6
    u0 = initial_state(torch, n, torch.float64, device, seed=7)
    checked = [("eager", step), ("torch.compile", torch.compile(step, dynamic=False))]
    common.check_torch_gradient(torch, lambda s, u: common.final_energy(s, u, steps), u0,
                                size_string(n, steps, "f64"), checked)


def main() -> None:
    args = common.parse_args("Burgers 1-D (PyTorch peer of tapeflow_bench --suite burgers)")
    import torch

    device = common.torch_device(torch, cpu_smoke=args.quick)
    check_gradient(torch, device)

    n, steps = timed_size(args.quick)
    u0 = initial_state(torch, n, torch.float32, device, seed=20261140)
    variants = common.torch_step_variants(torch, step, torch.compile(step, dynamic=False))
    rows = common.torch_final_energy_rows(torch, "burgers", size_string(n, steps), variants, u0, steps, args,
                                          platform="gpu" if device == "cuda" else "cpu")
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
