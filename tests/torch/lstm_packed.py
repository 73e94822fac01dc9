# SPDX-License-Identifier: Apache-2.0
"""tapeflow's packed LSTM through the CLI against torch.nn.LSTM on a PackedSequence, in float64.

    python3 tests/torch/lstm_packed.py TAPEFLOW [--backend auto|cpu|cuda]

Writes a random instance with `tapeflow init lstm`, runs `tapeflow run lstm --lengths ...`, and
computes the same loss (the sum of every sequence's last h, the initial state taken from the
file) and its gradient for W, U and b with PyTorch (bias_hh = 0). Exits 0 when the loss and every
gradient agree to 1e-12 relative, 1 when they do not, 77 when PyTorch is not installed. Run by
bench/gpu-check.sh's `cli` stage on the GPU (PyTorch is there); anywhere else with PyTorch, on the
CPU backend.
"""
from __future__ import annotations

import array
import json
import math
import subprocess
import sys
import tempfile

B, T, I, H = 7, 9, 5, 6
LENGTHS = [9, 9, 7, 5, 5, 2, 1]


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("lstm_packed: skipped, PyTorch is not installed")
        return 77
    tapeflow = sys.argv[1]
    backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "auto"
    shape = ["--batch", str(B), "--steps", str(T), "--input-size", str(I), "--hidden", str(H), "--dtype", "f64"]
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([tapeflow, "init", "lstm", *shape, "--seed", "42", "--out", f"{work}/in.bin"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([tapeflow, "run", "lstm", *shape, "--lengths", ",".join(map(str, LENGTHS)), "--backend", backend,
                        "--input", f"{work}/in.bin", "--grad-out", f"{work}/g.bin", "--json", f"{work}/s.json"],
                       check=True, stdout=subprocess.DEVNULL)
        values = array.array("d", open(f"{work}/in.bin", "rb").read())
        grads = array.array("d", open(f"{work}/g.bin", "rb").read())
        stats = json.load(open(f"{work}/s.json"))

    g = 4 * H
    sizes = [g * I, g * H, g, T * B * I, B * H, B * H]
    parts, at = [], 0
    for n in sizes:
        parts.append(torch.tensor(values[at:at + n], dtype=torch.float64))
        at += n
    w, u, b, x, h0, c0 = parts
    lstm = torch.nn.LSTM(I, H).double()
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(w.view(g, I))
        lstm.weight_hh_l0.copy_(u.view(g, H))
        lstm.bias_ih_l0.copy_(b)
        lstm.bias_hh_l0.zero_()
    packed = torch.nn.utils.rnn.pack_padded_sequence(x.view(T, B, I), torch.tensor(LENGTHS), enforce_sorted=True)
    _, (h_n, _) = lstm(packed, (h0.view(1, B, H), c0.view(1, B, H)))
    loss = h_n.sum()
    loss.backward()

    def relative(got, want) -> float:
        num = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, want)))
        den = math.sqrt(sum(b * b for b in want))
        return num / den if len(got) == len(want) else math.inf

    want = [lstm.weight_ih_l0.grad, lstm.weight_hh_l0.grad, lstm.bias_ih_l0.grad]
    errors, at = {}, 0
    for name, expect in zip(("dW", "dU", "db"), want):
        n = expect.numel()
        errors[name] = relative(grads[at:at + n], expect.reshape(-1).tolist())
        at += n
    errors["loss"] = abs(stats["loss"] - loss.item()) / abs(loss.item())
    ok = at == len(grads) and all(e < 1e-12 for e in errors.values())
    print(f"lstm_packed: tapeflow ({stats['backend']}) vs torch.nn.LSTM on a PackedSequence, lengths {LENGTHS}: "
          + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) + ("" if ok else "  FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
