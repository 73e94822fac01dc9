# SPDX-License-Identifier: Apache-2.0
"""Allen–Cahn in PyTorch: the brief's exact workload (periodic n x n, dt 0.05, eps2 1,
L = 0.5 sum u_T^2), gradient dL/du0 by autograd, timed like tapeflow_bench.

Variants: pytorch-eager, torch.compile (the step compiled), torch-checkpoint
(torch.utils.checkpoint around every step: recompute), torch-save-on-cpu
(torch.autograd.graph.save_on_cpu(pin_memory=True): an offload tier).
"""
from __future__ import annotations

import common
from allen_cahn_problem import DT, EPS2, size_string, timed_size


def step(u):
    import torch

    lap = (torch.roll(u, 1, 0) + torch.roll(u, -1, 0) + torch.roll(u, 1, 1) + torch.roll(u, -1, 1) - 4 * u)
    return u + DT * (EPS2 * lap + u - u ** 3)


def check_gradient() -> None:
    """Autograd against central differences in float64 on a tiny grid."""
    import torch

    g = torch.Generator().manual_seed(7)
    u0 = torch.rand(5, 5, generator=g, dtype=torch.float64) * 1.8 - 0.9
    common.check_torch_gradient(torch, lambda s, u: common.final_energy(s, u, 4), u0, "5x5 T4 f64",
                                [("eager", step)])


def main() -> None:
    args = common.parse_args(__doc__)
    import torch

    check_gradient()
    device = common.torch_device(torch)
    n, steps = timed_size(args.quick)
    g = torch.Generator(device=device).manual_seed(1)
    u0 = torch.rand(n, n, device=device, generator=g, dtype=torch.float32) * 1.8 - 0.9
    variants = common.torch_step_variants(torch, step, torch.compile(step))
    # Every row's primal is the eager steps' (the variants differ in the gradient).
    rows = common.torch_final_energy_rows(torch, "allen-cahn", size_string(n, steps), variants, u0, steps, args,
                                          primal_step=step)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
