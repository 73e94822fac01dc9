# SPDX-License-Identifier: Apache-2.0
"""The Burgers peers' problem, shared by burgers_torch.py and burgers_jax.py: tapeflow's workload
(kernels/burgers/math.hpp) with its default coefficients — a periodic line of n cells, T steps of

    u'_j = u_j - a u_j (u_{j+1} - u_{j-1}) + b (u_{j+1} - 2 u_j + u_{j-1}),   a = 0.1, b = 0.2

and L = 0.5 sum u_T^2, gradient dL/du0 — its kind of smooth random start, and the sizes and size
strings of tapeflow_bench's burgers suite (kernels/burgers/description.hpp)."""
from __future__ import annotations

import math
import random

A, B = 0.1, 0.2


def timed_size(quick: bool) -> tuple[int, int]:
    """(n, T) of the timed run: 2^26 cells T100, or 2^20 T20 under --quick."""
    return (1 << 20, 20) if quick else (1 << 26, 100)


def size_string(n: int, steps: int, dtype: str = "f32") -> str:
    return f"n{n} T{steps} {dtype}"


def start_modes(seed: int) -> list[tuple[float, float]]:
    """(amplitude, phase) of the 4 sines of a start like tapeflow's random_state: u_j = sum_m
    amp_m sin((m + 1) 2 pi j / n + phase_m), amp_m uniform in [0.1, 0.5] over m + 1 (the same
    ranges; another random stream)."""
    rng = random.Random(seed)
    return [(rng.uniform(0.1, 0.5) / (m + 1), rng.uniform(0.0, 2 * math.pi)) for m in range(4)]
