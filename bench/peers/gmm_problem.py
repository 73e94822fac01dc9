# SPDX-License-Identifier: Apache-2.0
"""The GMM peers' problem, shared by gmm_torch.py and gmm_jax.py: the sizes and size strings of
tapeflow_bench's gmm suite (kernels/gmm/description.hpp), the Wishart prior and its constant."""
from __future__ import annotations

import math

# (d, K, N)
FULL = [(2, 5, 1000), (10, 25, 10000), (20, 50, 10000), (64, 100, 10000), (128, 200, 10000)]
QUICK = [(2, 5, 1000), (10, 25, 1000)]
GAMMA = 1.0
M = 0


def size_name(d: int, k: int, n: int) -> str:
    return f"d{d} K{k} N{n}"


def log_gamma_distrib(a: float, p: int) -> float:
    return 0.25 * p * (p - 1) * math.log(math.pi) + sum(math.lgamma(a + 0.5 * (1 - j)) for j in range(1, p + 1))
