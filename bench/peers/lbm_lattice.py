# SPDX-License-Identifier: Apache-2.0
"""The LBM peers' lattice, shared by lbm_torch.py and lbm_jax.py: D2Q9's directions and weights
in tapeflow's order (docs/workloads/lbm.md), the BGK relaxation time, the equilibrium and the size
strings of tapeflow_bench's lbm suite."""
from __future__ import annotations

CX = [0, 1, 0, -1, 0, 1, -1, -1, 1]
CY = [0, 0, 1, 0, -1, 1, 1, -1, -1]
W = [4 / 9] + [1 / 9] * 4 + [1 / 36] * 4
TAU = 0.8


def size_string(nx: int, ny: int, steps: int, dtype: str = "f32") -> str:
    return f"{nx}x{ny} T{steps} {dtype}"


def equilibrium(rho, ux, uy, cx, cy, w):
    """feq_i(rho, u) for arrays of either framework (cx, cy, w shaped to broadcast over the cells)."""
    cu = cx * ux + cy * uy
    return w * rho * (1 + 3 * cu + 4.5 * cu * cu - 1.5 * (ux * ux + uy * uy))
