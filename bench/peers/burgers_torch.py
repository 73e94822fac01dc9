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

import contextlib
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


def run(step_fn, u, steps: int):
    for _ in range(steps):
        u = step_fn(u)
    return u


def loss(step_fn, u0, steps: int):
    u = run(step_fn, u0, steps)
    return 0.5 * (u * u).sum()


def gradient(torch, step_fn, u0, steps: int):
    u = u0.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(step_fn, u, steps), u)
    return g


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
    flat = u0.clone()
    with torch.no_grad():
        fd = common.central_differences(lambda: loss(step, flat, steps), flat)
    for name, step_fn in (("eager", step), ("torch.compile", torch.compile(step, dynamic=False))):
        err = common.relative_error(gradient(torch, step_fn, u0, steps).tolist(), fd)
        print(f"gradient check (n16 T6 f64, {name} vs central differences): relative error {err:.2e}")
        if not err < 1e-7:
            common.fail(f"burgers_torch: the {name} gradient is wrong (relative error {err:.3e})")


def main() -> None:
    args = common.parse_args("Burgers 1-D (PyTorch peer of tapeflow_bench --suite burgers)")
    import torch
    import torch.utils.checkpoint as checkpoint

    if torch.cuda.is_available():
        device = "cuda"
    elif args.quick:
        device = "cpu"
        print("burgers_torch: no CUDA device; a CPU smoke run (wall-clock times)")
    else:
        common.fail("burgers_torch: no CUDA device")
    check_gradient(torch, device)

    n, steps = timed_size(args.quick)
    size = size_string(n, steps)
    u0 = initial_state(torch, n, torch.float32, device, seed=20261140)
    recomputed = lambda u: checkpoint.checkpoint(step, u, use_reentrant=False)  # noqa: E731
    # (name, step, what the backward's saved tensors go through)
    variants = (
        ("pytorch-eager", step, contextlib.nullcontext),
        ("torch.compile", torch.compile(step, dynamic=False), contextlib.nullcontext),
        ("torch-checkpoint", recomputed, contextlib.nullcontext),
        ("torch-save-on-cpu", step, lambda: torch.autograd.graph.save_on_cpu(pin_memory=True)),
    )
    rows = []
    for variant, step_fn, saved in variants:
        def primal():
            with torch.no_grad():
                return run(step_fn, u0, steps)

        def grad():
            with saved():
                return gradient(torch, step_fn, u0, steps)

        primal_ms = common.median_ms_torch(primal, args.warmup, args.repeats)
        common.torch_peak_bytes(reset=True)
        try:
            grad_ms = common.median_ms_torch(grad, args.warmup, args.repeats)
        except torch.cuda.OutOfMemoryError as e:  # reported in the row, not hidden
            torch.cuda.empty_cache()
            rows.append({"workload": "burgers", "variant": variant, "size": size, "peer": "pytorch",
                         "error": "out of memory: " + str(e).splitlines()[0]})
            print(f"burgers {variant}: out of memory")
            continue
        rows.append(common.row("burgers", variant, size, primal_ms, grad_ms, "pytorch",
                               peak_device_bytes=common.torch_peak_bytes(),
                               platform="gpu" if device == "cuda" else "cpu"))
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
