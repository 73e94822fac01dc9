# SPDX-License-Identifier: Apache-2.0
"""tapeflow's mixed schedule against checkpoint-schedules (PyPI), an independent implementation
of H-Revolve (Herrmann and Pallez 2020), Revolve (Griewank and Walther 2000) and the Mixed
schedule (Maddison 2024).

Each reference schedule is driven through `cost()` below, which charges every action under the
cost model of docs/tiers.md ("The mixed schedule"); tapeflow's optimiser (the
`tapeflow_schedule_model` binary, path in $TAPEFLOW_SCHEDULE_MODEL) prints the cost of its own
schedule for the same model. tapeflow's must cost no more, over a sweep of step counts, snapshot
counts and level costs.

The package is required (CI installs it): a missing package is a failure, not a skip.
"""
import itertools
import os
import subprocess
import unittest

import checkpoint_schedules as cs
from checkpoint_schedules import StorageType

WORK = StorageType.WORK
RAM = StorageType.RAM
DISK = StorageType.DISK


def cost(schedule, uf, ub, write, read):
    """Runs a checkpoint-schedules schedule to its end under the cost model: uf per forward step
    (taped or not), ub per reverse step, write[level] per checkpoint of the forward restart data
    stored on a level, read[level] per copy or move from a level to the working storage.
    Also checks the schedule reverses every step once, last first, and returns the cost."""
    n = schedule.max_n
    total = 0.0
    reversed_to = n
    for action in schedule:
        if isinstance(action, cs.Forward):
            total += (action.n1 - action.n0) * uf
            if action.write_ics:
                total += write[action.storage]
        elif isinstance(action, cs.Reverse):
            assert action.n1 == reversed_to, (action, reversed_to)
            total += (action.n1 - action.n0) * ub
            reversed_to = action.n0
        elif isinstance(action, (cs.Copy, cs.Move)):
            if action.to_storage == WORK:
                total += read[action.from_storage]
        elif isinstance(action, cs.EndReverse):
            break
    assert reversed_to == 0, "the reference schedule did not reverse every step"
    return total


class Tapeflow:
    """Batches cost models for the tapeflow_schedule_model binary."""

    def __init__(self):
        self.binary = os.environ.get("TAPEFLOW_SCHEDULE_MODEL")
        if not self.binary:
            raise RuntimeError("set TAPEFLOW_SCHEDULE_MODEL to the tapeflow_schedule_model binary")
        self.lines = []

    def add(self, steps, device, host, state, layer, uf, ua, ub, write, read, host_layer_ms,
            device_layers, host_layers, device_checkpoints, host_checkpoints):
        fields = [steps, device, host, state, layer, uf, ua, ub, write[RAM], read[RAM], write[DISK],
                  read[DISK], host_layer_ms, int(device_layers), int(host_layers),
                  int(device_checkpoints), int(host_checkpoints)]
        self.lines.append(" ".join(repr(x) if isinstance(x, float) else str(x) for x in fields))

    def run(self):
        out = subprocess.run([self.binary], input="\n".join(self.lines) + "\n", capture_output=True,
                             text=True, check=True).stdout.split("\n")
        result = []
        for line in out[: len(self.lines)]:
            result.append(None if line == "infeasible" else float(line.split()[0]))
        return result


def levels(w_ram, r_ram, w_disk, r_disk):
    return {RAM: w_ram, DISK: w_disk}, {RAM: r_ram, DISK: r_disk}


class AgainstCheckpointSchedules(unittest.TestCase):
    def compare(self, cases):
        """cases: (label, reference cost, model args for Tapeflow.add)."""
        tf = Tapeflow()
        for _, _, model in cases:
            tf.add(*model)
        mine = tf.run()
        self.assertEqual(len(mine), len(cases))
        worse = []
        for (label, ref, _), ours in zip(cases, mine):
            if ours is None or ours > ref + 1e-9 * max(1.0, ref):
                worse.append(f"{label}: tapeflow {ours}, reference {ref}")
        self.assertEqual(worse, [], "tapeflow's schedule costs more than the reference's")
        return mine

    def test_hrevolve(self):
        """Two checkpoint levels (device = RAM, host = disk), layers never kept: H-Revolve's class."""
        cases = []
        for n, ram, disk, (wd, rd), ub in itertools.product(
                (2, 3, 5, 8, 13, 21, 34), (1, 2, 3, 5), (0, 1, 2, 4),
                ((0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (5.0, 3.0), (0.5, 4.0)), (1.0, 2.5)):
            uf = 1.0
            ref_schedule = cs.HRevolve(n, ram, disk, uf=uf, ub=ub, wd=wd, rd=rd)
            write, read = levels(0.0, 0.0, wd, rd)
            ref = cost(ref_schedule, uf, ub, write, read)
            cases.append((f"HRevolve(n={n}, ram={ram}, disk={disk}, wd={wd}, rd={rd}, ub={ub})", ref,
                          (n, ram, disk, 1, 1, uf, uf, ub, write, read, 0.0, False, False, True, disk > 0)))
        mine = self.compare(cases)
        # H-Revolve is optimal in its class: where forward and reverse steps cost the same,
        # tapeflow's DP over that class finds the same cost. (Where they differ, checkpoint-schedules
        # 1.0.4 passes (uf, ub) to get_hopt_table, whose parameters are (ub, uf): its schedule is
        # optimal for the swapped costs, and tapeflow's is strictly cheaper in some cases.)
        same = [(label, ref, ours) for (label, ref, model), ours in zip(cases, mine) if model[5] == model[7]]
        self.assertGreater(len(same), 400)
        differ = [x for x in same if abs(x[2] - x[1]) > 1e-9 * max(1.0, x[1])]
        self.assertEqual(differ, [])

    def test_revolve(self):
        cases = []
        for n, snaps in itertools.product((1, 2, 3, 4, 7, 10, 16, 25, 40, 60), (1, 2, 3, 4, 6, 9)):
            uf, ub = 1.0, 2.0
            ref = cost(cs.Revolve(n, snaps, uf=uf, ub=ub), uf, ub, *levels(0.0, 0.0, 0.0, 0.0))
            cases.append((f"Revolve(n={n}, snapshots={snaps})", ref,
                          (n, snaps, 0, 1, 1, uf, uf, ub, *levels(0.0, 0.0, 0.0, 0.0), 0.0, False, False, True,
                           False)))
        self.compare(cases)

    def test_mixed(self):
        """One level of units that hold either a checkpoint or a step's layer (Maddison 2024), on
        the device (RAM) or on the host (disk)."""
        cases = []
        for n, snaps, storage in itertools.product((1, 2, 3, 4, 6, 9, 14, 20, 30, 45), (1, 2, 3, 4, 6, 10),
                                                   (RAM, DISK)):
            if snaps > max(n - 1, 1):
                continue
            uf, ub = 1.0, 1.0
            zero = levels(0.0, 0.0, 0.0, 0.0)
            ref = cost(cs.MixedCheckpointSchedule(n, snaps, storage=storage), uf, ub, *zero)
            device = snaps if storage == RAM else 0
            host = snaps if storage == DISK else 0
            cases.append((f"Mixed(n={n}, snapshots={snaps}, {storage})", ref,
                          (n, device, host, 1, 1, uf, uf, ub, *zero, 0.0, storage == RAM, storage == DISK,
                           storage == RAM, storage == DISK)))
        self.compare(cases)

    def test_level_costs_with_a_slower_device_level(self):
        """H-Revolve's sequences with a non-zero cost on the first level too (its class allows it;
        the HRevolve class fixes that level's costs at zero)."""
        from checkpoint_schedules.hrevolve import RevolveCheckpointSchedule
        from checkpoint_schedules.hrevolve_sequences import hrevolve
        cases = []
        for n, ram, disk, (w0, r0, w1, r1) in itertools.product(
                (2, 4, 7, 12, 20), (1, 2, 3), (1, 3),
                ((0.5, 0.5, 2.0, 2.0), (1.0, 0.2, 3.0, 1.0), (0.1, 1.5, 0.2, 3.0))):
            uf, ub = 1.0, 1.5
            seq = list(hrevolve(n - 1, (ram, disk), [w0, w1], [r0, r1], uf, ub))
            ref_schedule = RevolveCheckpointSchedule(n, ram, disk, seq)
            write, read = levels(w0, r0, w1, r1)
            ref = cost(ref_schedule, uf, ub, write, read)
            cases.append((f"hrevolve(n={n}, ram={ram}, disk={disk}, w=({w0},{w1}), r=({r0},{r1}))", ref,
                          (n, ram, disk, 1, 1, uf, uf, ub, write, read, 0.0, False, False, True, True)))
        self.compare(cases)

    def test_mixing_everything_beats_each_reference(self):
        """With every choice open (layers on either level, checkpoints on either), tapeflow's
        schedule costs no more than the best of the references restricted to their classes."""
        cases = []
        for n, units in itertools.product((4, 8, 15, 24), (1, 2, 4)):
            uf, ub = 1.0, 2.0
            write, read = levels(0.0, 0.0, 1.0, 1.0)
            refs = [cost(cs.HRevolve(n, units, units, uf=uf, ub=ub, wd=1.0, rd=1.0), uf, ub, write, read)]
            if units <= max(n - 1, 1):
                refs.append(cost(cs.MixedCheckpointSchedule(n, units, storage=RAM), uf, ub, write, read))
            cases.append((f"all choices (n={n}, units={units})", min(refs),
                          (n, units, units, 1, 1, uf, uf, ub, write, read, 0.0, True, True, True, True)))
        self.compare(cases)


if __name__ == "__main__":
    unittest.main()
