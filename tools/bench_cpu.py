#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The CPU backend against JAX's jit(grad) on the same machine, side by side in one run.

    python3 tools/bench_cpu.py [--tapeflow build/cpu/tapeflow] [--n 512] [--steps 100] [--runs 5]
                               [--warmup 3] [--repeats 11] [--out result.json] [--no-jax]

Allen–Cahn (the brief's exact workload), f32: the gradient dL/du0 of L = ½ Σ u_T² after T steps.
Each of --runs rounds times tapeflow (`tapeflow bench allen-cahn --backend cpu`: a fresh process,
--warmup untimed gradients, then the median of --repeats, device-resident, no transfers) and then
JAX (a fresh process: jax.jit(jax.grad(loss)) of bench/peers/allen_cahn_jax.py's definition, compiled
and warmed up, then the median of --repeats wall-clock calls with block_until_ready), alternating so
that both see the same machine. Before timing, both gradients are computed from the same u0 and
compared (and JAX's against finite differences, by the peer's own check).

Reports, for each side, the median of the rounds' medians and the stability the issue asks for:
the slowest round over the fastest (target <= 1.5), and the machine's load before and after.

A second row, tapeflow's alone (issue 13): the store policy's augmented forward against the untaped
primal, from the same runs (`forward_ms` / `primal_ms` of each round's row: the chain is reused, so
after the first gradient its tape comes from its pools; target <= 1.5), with the allocations the
runs after the first made (`repeat_allocations`, 0 with the pools). --no-jax measures this row only.

Exit status 0 when tapeflow's gradient is at most JAX's and stable (with --no-jax: when the forward
row meets its target), 1 otherwise, 2 on bad usage.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JAX_RUN = r"""
import json, statistics, sys, time
sys.path.insert(0, {peers!r})
import numpy as np
import jax
import allen_cahn_jax as peer
n, steps, warmup, repeats = {n}, {steps}, {warmup}, {repeats}
_, grad, _ = peer.make(steps, remat=False)
u0 = jax.device_put(np.random.default_rng(1).uniform(-0.9, 0.9, (n, n)).astype(np.float32))
for _ in range(warmup):
    jax.block_until_ready(grad(u0))
samples = []
for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(grad(u0))
    samples.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({{"median_ms": statistics.median(samples), "samples_ms": samples, "jax": jax.__version__,
                  "devices": [str(d) for d in jax.devices()]}}))
"""

JAX_CHECK = r"""
import sys
sys.path.insert(0, {peers!r})
import numpy as np
import jax
import allen_cahn_jax as peer
peer.check_gradient()  # jax.grad against finite differences, in f64
n, steps = {n}, {steps}
u0 = np.fromfile({u0!r}, dtype=np.float32).reshape(n, n)
_, grad, _ = peer.make(steps, remat=False)
np.asarray(grad(jax.device_put(u0)), dtype=np.float32).tofile({g!r})
"""


def machine_state() -> dict:
    load = os.getloadavg()
    top = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True).stdout
    busy = [line.strip() for line in top.splitlines()[1:6] if line.strip() and float(line.split()[0]) >= 5.0]
    return {"loadavg_1_5_15": [round(x, 2) for x in load], "busiest_processes": busy}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def tapeflow_round(exe: str, n: int, steps: int, warmup: int, repeats: int, scratch: str) -> dict:
    row_path = os.path.join(scratch, "row.json")
    cmd = [exe, "bench", "allen-cahn", "--n", str(n), "--steps", str(steps), "--backend", "cpu", "--warmup",
           str(warmup), "--repeats", str(repeats), "--json", row_path]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_cpu: {' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    with open(row_path) as f:
        row = json.load(f)
    return {"median_ms": row["grad_ms"], "primal_ms": row["primal_ms"], "device": row["device"],
            "forward_ms": row.get("forward_ms"), "repeat_allocations": row.get("repeat_allocations")}


def jax_round(n: int, steps: int, warmup: int, repeats: int) -> dict:
    code = JAX_RUN.format(peers=os.path.join(ROOT, "bench", "peers"), n=n, steps=steps, warmup=warmup, repeats=repeats)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_cpu: the JAX run failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cross_check(exe: str, n: int, steps: int, scratch: str) -> float:
    """Both gradients from the same u0: their relative difference (f32 rounding apart)."""
    import numpy as np

    u0_path, tf_path, jax_path = (os.path.join(scratch, name) for name in ("u0.bin", "g_tapeflow.bin", "g_jax.bin"))
    np.random.default_rng(7).uniform(-0.9, 0.9, (n, n)).astype(np.float32).tofile(u0_path)
    run = subprocess.run([exe, "run", "allen-cahn", "--n", str(n), "--steps", str(steps), "--backend", "cpu", "--input",
                          u0_path, "--grad-out", tf_path, "--no-progress"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"bench_cpu: tapeflow run failed:\n{run.stdout}{run.stderr}")
    code = JAX_CHECK.format(peers=os.path.join(ROOT, "bench", "peers"), n=n, steps=steps, u0=u0_path, g=jax_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_cpu: the JAX gradient failed:\n{out.stderr}")
    a = np.fromfile(tf_path, dtype=np.float32).astype(np.float64)
    b = np.fromfile(jax_path, dtype=np.float32).astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def forward_over_primal(rounds: list) -> dict | None:
    """The store policy's augmented forward against the untaped primal, per round and overall."""
    if any(r.get("forward_ms") is None for r in rounds):
        return None  # a CLI from before the row existed
    ratios = [r["forward_ms"] / r["primal_ms"] for r in rounds]
    median = statistics.median(ratios)
    return {"round_ratios": ratios, "forward_over_primal": median,
            "forward_ms": statistics.median(r["forward_ms"] for r in rounds),
            "primal_ms": statistics.median(r["primal_ms"] for r in rounds),
            "repeat_allocations": max(r.get("repeat_allocations") or 0 for r in rounds),
            "target": 1.5, "target_met": median <= 1.5}


def print_forward_row(row: dict | None) -> None:
    if not row:
        print("augmented forward / primal: this CLI does not report forward_ms")
        return
    rounds = ", ".join(f"{x:.2f}" for x in row["round_ratios"])
    print(f"augmented forward (store) / untaped primal = {row['forward_over_primal']:.2f} "
          f"({row['forward_ms']:.1f} / {row['primal_ms']:.1f} ms; rounds {rounds}); target <= 1.5: "
          f"{'met' if row['target_met'] else 'MISSED'}; allocations after the first gradient: "
          f"{row['repeat_allocations']}")


def report_forward_only(result: dict, tapeflow: list, row: dict | None, out: str | None) -> int:
    medians = [x["median_ms"] for x in tapeflow]
    result["tapeflow"] = {"round_medians_ms": medians, "median_ms": statistics.median(medians),
                          "slowest_over_fastest": max(medians) / min(medians), "device": tapeflow[0]["device"],
                          "primal_ms": statistics.median(x["primal_ms"] for x in tapeflow)}
    print(f"\nAllen-Cahn {result['size']} on {result['cpu']} ({result['cpus']} CPUs); load before "
          f"{result['before']['loadavg_1_5_15']}, after {result['after']['loadavg_1_5_15']}")
    print_forward_row(row)
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0 if row and row["target_met"] else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tapeflow", default=os.path.join(ROOT, "build", "cpu", "tapeflow"), help="the CLI to time")
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--runs", type=int, default=5, help="rounds, each one tapeflow process and one JAX process")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--out", help="write the result as JSON here")
    p.add_argument("--no-jax", action="store_true", help="time tapeflow only (the augmented-forward row)")
    a = p.parse_args()
    if a.runs < 2 or a.repeats < 1 or a.warmup < 0 or a.n < 1 or a.steps < 1:
        p.error("need --runs >= 2, --repeats >= 1, --warmup >= 0, --n >= 1, --steps >= 1")
    if not os.access(a.tapeflow, os.X_OK):
        p.error(f"{a.tapeflow} is not an executable (build it: cmake --workflow --preset cpu)")
    if not a.no_jax:
        try:
            import jax  # noqa: F401
        except ImportError:
            p.error("JAX is not installed (pip install 'jax[cpu]'), or pass --no-jax")

    result = {"workload": "allen-cahn", "size": f"{a.n}x{a.n} T{a.steps} f32", "cpu": cpu_model(),
              "cpus": os.cpu_count(), "runs": a.runs, "warmup": a.warmup, "repeats": a.repeats,
              "before": machine_state(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    with tempfile.TemporaryDirectory() as scratch:
        if not a.no_jax:
            result["gradient_relative_difference"] = cross_check(a.tapeflow, a.n, a.steps, scratch)
        tapeflow, jaxr = [], []
        for r in range(a.runs):
            tapeflow.append(tapeflow_round(a.tapeflow, a.n, a.steps, a.warmup, a.repeats, scratch))
            line = (f"round {r + 1}: tapeflow {tapeflow[-1]['median_ms']:8.2f} ms (primal {tapeflow[-1]['primal_ms']:.2f}"
                    f", augmented forward {tapeflow[-1]['forward_ms'] or float('nan'):.2f} ms)")
            if not a.no_jax:
                jaxr.append(jax_round(a.n, a.steps, a.warmup, a.repeats))
                line += f"   jax {jaxr[-1]['median_ms']:8.2f} ms"
            print(line, flush=True)
    result["after"] = machine_state()
    forward_row = forward_over_primal(tapeflow)
    if forward_row:
        result["forward"] = forward_row
    if a.no_jax:
        return report_forward_only(result, tapeflow, forward_row, a.out)
    for name, rounds in (("tapeflow", tapeflow), ("jax", jaxr)):
        medians = [x["median_ms"] for x in rounds]
        result[name] = {"round_medians_ms": medians, "median_ms": statistics.median(medians),
                        "slowest_over_fastest": max(medians) / min(medians)}
    result["tapeflow"]["device"] = tapeflow[0]["device"]
    result["tapeflow"]["primal_ms"] = statistics.median(x["primal_ms"] for x in tapeflow)
    result["jax"]["version"] = jaxr[0]["jax"]
    t, j = result["tapeflow"], result["jax"]
    result["tapeflow_over_jax"] = t["median_ms"] / j["median_ms"]
    ok = t["median_ms"] <= j["median_ms"] and t["slowest_over_fastest"] <= 1.5
    result["target_met"] = ok

    print(f"\nAllen-Cahn {result['size']}, gradient dL/du0 on {result['cpu']} ({result['cpus']} CPUs)")
    print(f"load before {result['before']['loadavg_1_5_15']}, after {result['after']['loadavg_1_5_15']}; "
          f"busiest before: {result['before']['busiest_processes']}")
    print(f"gradients agree to {result['gradient_relative_difference']:.2e} (relative, f32)")
    print("| | gradient (median of round medians) | rounds (ms) | slowest / fastest |")
    print("|---|---|---|---|")
    for name, r in (("tapeflow CPU backend", t), (f"JAX {j['version']} jit(grad), CPU", j)):
        rounds = ", ".join(f"{x:.1f}" for x in r["round_medians_ms"])
        print(f"| {name} | {r['median_ms']:.1f} ms | {rounds} | {r['slowest_over_fastest']:.2f} |")
    print(f"tapeflow / JAX = {result['tapeflow_over_jax']:.2f}; target (<= 1.0, stable within 1.5x): "
          f"{'met' if ok else 'MISSED'}")
    print_forward_row(forward_row)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
