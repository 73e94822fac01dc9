# SPDX-License-Identifier: Apache-2.0
"""LSTM peers in PyTorch: the same problem as tapeflow_bench's `lstm` suite (docs/workloads/lstm.md).

One layer, f32, gates i, f, g, o; x: T x B x I, h0 = c0 = 0; loss L = sum(h_T); gradient
dL/d(W, U, b) with W = weight_ih (4H x I), U = weight_hh (4H x H), b (4H). Variants:

  cudnn          torch.nn.LSTM on cuDNN (bias_ih = b, bias_hh = 0; the gradient is taken for
                 weight_ih, weight_hh and bias_ih)
  pytorch-eager  the cell written by hand with torch ops (W x_t for every step in one matmul, then
                 per step h U^T), autograd
  torch.compile  the same hand-written cell compiled with torch.compile, the loop over steps in
                 Python

The packed size ("B1024 T300 I80 H256 packed": sequence b runs packed_lengths' L_b steps, longest
first, h_T being each sequence's last h) runs `cudnn` on a PackedSequence and `pytorch-eager` with
the cell applied, step by step, to the sequences still running.

TF32 is off everywhere (cuDNN and matmuls): every row is full-fp32 math, like tapeflow's
(cuBLAS CUBLAS_DEFAULT_MATH). primal = forward without grad; grad = forward + backward for the
parameters. Before timing, the script checks its gradients once at a tiny size: the hand-written
cell in float64 against central finite differences, then cuDNN and the compiled cell against the
eager cell; it exits non-zero when one is wrong.

    python3 bench/peers/lstm_torch.py --out ROWS.json [--quick] [--warmup 2] [--repeats 10]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

from lstm_sizes import CHECK_SIZE, batch_sizes, packed_lengths, size_string, timed_sizes  # noqa: E402

WORKLOAD = "lstm"
PACKED_VARIANTS = ("cudnn", "pytorch-eager")  # the variants that run the packed size


def make_problem(torch, shape, dtype, device, seed):
    """Weights uniform in +-1/sqrt(H) (PyTorch's initialisation), inputs uniform in +-1."""
    b_, t_, i_, h_ = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    k = 1.0 / h_ ** 0.5

    def uniform(*dims, scale):
        return ((torch.rand(*dims, generator=g, dtype=torch.float64) * 2 - 1) * scale).to(dtype=dtype, device=device)

    w = uniform(4 * h_, i_, scale=k).requires_grad_()
    u = uniform(4 * h_, h_, scale=k).requires_grad_()
    b = uniform(4 * h_, scale=k).requires_grad_()
    x = uniform(t_, b_, i_, scale=1.0)
    return w, u, b, x


def make_cell(torch):
    """One step of the hand-written cell: z = W x_t + U h + b, gates i, f, g, o. (A closure over
    the torch module, so this file imports without PyTorch and torch.compile traces plain calls.)"""

    def cell(wx_t, h, c, u, b):
        z = wx_t + h @ u.t() + b
        i, f, g, o = z.chunk(4, dim=1)
        i = torch.sigmoid(i)
        f = torch.sigmoid(f)
        g = torch.tanh(g)
        o = torch.sigmoid(o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        return h, c

    return cell


def handwritten_loss(step, w, u, b, x, lengths=None):
    """sum(h_T) of the hand-written LSTM, `step` the (possibly compiled or checkpointed) cell. With
    `lengths` (non-increasing), step t advances only the sequences longer than t; the others keep
    their state."""
    import torch  # here, not at the top: the file imports without PyTorch

    t_, b_, i_ = x.shape
    h_ = u.shape[1]
    wx = (x.reshape(t_ * b_, i_) @ w.t()).reshape(t_, b_, 4 * h_)  # W x_t of every step in one matmul
    h = x.new_zeros(b_, h_)
    c = x.new_zeros(b_, h_)
    active = [b_] * t_ if lengths is None else batch_sizes(lengths, t_)
    for t, n in enumerate(active):
        if n == b_:
            h, c = step(wx[t], h, c, u, b)
        else:
            h_n, c_n = step(wx[t, :n], h[:n], c[:n], u, b)
            h = torch.cat([h_n, h[n:]])
            c = torch.cat([c_n, c[n:]])
    return h.sum()


class CudnnLstm:
    """torch.nn.LSTM holding W, U and b (bias_hh = 0), loss sum(h_T)."""

    def __init__(self, torch, w, u, b):
        h_ = u.shape[1]
        self.module = torch.nn.LSTM(w.shape[1], h_, num_layers=1, bias=True).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            self.module.weight_ih_l0.copy_(w)
            self.module.weight_hh_l0.copy_(u)
            self.module.bias_ih_l0.copy_(b)
            self.module.bias_hh_l0.zero_()
        self.module.bias_hh_l0.requires_grad_(False)
        self.module.flatten_parameters()
        self.params = [self.module.weight_ih_l0, self.module.weight_hh_l0, self.module.bias_ih_l0]

    def loss(self, x, lengths=None):
        if lengths is not None:  # a PackedSequence: cuDNN runs each step over the sequences still running
            import torch

            x = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=True)
        _, (h_n, _) = self.module(x)
        return h_n.sum()


def check_gradients(torch, device) -> None:
    """Once, at a tiny size, padded and packed: the float64 hand-written cell against central
    differences, then cuDNN (and, padded, torch.compile) against the eager cell in float32."""
    cell = make_cell(torch)
    for lengths in (None, packed_lengths(CHECK_SIZE[0], CHECK_SIZE[1])):
        what = "packed" if lengths else "padded"
        w, u, b, x = make_problem(torch, CHECK_SIZE, torch.float64, device, seed=7)
        params = [w, u, b]
        grads = torch.autograd.grad(handwritten_loss(cell, w, u, b, x, lengths), params)
        with torch.no_grad():
            for p, gp in zip(params, grads):
                fd = common.central_differences(lambda: handwritten_loss(cell, w, u, b, x, lengths), p.view(-1))
                err = common.relative_error(gp.reshape(-1).tolist(), fd)
                if not err < 1e-7:
                    common.fail(f"lstm_torch: float64 hand-written gradient ({what}) vs finite differences: "
                                f"relative error {err:.3e}")

        w32, u32, b32, x32 = (t.detach().float().requires_grad_(t.requires_grad) for t in (w, u, b, x))
        eager = torch.autograd.grad(handwritten_loss(cell, w32, u32, b32, x32, lengths), [w32, u32, b32])
        cudnn = CudnnLstm(torch, w32.detach(), u32.detach(), b32.detach())
        candidates = {"cudnn": torch.autograd.grad(cudnn.loss(x32, lengths), cudnn.params)}
        if lengths is None:
            candidates["torch.compile"] = torch.autograd.grad(
                handwritten_loss(torch.compile(cell), w32, u32, b32, x32), [w32, u32, b32])
        for name, got in candidates.items():
            for which, a, e in zip("WUb", got, eager):
                err = common.relative_error(a.reshape(-1).tolist(), e.reshape(-1).tolist())
                if not err < 1e-4:
                    common.fail(f"lstm_torch: {name} ({what}) dL/d{which} vs the eager cell: relative error {err:.3e}")
    print("lstm_torch: gradients check out, padded and packed (float64 vs finite differences; cudnn, "
          "torch.compile vs eager)")


def main() -> None:
    args = common.parse_args("LSTM peers in PyTorch: cuDNN, eager, torch.compile, checkpoint, save_on_cpu")
    import contextlib

    import torch

    device = common.torch_device(torch)
    # Full fp32 everywhere (no TF32), as tapeflow's cuBLAS calls.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = False
    check_gradients(torch, device)

    cell = make_cell(torch)
    # The hand-written cell's variants: eager, compiled, checkpointed (every step's residuals
    # recomputed in the backward pass), saved tensors on the CPU.
    cell_variants = common.torch_step_variants(torch, cell, torch.compile(cell))
    rows = []
    for shape, lengths in timed_sizes(args.quick):
        size = size_string(*shape, packed=lengths is not None)
        w, u, b, x = make_problem(torch, shape, torch.float32, device, seed=20261124)
        cudnn = CudnnLstm(torch, w.detach(), u.detach(), b.detach())
        variants = [("cudnn", cudnn, contextlib.nullcontext)] + cell_variants
        if lengths is not None:
            variants = [v for v in variants if v[0] in PACKED_VARIANTS]

        def loss(model):  # model: the cuDNN LSTM or a variant's cell
            if model is cudnn:
                return cudnn.loss(x, lengths)
            return handwritten_loss(model, w, u, b, x, lengths)

        def grad(model):
            return torch.autograd.grad(loss(model), cudnn.params if model is cudnn else [w, u, b])

        rows += common.torch_rows(torch, WORKLOAD, size, variants, loss, grad, args, math="fp32, TF32 off")
    common.write_rows(args.out, rows)


if __name__ == "__main__":
    main()
