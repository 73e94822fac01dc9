# SPDX-License-Identifier: Apache-2.0
"""bench/render.py: targets are read from the right rows and judged the right way; every row and
error reaches the markdown. Run by CTest (python3 -m unittest)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, BENCH)

import render  # noqa: E402

AC = "8192x8192 T100 f32"


def results(**overrides):
    rows = [
        {"workload": "tape-bound", "variant": "naive-soa", "size": "s", "reverse_ms": 1.5, "achieved_GBps": 2000.0},
        {"workload": "tape-bound", "variant": "staged-cp.async", "size": "s", "reverse_ms": 1.0, "achieved_GBps": 2850.0},
        {"workload": "tape-bound", "variant": "staged-bulk", "size": "s", "reverse_ms": 1.1, "achieved_GBps": 2600.0},
        {"workload": "allen-cahn", "variant": "tapeflow-store", "size": AC, "primal_ms": 10.0, "grad_ms": 31.0,
         "grad_over_primal": 3.1},
        {"workload": "allen-cahn", "variant": "pytorch-eager", "size": AC, "grad_ms": 186.0, "peer": "pytorch"},
        {"workload": "allen-cahn", "variant": "torch.compile", "size": AC, "peer": "pytorch", "error": "out of memory"},
        {"workload": "lstm", "variant": "tapeflow", "size": "a", "grad_ms": 10.0},
        {"workload": "lstm", "variant": "cudnn", "size": "a", "grad_ms": 9.0, "peer": "pytorch"},
        {"workload": "lstm", "variant": "tapeflow", "size": "b", "grad_ms": 30.0},
        {"workload": "lstm", "variant": "cudnn", "size": "b", "grad_ms": 20.0, "peer": "pytorch"},
        {"workload": "gmm", "variant": "tapeflow", "size": "d2 K5 N1000", "grad_over_primal": 1.5},
        {"workload": "gmm", "variant": "tapeflow", "size": "d128 K200 N10000", "grad_over_primal": 1.9},
    ]
    r = {"device": "Test GPU", "date": "2026-11-22", "commit": "abc", "driver": "tapeflow_bench",
         "d2d_copy_GBps": 3000.0, "warmup": 2, "repeats": 10, "rows": rows}
    r.update(overrides)
    return r


def status(res, prefix):
    for t, v, s in render.evaluate(res):
        if t.name.startswith(prefix):
            return v, s
    raise AssertionError(prefix)


class Targets(unittest.TestCase):
    def test_bandwidth_uses_the_best_staged_variant(self):
        v, s = status(results(), "tape-bound reverse sweep")
        self.assertAlmostEqual(v, 0.95)
        self.assertEqual(s, "met")
        v, s = status(results(d2d_copy_GBps=4000.0), "tape-bound reverse sweep")
        self.assertEqual(s, "missed")

    def test_ratios_and_missing_data(self):
        self.assertEqual(status(results(), "Allen–Cahn 8192")[1], "missed")        # 3.1 > 2.8
        v, s = status(results(), "Allen–Cahn gradient: PyTorch eager")
        self.assertAlmostEqual(v, 6.0)
        self.assertEqual(s, "met")
        self.assertEqual(status(results(), "Allen–Cahn gradient: torch.compile")[1], "no data")  # error row
        self.assertEqual(status(results(), "Allen–Cahn gradient: JAX")[1], "no data")
        v, s = status(results(), "tape-bound reverse: naive")
        self.assertAlmostEqual(v, 1.5)
        self.assertEqual(status(results(), "RK4")[1], "no data")

    def test_worst_size_decides(self):
        v, s = status(results(), "LSTM gradient: tapeflow time / cuDNN")
        self.assertAlmostEqual(v, 1.5)  # size b: 30 / 20
        self.assertEqual(s, "missed")
        v, s = status(results(), "GMM")
        self.assertAlmostEqual(v, 1.9)
        self.assertEqual(s, "missed")


class Markdown(unittest.TestCase):
    def test_every_row_and_error_is_rendered(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "r.json")
            with open(src, "w") as f:
                json.dump(results(), f)
            md = os.path.join(tmp, "results.md")
            png = os.path.join(tmp, "results.png")
            rc = subprocess.call([sys.executable, os.path.join(BENCH, "render.py"), src, "--md", md, "--png", png])
            self.assertEqual(rc, 0)
            with open(md) as f:
                text = f.read()
            self.assertIn("Test GPU", text)
            self.assertIn("| torch.compile | " + AC + " | pytorch | out of memory", text)
            peers = [line.split("|")[3].strip() for line in text.splitlines()
                     if line.startswith("| ") and line.count("|") == 12]
            self.assertEqual(peers.count("tapeflow"), 8)  # the rows without a peer
            self.assertEqual(peers.count("pytorch"), 4)  # one of them an error row
            self.assertIn("| missed |", text)

    def test_bad_file_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "r.json")
            with open(src, "w") as f:
                json.dump({"device": "x"}, f)
            rc = subprocess.call([sys.executable, os.path.join(BENCH, "render.py"), src, "--md",
                                  os.path.join(tmp, "m.md"), "--png", os.path.join(tmp, "p.png")])
            self.assertEqual(rc, 2)


class Picture(unittest.TestCase):
    """What the picture draws, worked out before any drawing (matplotlib is not needed here)."""

    def rows(self):
        return results(rows=[
            {"workload": "tape-bound", "variant": "naive-soa", "size": "s", "grad_ms": 9.0, "reverse_ms": 2.0,
             "achieved_GBps": 1500.0},
            {"workload": "tape-bound", "variant": "staged-bulk", "size": "s", "grad_ms": 9.0, "reverse_ms": 1.0,
             "achieved_GBps": 2700.0},
            {"workload": "allen-cahn", "variant": "tapeflow-store", "size": AC, "grad_ms": 60.0, "achieved_GBps": 2000.0},
            {"workload": "allen-cahn", "variant": "torch.compile", "size": AC, "grad_ms": 40.0, "peer": "pytorch"},
            {"workload": "allen-cahn", "variant": "jax-jit", "size": AC, "peer": "jax", "error": "out of memory"},
            {"workload": "allen-cahn", "variant": "small-layers-store", "size": "256x256 T500 f32", "grad_ms": 5.0},
            {"workload": "allen-cahn", "variant": "tiers-auto-100pct", "size": AC, "grad_ms": 61.0},
            {"workload": "allen-cahn", "variant": "tiers-auto-10pct", "size": AC, "grad_ms": 90.0},
            {"workload": "allen-cahn", "variant": "tiers-auto-50pct", "size": AC, "grad_ms": 70.0},
            {"workload": "allen-cahn", "variant": "tiers-offload-50pct", "size": AC, "grad_ms": 900.0},
            {"workload": "lstm", "variant": "tapeflow", "size": "x", "grad_ms": 10.0},
            {"workload": "lstm", "variant": "tapeflow", "size": "y", "grad_ms": 30.0},
            {"workload": "lstm", "variant": "cudnn", "size": "y", "grad_ms": 20.0, "peer": "pytorch"},
        ], d2d_copy_GBps=3000.0)

    def test_one_panel_per_workload_at_its_headline_size_fastest_first(self):
        panels = {p.workload: p for p in render.panels_of(self.rows())}
        self.assertEqual(list(panels), ["tape-bound", "allen-cahn", "lstm"])
        ac = panels["allen-cahn"]
        self.assertEqual(ac.size, AC)  # the named headline, not the other size; no tier or error row
        self.assertEqual([(b.label, b.who, b.ms) for b in ac.bars],
                         [("torch.compile", "pytorch", 40.0), ("tapeflow-store", "tapeflow", 60.0)])
        self.assertEqual([b.relative for b in ac.bars], [1.0, 1.5])
        self.assertEqual(panels["lstm"].size, "y")  # no named headline: the size with the most rows
        self.assertEqual([b.label for b in panels["lstm"].bars], ["cudnn", "tapeflow"])

    def test_the_copy_bound_is_the_rows_bytes_at_the_copy_rate_over_the_fastest_time(self):
        panels = {p.workload: p for p in render.panels_of(self.rows())}
        ac = panels["allen-cahn"].bars
        self.assertIsNone(ac[0].bound)                      # a peer's bytes are not known
        self.assertAlmostEqual(ac[1].bound, 60.0 * 2000.0 / 3000.0 / 40.0)  # 1.0: as slow as the peer
        tape = panels["tape-bound"]
        self.assertEqual(tape.measure, "reverse sweep")     # judged by the sweep its bytes were counted over
        self.assertEqual([b.ms for b in tape.bars], [1.0, 2.0])
        self.assertAlmostEqual(tape.bars[0].bound, 0.9)
        self.assertAlmostEqual(tape.bars[1].bound, 1.0)
        self.assertTrue(all(b.bound is None for b in render.panels_of(results(d2d_copy_GBps=None))[0].bars))

    def test_the_tier_sweep_is_time_against_budget(self):
        sweep = render.tier_sweep_of(self.rows())
        self.assertEqual(sweep.size, AC)
        self.assertEqual(sweep.lines, {"auto": [(100, 61.0), (50, 70.0), (10, 90.0)], "offload": [(50, 900.0)]})
        self.assertEqual(sweep.unbounded_ms, 60.0)
        self.assertEqual(sweep.fastest_peer, ("torch.compile", 40.0))
        self.assertIsNone(render.tier_sweep_of(results()))

    @unittest.skipUnless(importlib.util.find_spec("matplotlib"), "matplotlib is not installed")
    def test_it_is_drawn(self):
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "p.png")
            self.assertTrue(render.plot(self.rows(), png))
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class CpuSection(unittest.TestCase):
    def cpu(self, tapeflow_ms, rounds):
        return {"workload": "allen-cahn", "size": "512x512 T100 f32", "cpu": "Test CPU", "cpus": 2, "runs": len(rounds),
                "warmup": 3, "repeats": 11, "date": "2026-11-23", "gradient_relative_difference": 1e-7,
                "before": {"loadavg_1_5_15": [0.5, 0.5, 0.5]},
                "tapeflow": {"median_ms": tapeflow_ms, "round_medians_ms": rounds,
                             "slowest_over_fastest": max(rounds) / min(rounds)},
                "jax": {"median_ms": 50.0, "round_medians_ms": [50.0, 51.0], "slowest_over_fastest": 1.02,
                        "version": "0.10"}}

    def test_met_when_faster_than_jax_and_stable(self):
        text = render.cpu_section(self.cpu(20.0, [20.0, 21.0]), "x.json")
        self.assertIn("| 0.4 (20 / 50 ms)", text)
        self.assertIn("| met |", text)

    def test_the_forward_row_when_the_result_has_one(self):
        cpu = self.cpu(20.0, [20.0, 21.0])
        self.assertNotIn("augmented forward", render.cpu_section(cpu, "x.json"))
        cpu["forward"] = {"forward_over_primal": 1.2, "forward_ms": 4.8, "primal_ms": 4.0, "repeat_allocations": 0,
                          "target": 1.5}
        text = render.cpu_section(cpu, "x.json")
        self.assertIn("augmented forward / untaped primal", text)
        self.assertIn("| <= 1.5 | 1.2 (4.8 / 4 ms) | met |", text)
        cpu["forward"]["forward_over_primal"] = 2.0
        self.assertIn("| <= 1.5 | 2 (4.8 / 4 ms) | missed |", render.cpu_section(cpu, "x.json"))

    def test_missed_when_slower_or_unstable(self):
        self.assertIn("| missed |", render.cpu_section(self.cpu(60.0, [60.0, 61.0]), "x.json"))
        self.assertIn("| missed |", render.cpu_section(self.cpu(20.0, [10.0, 20.0]), "x.json"))


if __name__ == "__main__":
    unittest.main()
