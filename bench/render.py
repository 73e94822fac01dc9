#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Renders a results file (the newest in bench/results by default) into docs/results.md — every
row per workload, and the issue's targets with the measured value, pass or miss — and a PNG plot
(docs/results.png, when matplotlib is installed).

    python3 bench/render.py [RESULTS.json] [--md docs/results.md] [--png docs/results.png] [--require-png]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass
class Target:
    name: str
    wanted: str                                  # how the target reads, for the table
    measure: Callable[[dict], Optional[float]]   # the measured value from the results, None: no data
    ok: Callable[[float], bool]


def rows_of(results: dict, workload: str, variant: str, size: Optional[str] = None) -> list[dict]:
    return [r for r in results["rows"]
            if r.get("workload") == workload and r.get("variant") == variant
            and (size is None or r.get("size") == size) and "error" not in r]


def one(results: dict, workload: str, variant: str, size: Optional[str] = None) -> Optional[dict]:
    found = rows_of(results, workload, variant, size)
    return found[0] if found else None


def ratio(results: dict, workload: str, num_variant: str, den_variant: str, field: str,
          size_of: Optional[str] = None) -> Optional[float]:
    """num.field / den.field for rows of one workload at the same size (the first size both have)."""
    for num in rows_of(results, workload, num_variant, size_of):
        den = one(results, workload, den_variant, num["size"])
        if den and num.get(field) and den.get(field):
            return num[field] / den[field]
    return None


def worst(values: list[Optional[float]], larger_is_worse: bool) -> Optional[float]:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return max(present) if larger_is_worse else min(present)


def best_staged_fraction(results: dict) -> Optional[float]:
    d2d = results.get("d2d_copy_GBps")
    staged = [r for v in ("staged-cp.async", "staged-bulk", "staged-register-db")
              for r in rows_of(results, "tape-bound", v)]
    if not d2d or not staged:
        return None
    return max(r["achieved_GBps"] for r in staged) / d2d


AC = "8192x8192 T100 f32"

TARGETS = [
    Target("tape-bound reverse sweep, best staged variant / same-run D2D copy", ">= 0.90",
           best_staged_fraction, lambda v: v >= 0.90),
    Target(f"Allen–Cahn {AC}, store: (forward + reverse) / primal", "<= 2.8",
           lambda r: (one(r, "allen-cahn", "tapeflow-store", AC) or {}).get("grad_over_primal"), lambda v: v <= 2.8),
    Target("Allen–Cahn gradient: PyTorch eager time / tapeflow time", ">= 5",
           lambda r: ratio(r, "allen-cahn", "pytorch-eager", "tapeflow-store", "grad_ms", AC), lambda v: v >= 5),
    Target("Allen–Cahn gradient: torch.compile time / tapeflow time", ">= 2",
           lambda r: ratio(r, "allen-cahn", "torch.compile", "tapeflow-store", "grad_ms", AC), lambda v: v >= 2),
    Target("Allen–Cahn gradient: JAX (jit(grad)) time / tapeflow time", ">= 2",
           lambda r: ratio(r, "allen-cahn", "jax-jit", "tapeflow-store", "grad_ms", AC), lambda v: v >= 2),
    Target("tape-bound reverse: naive Enzyme-style SoA time / staged AoS (cp.async) time", ">= 1.3",
           lambda r: ratio(r, "tape-bound", "naive-soa", "staged-cp.async", "reverse_ms"), lambda v: v >= 1.3),
    Target("LBM D2Q9 gradient / primal", "<= 3.0",
           lambda r: worst([x.get("grad_over_primal") for x in rows_of(r, "lbm", "tapeflow-store")], True),
           lambda v: v <= 3.0),
    Target("GMM gradient / objective (worst size)", "<= 1.8",
           lambda r: worst([x.get("grad_over_primal") for x in rows_of(r, "gmm", "tapeflow")], True),
           lambda v: v <= 1.8),
    Target("LSTM gradient: tapeflow time / cuDNN time (worst size)", "<= 1.25",
           lambda r: worst([ratio(r, "lstm", "tapeflow", "cudnn", "grad_ms", x["size"])
                            for x in rows_of(r, "lstm", "tapeflow")], True), lambda v: v <= 1.25),
    Target("LSTM gradient: tapeflow time / JAX time (worst size)", "<= 0.5",
           lambda r: worst([ratio(r, "lstm", "tapeflow", "jax-jit", "grad_ms", x["size"])
                            for x in rows_of(r, "lstm", "tapeflow")], True), lambda v: v <= 0.5),
    Target("RK4 reverse: per-thread global stack time / arena time", ">= 1.3",
           lambda r: ratio(r, "rk4", "global-stack", "arena", "reverse_ms"), lambda v: v >= 1.3),
]


def fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def human_bytes(b) -> str:
    if not b:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.3g} {unit}" if unit != "B" else f"{b} B"
        b /= 1024
    return str(b)


def evaluate(results: dict) -> list[tuple[Target, Optional[float], str]]:
    out = []
    for t in TARGETS:
        v = t.measure(results)
        status = "no data" if v is None else ("met" if t.ok(v) else "missed")
        out.append((t, v, status))
    return out


def markdown(results: dict, source: str) -> str:
    lines = [
        "# Results",
        "",
        f"Generated by `bench/render.py` from `{source}` — do not edit by hand.",
        "",
        f"- device: **{results.get('device', '?')}**, date {results.get('date', '?')}, commit "
        f"`{results.get('commit', '?')}`, driver {results.get('driver', '?')}"
        + (" — **quick sizes (a smoke run, not the brief's sizes)**" if results.get("quick") else ""),
        f"- same-run device-to-device copy: **{fmt(results.get('d2d_copy_GBps'))} GB/s** (bytes read + written)",
        f"- medians of {results.get('repeats', '?')} event-timed runs after {results.get('warmup', '?')} warm-up runs"
        + (f" (per-suite overrides: {results['settings']})" if results.get("settings") else ""),
    ]
    # Peer rows say how they were timed and in which run, where that differs from the head.
    counts = sorted({(r["warmup"], r["repeats"]) for r in results["rows"] if r.get("peer") and "repeats" in r})
    for warmup, repeats in counts:
        lines.append(f"- peer rows marked so: medians of {repeats} runs after {warmup} warm-up runs")
    runs = sorted({r["run"] for r in results["rows"] if r.get("run")})
    for run in runs:
        which = sorted({r["workload"] for r in results["rows"] if r.get("run") == run})
        lines.append(f"- {', '.join(which)} peer rows: {run}")
    lines += [
        "",
        "## Targets",
        "",
        "| target | wanted | measured | status |",
        "| --- | --- | --- | --- |",
    ]
    for t, v, status in evaluate(results):
        lines.append(f"| {t.name} | {t.wanted} | {fmt(v)} | {status} |")
    lines += ["", "Where a target is missed, docs/benchmarks.md says by how much and why.", ""]
    workloads: dict[str, list[dict]] = {}
    for r in results["rows"]:
        workloads.setdefault(r.get("workload", "?"), []).append(r)
    for w, rows in workloads.items():
        lines += [f"## {w}", "",
                  "| variant | size | peer | primal ms | grad ms | grad/primal | forward ms | reverse ms | "
                  "tape | peak device | GB/s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['variant']} | {r['size']} | {r.get('peer', '')} | {r['error']} "
                             "| | | | | | | |")
                continue
            lines.append("| " + " | ".join([
                r["variant"], r["size"], r.get("peer", "") or "tapeflow", fmt(r.get("primal_ms")),
                fmt(r.get("grad_ms")), fmt(r.get("grad_over_primal")), fmt(r.get("forward_ms")),
                fmt(r.get("reverse_ms")), human_bytes(r.get("tape_bytes")),
                human_bytes(r.get("peak_device_bytes")), fmt(r.get("achieved_GBps"))]) + " |")
        lines.append("")
    return "\n".join(lines)


def cpu_section(cpu: dict, source: str) -> str:
    """The CPU backend against JAX on one machine (tools/bench_cpu.py's result), with its target."""
    t, j = cpu["tapeflow"], cpu["jax"]
    ratio = t["median_ms"] / j["median_ms"]
    met = ratio <= 1.0 and t["slowest_over_fastest"] <= 1.5
    load = cpu.get("before", {}).get("loadavg_1_5_15", "?")
    lines = [
        "## CPU backend",
        "",
        f"From `{source}` (`tools/bench_cpu.py`): {cpu['workload']} {cpu['size']} on {cpu['cpu']} "
        f"({cpu['cpus']} CPUs), {cpu['date']}; {cpu['runs']} rounds, each a fresh tapeflow process and a fresh JAX "
        f"process, medians of {cpu['repeats']} gradients after {cpu['warmup']} warm-up ones; both gradients "
        f"agree to {cpu['gradient_relative_difference']:.1e}; load average before (1, 5, 15 min): {load}.",
        "",
        "| target | wanted | measured | status |",
        "| --- | --- | --- | --- |",
        f"| Allen–Cahn {cpu['size']} gradient, CPU backend: tapeflow / JAX jit(grad), same CPU | <= 1.0, slowest/fastest "
        f"round <= 1.5 | {fmt(ratio)} ({fmt(t['median_ms'])} / {fmt(j['median_ms'])} ms), "
        f"{fmt(t['slowest_over_fastest'])} | {'met' if met else 'missed'} |",
        "",
        "| | gradient ms (median of rounds) | rounds (ms) | slowest / fastest |",
        "| --- | --- | --- | --- |",
        f"| tapeflow CPU backend | {fmt(t['median_ms'])} | {', '.join(fmt(x) for x in t['round_medians_ms'])} | "
        f"{fmt(t['slowest_over_fastest'])} |",
        f"| JAX {j.get('version', '')} jit(grad) | {fmt(j['median_ms'])} | "
        f"{', '.join(fmt(x) for x in j['round_medians_ms'])} | {fmt(j['slowest_over_fastest'])} |",
        "",
    ]
    forward = cpu.get("forward")
    if forward:
        fmet = forward["forward_over_primal"] <= forward.get("target", 1.5)
        lines[lines.index("| | gradient ms (median of rounds) | rounds (ms) | slowest / fastest |") - 1:
              lines.index("| | gradient ms (median of rounds) | rounds (ms) | slowest / fastest |") - 1] = [
            f"| Allen–Cahn {cpu['size']}, CPU backend, store policy: augmented forward / untaped primal (the chain "
            f"reused; allocations after its first gradient: {forward.get('repeat_allocations', '?')}) | <= 1.5 | "
            f"{fmt(forward['forward_over_primal'])} ({fmt(forward['forward_ms'])} / {fmt(forward['primal_ms'])} ms) | "
            f"{'met' if fmet else 'missed'} |"]
    return "\n".join(lines)


# ---- the picture ------------------------------------------------------------------------------
# One panel per workload at its headline size: each row's time over the panel's fastest row, on a
# linear axis, tapeflow and each peer in its own colour, and where a row knows the bytes it moves,
# the time those bytes take at the same run's device-to-device copy rate (its copy bound). The
# tier sweep (Allen–Cahn under a device budget) is its own chart of time against budget. What is
# drawn is worked out first (panels_of, tier_sweep_of: plain data, unit-tested), then drawn.

HEADLINE = {"allen-cahn": AC, "lbm": "1024x1024 T100 f32", "gmm": "d128 K200 N10000", "lstm": "B1024 T300 I80 H256"}
COLOURS = {"tapeflow": "#1f5fa8", "pytorch": "#d9730d", "jax": "#2f8f46"}
OTHER_COLOUR = "#7f7f7f"
TIERS = "tiers-"       # the tier sweep's rows: tiers-<policy>-<percent>pct
RELATIVE_CAP = 8.0     # the axis ends here; a slower row's bar is cut and says its factor


@dataclass
class Bar:
    label: str
    who: str                  # "tapeflow" or the peer's name
    ms: float
    relative: float           # ms over the panel's fastest row's
    bound: Optional[float]    # the row's copy bound over the fastest row's time; None: bytes unknown


@dataclass
class Panel:
    workload: str
    size: str
    measure: str              # what was timed
    bars: list                # fastest first


@dataclass
class Sweep:
    size: str
    lines: dict               # policy -> [(budget percent, ms)], budgets descending
    unbounded_ms: Optional[float]  # tapeflow-store without a budget
    fastest_peer: Optional[tuple]  # (variant, ms)


def timed(r: dict) -> Optional[float]:
    """The time a row is judged by: the tape-bound microbenchmark's reverse sweep (what its bytes
    were counted over), every workload's gradient."""
    return r.get("reverse_ms") if r.get("workload") == "tape-bound" else r.get("grad_ms")


def headline_size(workload: str, rows: list) -> str:
    """The size a workload's panel shows: its named headline size when measured, else the size
    with the most rows (the later one on a tie)."""
    sizes = [r["size"] for r in rows]
    if HEADLINE.get(workload) in sizes:
        return HEADLINE[workload]
    return max(reversed(list(dict.fromkeys(sizes))), key=sizes.count)


def panels_of(results: dict) -> list:
    d2d = results.get("d2d_copy_GBps")
    by_workload: dict[str, list[dict]] = {}
    for r in results["rows"]:
        if "error" not in r and timed(r) and not r["variant"].startswith(TIERS):
            by_workload.setdefault(r["workload"], []).append(r)
    panels = []
    for workload, rows in by_workload.items():
        size = headline_size(workload, rows)
        rows = sorted((r for r in rows if r["size"] == size), key=timed)
        best = timed(rows[0])
        bars = []
        for r in rows:
            ms = timed(r)
            bound = ms * r["achieved_GBps"] / d2d / best if d2d and r.get("achieved_GBps") else None
            bars.append(Bar(r["variant"], r.get("peer") or "tapeflow", ms, ms / best, bound))
        measure = "reverse sweep" if workload == "tape-bound" else "gradient"
        panels.append(Panel(workload, size, measure, bars))
    return panels


def tier_sweep_of(results: dict) -> Optional[Sweep]:
    rows = [r for r in results["rows"] if "error" not in r and r.get("grad_ms")]
    tiers = [r for r in rows if r["variant"].startswith(TIERS)]
    if not tiers:
        return None
    size = tiers[0]["size"]
    lines: dict[str, list] = {}
    for r in tiers:
        policy, _, budget = r["variant"][len(TIERS):].rpartition("-")
        if r["size"] == size and budget.endswith("pct") and budget[:-3].isdigit():
            lines.setdefault(policy, []).append((int(budget[:-3]), r["grad_ms"]))
    for points in lines.values():
        points.sort(reverse=True)
    store = one(results, tiers[0]["workload"], "tapeflow-store", size)
    peers = sorted((r for r in rows if r.get("peer") and r["size"] == size and r["workload"] == tiers[0]["workload"]),
                   key=lambda r: r["grad_ms"])
    return Sweep(size, lines, store.get("grad_ms") if store else None,
                 (peers[0]["variant"], peers[0]["grad_ms"]) if peers else None)


def plot(results: dict, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
        from matplotlib.lines import Line2D
    except ImportError:
        return False
    panels = panels_of(results)
    sweep = tier_sweep_of(results)
    charts = len(panels) + (1 if sweep else 0)
    if charts == 0:
        return False
    columns = 2
    grid_rows = (charts + columns - 1) // columns
    heights = []
    for i in range(grid_rows):
        row = panels[i * columns:(i + 1) * columns]
        heights.append(max([len(p.bars) for p in row] + [5]))
    fig, axes = plt.subplots(grid_rows, columns, figsize=(13, 0.34 * sum(heights) + 1.2 * grid_rows + 1.4),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, p in zip(axes.flat, panels):
        top = min(max(b.relative for b in p.bars) * 1.05, RELATIVE_CAP)
        y = list(range(len(p.bars)))[::-1]  # fastest at the top
        ax.barh(y, [min(b.relative, top) for b in p.bars], color=[COLOURS.get(b.who, OTHER_COLOUR) for b in p.bars],
                height=0.7)
        for yi, b in zip(y, p.bars):
            if b.bound is not None:
                ax.plot([b.bound, b.bound], [yi - 0.42, yi + 0.42], color="black", linewidth=2)
            said = f"{fmt(b.ms)} ms  ×{b.relative:.2f}"
            if b.relative > top:
                ax.text(top * 0.98, yi, said + " ▸", va="center", ha="right", fontsize=7.5, color="white",
                        fontweight="bold")
            else:
                ax.text(b.relative + top * 0.01, yi, said, va="center", ha="left", fontsize=7.5)
        ax.set_yticks(y)
        ax.set_yticklabels([b.label for b in p.bars], fontsize=8)
        ax.set_xlim(0, top * 1.22)
        ax.axvline(1.0, color="#444444", linewidth=0.8, linestyle=":")
        ax.set_title(f"{p.workload}  {p.size}", fontsize=10, loc="left", fontweight="bold")
        ax.set_xlabel(f"{p.measure} time / fastest row's (linear; bars past ×{RELATIVE_CAP:g} are cut)", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.spines[["top", "right"]].set_visible(False)
    if sweep:
        ax = axes.flat[len(panels)]
        styles = {"auto": ("o", "-"), "recompute": ("s", "--"), "offload": ("^", "-."), "store": ("D", ":")}
        for policy, points in sorted(sweep.lines.items()):
            marker, line = styles.get(policy, ("x", "-"))
            ax.plot([b for b, _ in points], [ms for _, ms in points], marker=marker, linestyle=line,
                    color=COLOURS["tapeflow"], label=f"tapeflow {policy}")
        if sweep.unbounded_ms:
            ax.axhline(sweep.unbounded_ms, color=COLOURS["tapeflow"], linestyle=(0, (1, 3)), linewidth=1,
                       label=f"tapeflow store, no budget ({fmt(sweep.unbounded_ms)} ms)")
        if sweep.fastest_peer:
            name, ms = sweep.fastest_peer
            ax.axhline(ms, color=COLOURS["pytorch"] if "torch" in name else COLOURS["jax"], linestyle=":",
                       linewidth=1.2, label=f"fastest peer: {name} ({fmt(ms)} ms)")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.invert_xaxis()  # budgets shrink to the right
        ax.set_xlabel("device budget, % of the whole tape", fontsize=8)
        ax.set_ylabel("gradient ms (log)", fontsize=8)
        ax.set_title(f"tier sweep: allen-cahn  {sweep.size}", fontsize=10, loc="left", fontweight="bold")
        ax.tick_params(labelsize=8)
        ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
        # Beside the chart: the slot to its right is empty when the panels are even, and nothing is hidden.
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.04, 0.5), frameon=False)
        ax.spines[["top", "right"]].set_visible(False)
    for ax in list(axes.flat)[charts:]:
        ax.set_visible(False)
    legend = [Patch(color=COLOURS[w], label=w) for w in COLOURS] + \
             [Line2D([0], [0], color="black", linewidth=2, label="copy bound: the row's bytes at the same-run D2D rate")]
    fig.legend(handles=legend, loc="upper center", ncol=len(legend), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 0.985))
    fig.suptitle(f"{results.get('device', '?')}, {results.get('date', '?')}, commit {results.get('commit', '?')}: "
                 f"medians of {results.get('repeats', '?')} event-timed runs; D2D copy "
                 f"{fmt(results.get('d2d_copy_GBps'))} GB/s", fontsize=10, y=0.998)
    fig.tight_layout(rect=(0, 0, 1, 0.965))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def newest(directory: str) -> str:
    files = sorted(glob.glob(os.path.join(directory, "*.json")), key=os.path.getmtime)
    if not files:
        raise SystemExit(f"render.py: no results in {directory}")
    return files[-1]


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="?", help="results file (default: the newest in bench/results)")
    p.add_argument("--md", default=os.path.join(here, "..", "docs", "results.md"))
    p.add_argument("--png", default=os.path.join(here, "..", "docs", "results.png"))
    p.add_argument("--require-png", action="store_true", help="fail when the plot cannot be drawn")
    p.add_argument("--cpu", help="tools/bench_cpu.py's result (default: the newest in bench/results/cpu, if any)")
    a = p.parse_args()
    source = a.results or newest(os.path.join(here, "results"))
    with open(source) as f:
        results = json.load(f)
    if not isinstance(results.get("rows"), list):
        print(f"render.py: {source} has no rows", file=sys.stderr)
        return 2
    text = markdown(results, os.path.relpath(source, os.path.join(here, "..")))
    cpu_source = a.cpu or (newest(os.path.join(here, "results", "cpu"))
                           if glob.glob(os.path.join(here, "results", "cpu", "*.json")) else None)
    if cpu_source:
        with open(cpu_source) as f:
            text += "\n" + cpu_section(json.load(f), os.path.relpath(cpu_source, os.path.join(here, "..")))
    drew = plot(results, a.png)
    if drew:
        text += f"\n![gradient times]({os.path.basename(a.png)})\n"
    with open(a.md, "w") as f:
        f.write(text)
    print(f"wrote {a.md}" + (f" and {a.png}" if drew else " (no plot: matplotlib is not installed)"))
    if a.require_png and not drew:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
