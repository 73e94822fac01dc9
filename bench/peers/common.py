# SPDX-License-Identifier: Apache-2.0
"""Shared by the peer benchmarks (PyTorch, JAX): timing, rows in the results format, output.

Every peer script is run as

    python3 bench/peers/<workload>_<framework>.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]

and writes {"rows": [...]} with rows shaped like tapeflow_bench's (docs/benchmarks.md):
workload, variant, size (the same string tapeflow_bench writes for the same problem), primal_ms,
grad_ms, grad_over_primal, tape_bytes (0: the framework does not say), peak_device_bytes, peer.
bench/peers/run.py runs them all and appends their rows to a results file.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable


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


def fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)
