# SPDX-License-Identifier: Apache-2.0
"""The Allen–Cahn peers' problem, shared by allen_cahn_torch.py and allen_cahn_jax.py: the
coefficients of tapeflow's workload (kernels/allen_cahn/allen_cahn.hpp) and the size and size
string of tapeflow_bench's allen_cahn suite."""
from __future__ import annotations

DT, EPS2 = 0.05, 1.0


def timed_size(quick: bool) -> tuple[int, int]:
    """(n, T) of the timed run: 8192² T100, or 512² T20 under --quick."""
    return (512, 20) if quick else (8192, 100)


def size_string(n: int, steps: int) -> str:
    return f"{n}x{n} T{steps} f32"
