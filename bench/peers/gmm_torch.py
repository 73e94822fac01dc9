# SPDX-License-Identifier: Apache-2.0
"""GMM (ADBench's objective, float64) in PyTorch eager with torch.autograd: the peer of the
tapeflow_bench suite `gmm` (same sizes, same size strings, same objective).

The objective is written like ADBench's PyTorch module (src/python/modules/PyTorch/gmm_objective.py),
vectorized: Q_k = diag(exp(q_k)) + L_k with L_k filled column by column from icf_k[d:], main terms
for every (point, component) at once, a per-point logsumexp, the Wishart prior.

    python3 bench/peers/gmm_torch.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]
"""
from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from gmm_problem import FULL, GAMMA, QUICK, M, log_gamma_distrib, size_name  # noqa: E402


def ltri_index(d: int, device):
    """Flat positions (row * d + col) of L's strictly lower entries in ADBench's icf order:
    column by column, rows col+1..d-1."""
    import torch

    flat = [row * d + col for col in range(d) for row in range(col + 1, d)]
    return torch.tensor(flat, dtype=torch.long, device=device)


def objective(alphas, means, icf, x, lidx, gamma: float = GAMMA, m: int = M):
    import torch

    n, d = x.shape
    k = alphas.shape[0]
    qdiags = torch.exp(icf[:, :d])
    sum_qs = torch.sum(icf[:, :d], 1)
    ls = torch.zeros(k, d * d, dtype=icf.dtype, device=icf.device)
    ls[:, lidx] = icf[:, d:]
    ls = ls.view(k, d, d)
    xcentered = x[:, None, :] - means[None, :, :]                       # N x K x d
    lx = qdiags[None] * xcentered + torch.einsum("kij,nkj->nki", ls, xcentered)
    inner = alphas + sum_qs - 0.5 * torch.sum(lx ** 2, 2)                # N x K
    slse = torch.sum(torch.logsumexp(inner, 1))
    constant = -n * d * 0.5 * math.log(2 * math.pi)
    dof = d + m + 1
    cw = dof * d * (math.log(gamma) - 0.5 * math.log(2)) - log_gamma_distrib(0.5 * dof, d)
    prior = torch.sum(0.5 * gamma * gamma * (torch.sum(qdiags ** 2, 1) + torch.sum(icf[:, d:] ** 2, 1)) - m * sum_qs)
    return constant + slse - n * torch.logsumexp(alphas, 0) + prior - k * cw


def make_inputs(d: int, k: int, n: int, seed: int, device):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    f64 = torch.float64
    alphas = torch.randn(k, generator=g, dtype=f64)
    means = torch.rand(k, d, generator=g, dtype=f64)
    icf = 0.1 * torch.randn(k, d * (d + 1) // 2, generator=g, dtype=f64)
    x = torch.rand(n, d, generator=g, dtype=f64)
    return [t.to(device) for t in (alphas, means, icf, x)]


def check_gradient(device) -> None:
    """Autograd against central differences at a tiny size, once, before timing."""
    import torch

    d, k, n = 3, 3, 7
    alphas, means, icf, x = make_inputs(d, k, n, 7, device)
    lidx = ltri_index(d, device)
    params = [t.clone().requires_grad_(True) for t in (alphas, means, icf)]
    grads = torch.autograd.grad(objective(*params, x, lidx), params)
    analytic = [float(v) for g in grads for v in g.flatten().tolist()]
    fd = []
    with torch.no_grad():
        for p in (alphas, means, icf):
            fd += common.central_differences(lambda: objective(alphas, means, icf, x, lidx), p.view(-1))
    common.check_gradient_error(analytic, fd, f"d{d} K{k} N{n} f64", "autograd", tol=1e-6)


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    import contextlib

    import torch

    device = common.torch_device(torch)
    check_gradient(device)
    rows = []
    for d, k, n in QUICK if args.quick else FULL:
        alphas, means, icf, x = make_inputs(d, k, n, 20261124 + d, device)
        lidx = ltri_index(d, device)
        params = [t.clone().requires_grad_(True) for t in (alphas, means, icf)]
        variants = [("pytorch-eager", None, contextlib.nullcontext)]
        rows += common.torch_rows(torch, "gmm", size_name(d, k, n), variants,
                                  lambda _: objective(alphas, means, icf, x, lidx),
                                  lambda _: torch.autograd.grad(objective(*params, x, lidx), params), args)
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
