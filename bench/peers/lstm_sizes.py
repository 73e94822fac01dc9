# SPDX-License-Identifier: Apache-2.0
"""The LSTM peers' problem sizes and packing, shared by lstm_torch.py and lstm_jax.py: the same
strings and lengths as tapeflow_bench's lstm suite (bench/suites/lstm.cu)."""
from __future__ import annotations

# (B, T, I, H): the sizes of Futhark's LSTM evaluation; the longer one also runs packed.
SIZES = [(1024, 20, 300, 192), (1024, 300, 80, 256)]
QUICK_SIZES = [(64, 5, 16, 32)]
CHECK_SIZE = (3, 4, 4, 5)


def size_string(b: int, t: int, i: int, h: int, packed: bool = False) -> str:
    return f"B{b} T{t} I{i} H{h}" + (" packed" if packed else "")


def packed_lengths(b_: int, t_: int) -> list[int]:
    """L_k = T - floor(k floor(3T/4) / B): from T down to about T/4, longest first (the formula of
    tapeflow_bench's lstm suite)."""
    return [t_ - (k * (3 * t_ // 4)) // b_ for k in range(b_)]


def batch_sizes(lengths: list[int], t_: int) -> list[int]:
    """B_t for every step t: how many of the (non-increasing) lengths exceed t, in O(B + T)."""
    ending = [0] * (t_ + 1)
    for length in lengths:
        ending[length] += 1
    sizes, running = [], len(lengths)
    for t in range(t_):
        running -= ending[t]
        sizes.append(running)
    return sizes


def timed_sizes(quick: bool) -> list[tuple[tuple[int, int, int, int], list[int] | None]]:
    """Every size padded (lengths None), then the longest packed, as the bench suite runs them."""
    sizes = QUICK_SIZES if quick else SIZES
    return [(s, None) for s in sizes] + [(sizes[-1], packed_lengths(sizes[-1][0], sizes[-1][1]))]
