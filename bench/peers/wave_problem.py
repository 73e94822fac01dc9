# SPDX-License-Identifier: Apache-2.0
"""The acoustic wave peers' problem, shared by wave_torch.py and wave_jax.py: tapeflow's workload
(kernels/wave/math.hpp, docs/workloads/wave.md) with its defaults (dt 0.2, h 1, peak frequency
0.1) — on an nx x ny (x nz) grid, zero outside, from rest,

    s_t     = lap(u_t) + q_t delta_source       lap: the (2 dims + 1)-point Laplacian / h^2
    u_{t+1} = 2 u_t - u_{t-1} + (dt^2 / m) s_t
    L       = 0.5 sum_{t<T} sum_r (u_t(x_r) - d_{t,r})^2

with q the Ricker wavelet, the source at the centre cell, the receivers every x of row y = 1 in
the middle z-plane; gradient dL/dm — where those cells are, the wavelet, a model and traces of
the same kind as tapeflow's random inputs, and the sizes and size strings of tapeflow_bench's
wave suite (kernels/wave/description.hpp). Arrays are (ny, nx) in 2-D, (nz, ny, nx) in 3-D."""
from __future__ import annotations

import math
import random

DT, H, PEAK_FREQUENCY = 0.2, 1.0, 0.1


def timed_sizes(quick: bool) -> list[tuple[int, int, int, int]]:
    """(nx, ny, nz, T) of the timed runs: 4096² T100 and 256³ T100, or 256² T20 and 32³ T20 under --quick."""
    n, n3, steps = (256, 32, 20) if quick else (4096, 256, 100)
    return [(n, n, 1, steps), (n3, n3, n3, steps)]


def size_string(nx: int, ny: int, nz: int, steps: int, dtype: str = "f32") -> str:
    grid = f"{nx}x{ny}" + (f"x{nz}" if nz > 1 else "")
    return f"{grid} T{steps} {dtype}"


def shape(nx: int, ny: int, nz: int) -> tuple[int, ...]:
    return (ny, nx) if nz == 1 else (nz, ny, nx)


def source_index(nx: int, ny: int, nz: int) -> tuple[int, ...]:
    """The source cell (nx/2, ny/2, nz/2), as an index into shape()."""
    return (ny // 2, nx // 2) if nz == 1 else (nz // 2, ny // 2, nx // 2)


def receiver_row(nx: int, ny: int, nz: int) -> tuple[int, ...]:
    """The receivers' row, y = 1 of the middle z-plane, as an index into shape() (nx values)."""
    return (1,) if nz == 1 else (nz // 2, 1)


def ricker(steps: int, dt: float = DT, f: float = PEAK_FREQUENCY) -> list[float]:
    """q_t for t < T: (1 - 2 a) exp(-a), a = (pi f (t dt - 1/f))^2, as math.hpp's ricker."""
    q = []
    for t in range(steps):
        tau = t * dt - 1 / f
        a = 9.869604401089358 * f * f * tau * tau
        q.append((1 - 2 * a) * math.exp(-a))
    return q


def model_factors(nx: int, ny: int, nz: int, seed: int) -> tuple[list[float], list[float], list[float]]:
    """(fx, fy, fz) of a model like tapeflow's random_model: m = 0.55 + 0.35 fz fy fx with
    sines of random phase along x and y and a cosine along z, so m is within [0.2, 0.9] (stable
    for dt <= 0.2 h); another random stream."""
    rng = random.Random(seed)
    a, b, c = (rng.uniform(0.0, 2 * math.pi) for _ in range(3))
    return ([math.sin(2 * math.pi * x / nx + a) for x in range(nx)],
            [math.sin(2 * math.pi * y / ny + b) for y in range(ny)],
            [math.cos(math.pi * z / nz + c) for z in range(nz)])


def traces(nx: int, steps: int, seed: int) -> list[float]:
    """Observed data d like tapeflow's random inputs: T x nx values uniform in [-0.05, 0.05], step-major."""
    rng = random.Random(seed + 1)
    return [rng.uniform(-0.05, 0.05) for _ in range(steps * nx)]
