# SPDX-License-Identifier: Apache-2.0
"""Shared by the peer benchmarks (PyTorch, JAX): timing, rows in the results format, output, the
gradient checks against central differences, the variants (eager, torch.compile, checkpoint,
save_on_cpu; jax-jit, jax-checkpoint) and the loops that time them into rows.

Every peer script is run as

    python3 bench/peers/<workload>_<framework>.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]

and writes {"rows": [...]} with rows shaped like tapeflow_bench's (docs/benchmarks.md):
workload, variant, size (the same string tapeflow_bench writes for the same problem), primal_ms,
grad_ms, grad_over_primal, tape_bytes (0: the framework does not say), peak_device_bytes, peer.
bench/peers/run.py runs them all and appends their rows to a results file.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from typing import Callable

# The two JAX variants of a time-stepping peer: (variant, whether each step is under jax.checkpoint).
JAX_VARIANTS = (("jax-jit", False), ("jax-checkpoint", True))


def script_name() -> str:
    """The running peer's name (burgers_torch): the prefix of its messages."""
    return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True, help="where to write {\"rows\": [...]}")
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    a = p.parse_args()
    if a.warmup < 0 or a.repeats < 1:
        p.error("need --warmup >= 0 and --repeats >= 1")
    return a


def median_ms_torch(fn: Callable[[], object], warmup: int, repeats: int) -> float:
    """Median of CUDA-event-timed calls of fn() after warm-up calls (PyTorch); without CUDA (a
    peer's CPU smoke run), of wall-clock-timed calls."""
    import torch

    if not torch.cuda.is_available():
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def median_ms_jax(fn: Callable[[], object], warmup: int, repeats: int) -> float:
    """Median wall time of fn() with block_until_ready on its result (JAX has no user events;
    the dispatch of one jitted call is included, as it is in any JAX user's gradient)."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def torch_peak_bytes(reset: bool = False) -> int:
    import torch

    if not torch.cuda.is_available():
        return 0
    if reset:
        torch.cuda.reset_peak_memory_stats()
        return 0
    return int(torch.cuda.max_memory_allocated())


def row(workload: str, variant: str, size: str, primal_ms: float, grad_ms: float, peer: str,
        peak_device_bytes: int = 0, tape_bytes: int = 0, **extra) -> dict:
    r = {
        "workload": workload,
        "variant": variant,
        "size": size,
        "primal_ms": primal_ms,
        "grad_ms": grad_ms,
        "grad_over_primal": grad_ms / primal_ms if primal_ms > 0 else None,
        "tape_bytes": tape_bytes,
        "peak_device_bytes": peak_device_bytes,
        "peer": peer,
    }
    r.update(extra)
    print(f"{workload:10} {variant:28} {size:26} primal {primal_ms:9.3f} ms grad {grad_ms:9.3f} ms", flush=True)
    return r


def error_row(workload: str, variant: str, size: str, peer: str, error: str) -> dict:
    """The row of a variant that has no times (out of memory): the reason under `error`."""
    print(f"{workload} {size} {variant}: {error}", flush=True)
    return {"workload": workload, "variant": variant, "size": size, "peer": peer, "error": error}


def write_rows(path: str, rows: list[dict]) -> None:
    with open(path, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    print(f"wrote {len(rows)} rows to {path}")


def relative_error(a, b) -> float:
    """||a - b|| / ||b|| for two flat sequences of floats (peers check their gradient once)."""
    num = sum((float(x) - float(y)) ** 2 for x, y in zip(a, b))
    den = sum(float(y) ** 2 for y in b)
    return (num / den) ** 0.5 if den > 0 else float(num > 0)


def central_differences(loss: Callable[[], float], flat, h: float = 1e-6) -> list[float]:
    """(L(x + h e_k) - L(x - h e_k)) / 2h for every element k of `flat`: a flat, writable view of
    the inputs that `loss` reads (a NumPy array, or a tensor under torch.no_grad()). Each element
    is moved by +h and -h in place, L read as a float, and the element put back."""
    fd = []
    for k in range(len(flat)):
        saved = float(flat[k])
        flat[k] = saved + h
        up = float(loss())
        flat[k] = saved - h
        down = float(loss())
        flat[k] = saved
        fd.append((up - down) / (2 * h))
    return fd


def check_gradient_error(got, fd, where: str, name: str, tol: float = 1e-7) -> None:
    """Prints the relative error of a gradient `got` (a flat sequence) against the central
    differences `fd` at `where` (a size string); exits non-zero unless it is below `tol`."""
    err = relative_error(got, fd)
    print(f"gradient check ({where}, {name} vs central differences): relative error {err:.2e}")
    if not err < tol:
        fail(f"{script_name()}: the {name} gradient at {where} is wrong (relative error {err:.3e})")


def fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)


# PyTorch


def torch_device(torch, cpu_smoke: bool = False) -> str:
    """"cuda"; without CUDA "cpu" where `cpu_smoke` (a --quick run of a peer that can run on the
    CPU: wall-clock times), else the script exits non-zero."""
    if torch.cuda.is_available():
        return "cuda"
    if not cpu_smoke:
        fail(f"{script_name()}: no CUDA device")
    print(f"{script_name()}: no CUDA device; a CPU smoke run (wall-clock times)")
    return "cpu"


def run_steps(step, u, steps: int):
    """u after `steps` calls of step (PyTorch: one autograd node or more per step)."""
    for _ in range(steps):
        u = step(u)
    return u


def final_energy(step, u0, steps: int):
    """L = 0.5 sum(u_T^2), u_T after `steps` calls of step from u0 (PyTorch)."""
    u = run_steps(step, u0, steps)
    return 0.5 * (u * u).sum()


def torch_gradient(torch, loss, x0):
    """dL/dx at x0 by autograd, L = loss(x)."""
    x = x0.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(x), x)
    return g


def check_torch_gradient(torch, loss, x0, where: str, checked, tol: float = 1e-7) -> None:
    """dL/dx at the float64 tensor x0 by autograd, L = loss(step, x), for every (name, step) of
    `checked`, against central differences of loss(the first step, x)."""
    flat = x0.flatten().clone()
    with torch.no_grad():
        fd = central_differences(lambda: loss(checked[0][1], flat.view(x0.shape)), flat)
    for name, step in checked:
        g = torch_gradient(torch, lambda x: loss(step, x), x0)
        check_gradient_error(g.flatten().tolist(), fd, where, name, tol)


def torch_step_variants(torch, step, compiled) -> list[tuple]:
    """The PyTorch variants of a time step, as (variant, step, what the backward's saved tensors go
    through): pytorch-eager `step`, torch.compile `compiled` (the caller's torch.compile of it),
    torch-checkpoint (torch.utils.checkpoint around every step: recomputed in the backward pass),
    torch-save-on-cpu (saved tensors offloaded to pinned host memory)."""
    import contextlib

    import torch.utils.checkpoint as checkpoint

    def recomputed(*a):
        return checkpoint.checkpoint(step, *a, use_reentrant=False)

    def on_cpu():
        return torch.autograd.graph.save_on_cpu(pin_memory=True)

    return [
        ("pytorch-eager", step, contextlib.nullcontext),
        ("torch.compile", compiled, contextlib.nullcontext),
        ("torch-checkpoint", recomputed, contextlib.nullcontext),
        ("torch-save-on-cpu", step, on_cpu),
    ]


def torch_rows(torch, workload: str, size: str, variants, primal, grad, args, **extra) -> list[dict]:
    """Times each (variant, step, saved) of `variants` (torch_step_variants' shape; `step` is
    anything primal and grad take): primal(step) under torch.no_grad(), grad(step) under saved(),
    median_ms_torch of each with args.warmup and args.repeats, the peak of the gradient. A variant
    that runs out of device memory gets a row with `error` instead of times. `extra`: more fields
    of every timed row."""
    rows = []
    for variant, step, saved in variants:
        def timed_primal():
            with torch.no_grad():
                return primal(step)

        def timed_grad():
            with saved():
                return grad(step)

        try:
            primal_ms = median_ms_torch(timed_primal, args.warmup, args.repeats)
            torch_peak_bytes(reset=True)
            grad_ms = median_ms_torch(timed_grad, args.warmup, args.repeats)
        except torch.cuda.OutOfMemoryError as e:  # reported in the row, not hidden
            rows.append(error_row(workload, variant, size, "pytorch", "out of memory: " + str(e).splitlines()[0]))
        else:
            rows.append(row(workload, variant, size, primal_ms, grad_ms, "pytorch",
                            peak_device_bytes=torch_peak_bytes(), **extra))
        torch.cuda.empty_cache()
    return rows


def torch_final_energy_rows(torch, workload: str, size: str, variants, u0, steps: int, args,
                            primal_step=None, **extra) -> list[dict]:
    """torch_rows of L = final_energy(step, u0, steps): the primal `steps` steps from u0 (of
    `primal_step` in every row where given, else of each variant's step), the gradient dL/du0."""
    def primal(step):
        return run_steps(step if primal_step is None else primal_step, u0, steps)

    def grad(step):
        return torch_gradient(torch, lambda u: final_energy(step, u, steps), u0)

    return torch_rows(torch, workload, size, variants, primal, grad, args, **extra)


# JAX


def import_jax():
    """(jax, jax.numpy, numpy) with float64 enabled: for the gradient checks; the timed runs are
    float32 (jax_rows checks)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    return jax, jnp, np


def jax_peak_bytes() -> int:
    """The first device's peak_bytes_in_use since the start (0 where the device does not say)."""
    import jax

    device = jax.devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    return int((stats or {}).get("peak_bytes_in_use", 0))


def jax_scan_functions(jax, jnp, step, steps: int, remat: bool = False):
    """(run, loss) of `steps` calls of step by lax.scan: run(u0) = u_T, loss(u0) = 0.5 sum(u_T^2).
    With `remat`, each step is under jax.checkpoint: its residuals recomputed in the backward pass."""
    body = jax.checkpoint(step) if remat else step

    def run(u0):
        u, _ = jax.lax.scan(lambda u, _: (body(u), None), u0, None, length=steps)
        return u

    def loss(u0):
        u = run(u0)
        return 0.5 * jnp.sum(u * u)

    return run, loss


def check_jax_gradient(jax, loss, x0, where: str, *rest, tol: float = 1e-7) -> None:
    """jax.grad of loss(x, *rest) at the float64 NumPy array x0 (jitted) against central
    differences of the jitted loss."""
    import numpy as np

    g = np.asarray(jax.jit(jax.grad(loss))(x0, *rest)).ravel()
    loss_jit = jax.jit(loss)
    flat = x0.ravel().copy()
    fd = central_differences(lambda: loss_jit(flat.reshape(x0.shape), *rest), flat)
    check_gradient_error(g.tolist(), fd, where, "jax.grad", tol)


def jax_rows(workload: str, size: str, primal, grads, args, dtype: str | None = None, **extra) -> list[dict]:
    """Times primal() once (what every variant of `grads` shares) and grad() of each (variant, grad)
    of `grads`, median_ms_jax with args.warmup and args.repeats; zero-argument calls. With `dtype`,
    the script exits non-zero unless every array grad() gives is of it. A variant that runs out of
    device memory gets a row with `error` instead of times. `extra`: more fields of every timed row."""
    import jax

    rows = []
    primal_ms = None
    for variant, grad in grads:
        try:
            if primal_ms is None:
                primal_ms = median_ms_jax(primal, args.warmup, args.repeats)
            if dtype is not None and any(a.dtype != dtype for a in jax.tree_util.tree_leaves(grad())):
                fail(f"{script_name()}: the timed gradient is not {dtype}")
            grad_ms = median_ms_jax(grad, args.warmup, args.repeats)
        except Exception as e:  # XLA reports exhausted memory as a runtime error
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
            rows.append(error_row(workload, variant, size, "jax", "out of memory"))
            continue
        rows.append(row(workload, variant, size, primal_ms, grad_ms, "jax", peak_device_bytes=jax_peak_bytes(),
                        **extra))
    return rows


def jax_remat_rows(jax, workload: str, size: str, make, inputs, args, **extra) -> list[dict]:
    """jax_rows of JAX_VARIANTS, float32: make(remat) gives (run, loss) of `inputs` (a tuple); the
    primal is jax.jit(run) without remat (remat changes only the gradient), each variant's gradient
    jax.jit(jax.grad(loss)) (with respect to the first input)."""
    primal = jax.jit(make(False)[0])
    grads = [(variant, functools.partial(jax.jit(jax.grad(make(remat)[1])), *inputs))
             for variant, remat in JAX_VARIANTS]
    return jax_rows(workload, size, functools.partial(primal, *inputs), grads, args, dtype="float32", **extra)
