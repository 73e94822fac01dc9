# SPDX-License-Identifier: Apache-2.0
"""The stencil workloads' gradients, through the CLI in float64, against JAX's in float64.

For Allen–Cahn, Burgers, LBM and the 2-D and 3-D wave equation, `tapeflow init` writes a random
input, `tapeflow run --dtype f64` computes the gradient under several segment lengths and tape
policies (and, with --mpiexec, cut over 2 and 3 ranks), and each gradient file must agree with
jax.grad of the peers' definitions (bench/peers/*_jax.py: independent of tapeflow's kernels, each
checked there against central differences) to 1e-12 relative: max |g - g_jax| / max |g_jax|.

    python3 tests/workloads/jax_reference.py --cli build/test/tapeflow --work DIR
        [--mpiexec mpiexec --mpiexec-flag=--oversubscribe ...] [--backend cpu]

Exits 0 when every run agrees, 1 naming the runs that do not, 77 (CTest's skip) without JAX or
NumPy, saying how to install them.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "peers"))

TOLERANCE = 1e-12
SKIP = 77


@dataclass
class Case:
    """One workload at one size: how to make its input, and JAX's gradient from that input."""

    workload: str
    problem: list[str]  # the problem's flags, for init and run alike
    steps: int
    reference: Callable  # (jax, jnp, np, input values, steps) -> dL/d(input), float64
    layer_bytes: int  # the largest layer of its tape: the budget of --policy auto is 3 of them
    segments: list[str] = field(default_factory=lambda: ["1", "3"])  # --segment of the runs
    init_takes_steps: bool = False  # the wave's input holds T steps of traces

    def policies(self) -> list[list[str]]:
        """Every tier: store, recompute, offload, and auto under a budget of three layers (too small
        for the whole tape, so auto mixes tiers)."""
        return [["--policy", "store"], ["--policy", "recompute"], ["--policy", "offload"],
                ["--policy", "auto", "--budget", str(3 * self.layer_bytes)]]


def allen_cahn(n: int):
    def reference(jax, jnp, np, values, steps):
        import allen_cahn_jax
        _, loss = allen_cahn_jax.make_functions(steps)
        return jax.grad(loss)(values.reshape(n, n))
    return reference


def burgers(jax, jnp, np, values, steps):
    import burgers_jax
    _, loss = burgers_jax.make_functions(jax, jnp, steps)
    return jax.grad(loss)(values)


def lbm(nx: int, ny: int):
    def reference(jax, jnp, np, values, steps):
        import lbm_jax
        _, loss = lbm_jax.make_functions(jax, jnp, steps)
        return jax.grad(loss)(values.reshape(9, ny, nx))
    return reference


def wave(nx: int, ny: int, nz: int):
    """The wave's input is m, then the traces d; q is the CLI's Ricker wavelet (its defaults)."""
    def reference(jax, jnp, np, values, steps):
        import wave_jax
        from wave_problem import ricker, shape
        cells = nx * ny * nz
        m = values[:cells].reshape(shape(nx, ny, nz))
        d = values[cells:].reshape(steps, nx)
        q = np.asarray(ricker(steps))
        _, loss = wave_jax.make_functions(jax, jnp, nx, ny, nz)
        return jax.grad(loss)(m, q, d)
    return reference


F64 = 8
CASES = [
    Case("allen-cahn", ["--n", "24"], 9, allen_cahn(24), 24 * 24 * F64, ["1", "3", "auto"]),
    Case("burgers", ["--n", "301"], 11, burgers, 301 * F64, ["1", "4", "auto"]),
    Case("lbm", ["--nx", "9", "--ny", "18"], 7, lbm(9, 18), 9 * 9 * 18 * F64, ["1", "3"]),
    Case("wave", ["--nx", "14", "--ny", "17"], 10, wave(14, 17, 1), 2 * 14 * 17 * F64, ["1", "3", "auto"],
         init_takes_steps=True),
    Case("wave", ["--nx", "6", "--ny", "5", "--nz", "13"], 6, wave(6, 5, 13), 2 * 6 * 5 * 13 * F64, ["1", "2"],
         init_takes_steps=True),
]


def run(command: list[str], cwd: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")


def runs_of(case: Case, launch: list[str]) -> list[tuple[str, list[str]]]:
    """(--segment, policy flags) of the runs: in one process every segment length under every
    policy; over ranks (a launch each, so fewer) each segment length under one policy, in turn."""
    policies = case.policies()
    if not launch:
        return [(segment, policy) for segment in case.segments for policy in policies]
    return [(segment, policies[i % len(policies)]) for i, segment in enumerate(case.segments)]


def error_of(np, got_path: str, want) -> float:
    """max |got - want| / max |want| of the gradient file at got_path."""
    got = np.fromfile(got_path, dtype="<f8")
    if got.shape != want.shape:
        raise RuntimeError(f"the gradient file holds {got.size} values, JAX's gradient {want.size}")
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", required=True, help="the tapeflow executable")
    parser.add_argument("--work", required=True, help="a scratch folder")
    parser.add_argument("--backend", default="auto", help="tapeflow's --backend (default auto)")
    parser.add_argument("--mpiexec", help="also run each case cut over 2 and 3 ranks under this launcher")
    parser.add_argument("--mpiexec-flag", action="append", default=[], help="a flag for the launcher (repeatable)")
    parser.add_argument("--ranks-only", action="store_true", help="only the runs over ranks")
    args = parser.parse_args()
    cli = os.path.abspath(args.cli)
    try:
        import jax
        import numpy as np
    except ImportError as missing:
        print(f"skipped: {missing.name} is not installed (python3 -m pip install jax numpy)")
        return SKIP
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    launches = [] if args.ranks_only else [([], "one process")]
    if args.mpiexec:
        launches += [([args.mpiexec, "-n", str(p), *args.mpiexec_flag], f"{p} ranks") for p in (2, 3)]
    os.makedirs(args.work, exist_ok=True)
    failures, checked = [], 0
    for case in CASES:
        name = f"{case.workload} {' '.join(case.problem)} T{case.steps}"
        steps = ["--steps", str(case.steps)]
        run([cli, "init", case.workload, *case.problem, *(steps if case.init_takes_steps else []),
             "--dtype", "f64", "--seed", "11", "--out", "in.bin"], args.work)
        values = np.fromfile(os.path.join(args.work, "in.bin"), dtype="<f8")
        want = np.asarray(case.reference(jax, jnp, np, values, case.steps), dtype=np.float64).ravel()
        if not np.all(np.isfinite(want)) or np.max(np.abs(want)) == 0:
            failures.append(f"{name}: JAX's gradient is zero or not finite")
            continue
        for launch, where in launches:
            for segment, policy in runs_of(case, launch):
                label = f"{name} --segment {segment} {' '.join(policy)} on {where}"
                try:
                    run([*launch, cli, "run", case.workload, *case.problem, *steps, "--dtype", "f64",
                         "--backend", args.backend, "--segment", segment, *policy,
                         "--input", "in.bin", "--grad-out", "grad.bin", "--no-progress"], args.work)
                    error = error_of(np, os.path.join(args.work, "grad.bin"), want)
                except RuntimeError as failed:
                    failures.append(f"{label}: {failed}")
                    continue
                checked += 1
                agrees = error <= TOLERANCE  # false for NaN too
                print(f"{'ok' if agrees else 'FAILED':6} {label}: relative error {error:.2e}")
                if not agrees:
                    failures.append(f"{label}: relative error {error:.3e}, not within {TOLERANCE:g}")
    print(f"{checked} gradients against JAX float64, {len(failures)} failures")
    for failure in failures:
        print("error:", failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
