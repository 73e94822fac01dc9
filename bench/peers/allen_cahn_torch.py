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


def loss(u0, steps: int, step_fn=step, wrap=None):
    u = u0
    for _ in range(steps):
        u = wrap(step_fn, u) if wrap else step_fn(u)
    return 0.5 * (u * u).sum()


def check_gradient() -> None:
    """Autograd against central differences in float64 on a tiny grid."""
    import torch

    g = torch.Generator().manual_seed(7)
    u0 = (torch.rand(5, 5, generator=g, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    (grad,) = torch.autograd.grad(loss(u0, 4), u0)
    flat = u0.detach().flatten().clone()
    with torch.no_grad():
        fd = common.central_differences(lambda: loss(flat.view_as(u0), 4), flat)
    err = common.relative_error(grad.flatten().tolist(), fd)
    if not err < 1e-7:
        common.fail(f"allen_cahn_torch: autograd gradient differs from finite differences ({err:.2e})")


def main() -> None:
    args = common.parse_args(__doc__)
    import torch
    import torch.utils.checkpoint as cp

    check_gradient()
    n, steps = timed_size(args.quick)
    size = size_string(n, steps)
    g = torch.Generator(device="cuda").manual_seed(1)
    u0 = torch.rand(n, n, device="cuda", generator=g, dtype=torch.float32) * 1.8 - 0.9

    def primal():
        with torch.no_grad():
            u = u0
            for _ in range(steps):
                u = step(u)
            return u

    primal_ms = common.median_ms_torch(primal, args.warmup, args.repeats)
    compiled_step = torch.compile(step)
    variants = {
        "pytorch-eager": lambda x: loss(x, steps),
        "torch.compile": lambda x: loss(x, steps, step_fn=compiled_step),
        "torch-checkpoint": lambda x: loss(x, steps, wrap=lambda f, u: cp.checkpoint(f, u, use_reentrant=False)),
    }

    def save_on_cpu(x):
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            return loss(x, steps)

    variants["torch-save-on-cpu"] = save_on_cpu
    rows = []
    for name, fn in variants.items():
        def grad():
            x = u0.detach().requires_grad_()
            (gx,) = torch.autograd.grad(fn(x), x)
            return gx

        try:
            common.torch_peak_bytes(reset=True)
            grad_ms = common.median_ms_torch(grad, args.warmup, args.repeats)
            rows.append(common.row("allen-cahn", name, size, primal_ms, grad_ms, "pytorch",
                                   peak_device_bytes=common.torch_peak_bytes()))
        except torch.cuda.OutOfMemoryError as e:  # reported, not hidden: the row says why it has no time
            torch.cuda.empty_cache()
            rows.append({"workload": "allen-cahn", "variant": name, "size": size, "peer": "pytorch",
                         "error": "out of memory: " + str(e).splitlines()[0]})
            print(f"allen-cahn {name}: out of memory")
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
