# SPDX-License-Identifier: Apache-2.0
"""Runs every peer benchmark (bench/peers/*_torch.py, *_jax.py), each in its own process, and
appends their rows to a results file written by tapeflow_bench.

    python3 bench/peers/run.py --results bench/results/<date>-<device>.json [--quick] [--only lbm,gmm]

A peer whose framework is missing is reported and skipped; a peer that fails (wrong gradient,
crash) is reported, the others still run, and the exit status is 1.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile


def write(path: str, results: dict) -> None:
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True, help="results file to extend (tapeflow_bench's output)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="comma-separated workloads (allen_cahn, burgers, lbm, gmm, lstm, wave)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds one peer script may run before it is stopped and counted as failed")
    a = p.parse_args()
    with open(a.results) as f:
        results = json.load(f)
    here = os.path.dirname(os.path.abspath(__file__))
    only = {w for w in a.only.split(",") if w}
    scripts = sorted(glob.glob(os.path.join(here, "*_torch.py")) + glob.glob(os.path.join(here, "*_jax.py")))
    failed = []
    for script in scripts:
        name = os.path.basename(script)[:-3]
        workload = name.rsplit("_", 1)[0]
        if only and workload not in only:
            continue
        framework = name.rsplit("_", 1)[1]
        if importlib.util.find_spec(framework) is None:
            print(f"== {name}: skipped, {framework} is not installed for {sys.executable}", flush=True)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            cmd = [sys.executable, script, "--out", out, "--warmup", str(a.warmup), "--repeats", str(a.repeats)]
            if a.quick:
                cmd.append("--quick")
            print(f"== {name}", flush=True)
            try:
                rc = subprocess.call(cmd, timeout=a.timeout)
            except subprocess.TimeoutExpired:
                print(f"peer {name} stopped after {a.timeout:.0f} s", file=sys.stderr)
                rc = "timeout"
            if rc != 0 or not os.path.exists(out):
                print(f"peer {name} failed (exit {rc})", file=sys.stderr)
                failed.append(name)
                continue
            with open(out) as f:
                rows = json.load(f)["rows"]
        results["rows"].extend(rows)
        write(a.results, results)  # after every peer: a run stopped by a time limit keeps its rows
    write(a.results, results)
    print(f"appended peer rows to {a.results}; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
