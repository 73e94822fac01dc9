#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A boundary tile's levels run in vector lanes as an inner tile's do (docs/stencils.md).

Reads the machine code of the CPU runner's tile programs in a build of the workloads (objdump) and,
for every stencil, compares the packed floating-point arithmetic (256-bit add, sub, mul, div) of the
AVX2 copy of its boundary tiles' program (`advance_tile<false>`, `reverse_tile<false>`) with its
inner tiles' (`<true>`): a boundary tile runs the same levels on its core, so it must hold at least
as much. A stencil whose tests keep GCC from running the boundary tiles' cores in vector lanes (the
wave's `&&`, docs/benchmarks.md "A boundary tile's core in vector lanes") fails here, with no timing.

Skips (exit 77) where there is nothing to compare: a build without the AVX2 copies (TAPEFLOW_CPU_CLONES
off, clang, sanitizers) or without optimisation (no packed arithmetic in any inner tile).

    check.py LIBRARY_OR_OBJECT...
"""
import re
import shutil
import subprocess
import sys

PACKED = re.compile(r"\sv(add|sub|mul|div)p[sd]\s+.*%ymm")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
PROGRAM = re.compile(r"cpu_runner<(.*)>::(advance|reverse)_tile<(true|false)>")


def packed_counts(paths):
    """{(stencil, program, inner): packed instructions} over the AVX2 copies in `paths`."""
    counts = {}
    for path in paths:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path], capture_output=True,
                                 text=True, check=True).stdout
        current = None
        for line in listing.splitlines():
            header = FUNCTION.match(line)
            if header:
                name = header.group(1)
                found = PROGRAM.search(name)
                current = None
                if found and "avx2" in name and name.startswith("void tapeflow::stencil::cpu_runner<"):
                    current = (found.group(1), found.group(2), found.group(3) == "true")
                    counts.setdefault(current, 0)
                continue
            if current is not None and PACKED.search(line):
                counts[current] += 1
    return counts


def main(paths):
    if shutil.which("objdump") is None:
        print("vector_lanes: no objdump on this machine; skipped")
        return 77
    counts = packed_counts(paths)
    if not counts:
        print("vector_lanes: no AVX2 copies of the tile programs in this build; skipped")
        return 77
    if not any(n > 0 for (_, _, inner), n in counts.items() if inner):
        print("vector_lanes: no packed arithmetic in any inner tile (an unoptimised build); skipped")
        return 77
    failed = 0
    for (stencil, program, inner), n in sorted(counts.items()):
        if inner:
            continue
        inner_n = counts.get((stencil, program, True), 0)
        verdict = "ok" if n >= inner_n else "FAILED"
        failed += verdict != "ok"
        print(f"{verdict:6} {stencil} {program}: boundary tiles {n} packed, inner tiles {inner_n}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
