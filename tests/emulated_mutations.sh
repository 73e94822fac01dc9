#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proof that the emulated tests can fail (docs/emulation.md): applies one mutation at a time to the
# tile pipelines (include/tapeflow/device/tile_pipeline.cuh) — a barrier removed, a wait removed, a
# tile staged into the wrong slot, the last tile dropped — and to the stencil segments' tile program
# (include/tapeflow/stencil/tile_program.hpp) — a barrier between levels removed, a halo one cell
# short, a step index off by one, the wrong cell's coefficients, a dL/dc or an observation
# dropped, a level's or an adjoint's box taken as inside the grid, a boundary level's fixed edges
# never decided, a boundary tile's last level run past the grid, a row of tiles too many taken
# for inner tiles (compiled as inside the grid) — and to its GPU team (include/tapeflow/stencil/device.cuh) — an interior box's copies
# not waited for, a periodic box read a cell on, missing a row carry, copied 16 bytes at a time from a copy on, or taken for a
# box that reaches one row past the grid; a
# column's runs one cell short or overlapping; a widened checkpoint box read unshifted; a tile walk's
# divisors swapped; the forward launched on the reverse's grid — and to the segment runners'
# program (include/tapeflow/stencil/runner_program.hpp: the forward on the reverse's tiles) and
# to the column sweeps' windows
# (include/tapeflow/stencil/sweep.hpp: preloaded or moved a cell off) —
# rebuilds the emulated GPU tests and runs them, and prints which tests each mutation fails. The
# sources are restored afterwards.
#
#   tests/emulated_mutations.sh [BUILD_DIR]      (a configured build with TAPEFLOW_EMULATED=ON)
#   ONLY='copy' tests/emulated_mutations.sh ...  (only the mutations whose name matches the regex)
#
# Exit status 1 if some mutation fails no test.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/test}
pipeline=include/tapeflow/device/tile_pipeline.cuh
program=include/tapeflow/stencil/tile_program.hpp
team=include/tapeflow/stencil/device.cuh
sweep=include/tapeflow/stencil/sweep.hpp
runner=include/tapeflow/stencil/runner_program.hpp
backups=$(mktemp -d)
cp "$pipeline" "$backups/pipeline"
cp "$program" "$backups/program"
cp "$team" "$backups/team"
cp "$sweep" "$backups/sweep"
cp "$runner" "$backups/runner"
restore() {
  cp "$backups/pipeline" "$pipeline"
  cp "$backups/program" "$program"
  cp "$backups/team" "$team"
  cp "$backups/sweep" "$sweep"
  cp "$backups/runner" "$runner"
}
trap 'restore; rm -rf "$backups"' EXIT

# file | name | exact text to find | replacement (one occurrence each; neither may hold a '|')
mutations=(
  "pipeline|register: no barrier before the store|      __syncthreads();  // every thread is done with the previous tile in shared memory|"
  "pipeline|register: no barrier after the store|      window_span const span = store();
      __syncthreads();|      window_span const span = store();"
  "pipeline|cp.async: no consumer wait|      cuda::pipeline_consumer_wait_prior<Stages - 1>(pipe);  // this thread's chunks of tile k|"
  "pipeline|cp.async: wait for one group too few|      cuda::pipeline_consumer_wait_prior<Stages - 1>(pipe);|      cuda::pipeline_consumer_wait_prior<Stages>(pipe);"
  "pipeline|cp.async: no barrier before the consumer|      __syncthreads();                                         // everyone's chunks of tile k|"
  "pipeline|cp.async: no barrier before the refill|      __syncthreads();  // every thread is done with the slot before tile k + Stages refills it|"
  "pipeline|cp.async: staged into the wrong slot|slots + (fetched % Stages) * slot_records|slots + ((fetched + 1) % Stages) * slot_records"
  "pipeline|bulk: no wait on the barrier|      full[k % Stages].wait_parity(((k / Stages) & 1) != 0);|"
  "pipeline|bulk: waits on the wrong parity|      full[k % Stages].wait_parity(((k / Stages) & 1) != 0);|      full[k % Stages].wait_parity(((k / Stages) & 1) == 0);"
  "pipeline|bulk: no barrier before the refill|      __syncthreads();  // every thread is done with the slot before the engine refills it|"
  "pipeline|every pipeline: the last tile dropped|    return block < tiles ? (tiles - block + grid - 1) / grid : 0;|    return block < tiles ? (tiles - block) / grid : 0;"
  "pipeline|every pipeline: tiles walked first-first|    return tiles - 1 - (block + k * grid);|    return block + k * grid;"
  "program|stencil: no barrier between recomputed levels|nullptr, i == 1 ? u0_wider : 0);
      team.sync();|nullptr, i == 1 ? u0_wider : 0);"
  "program|stencil: no barrier between adjoint levels|      team.sync();
      lb = b;|      lb = b;"
  "program|stencil: the checkpoint's halo one cell short|    box const u0 = loaded_box<Inner>(checkpoint_box, s.state_halo(0));  // as loaded|    box const u0 = grown(t, dims, s.state_halo(0) - 1);"
  "program|stencil: a widened checkpoint read unshifted|nullptr, i == 1 ? u0_wider : 0);|nullptr, i == 1 ? 0 * u0_wider : 0);"
  "program|stencil: a forward step's index one off|first + static_cast<std::size_t>(i - 1), &t);|first + static_cast<std::size_t>(i), &t);"
  "program|stencil: scatter reads the tap's cell's coefficients|          own_coefficients(b.x0 + yx, b.y0 + yy, b.z0 + yz, c, taps_inside);|          own_coefficients(b.x0 + x, b.y0 + y, b.z0 + z, c, taps_inside);"
  "program|stencil: a segment's first dL/dc dropped|        if constexpr (coefficient_count > 0) { add_parameter_adjoint(u, ub, next, lb, own, x, y, z, first, dc); }|"
  "program|stencil: a segment's first state not observed|        observe_cell(u, first, t.x0 + x, t.y0 + y, t.z0 + z);|        static_cast<void>(u);"
  "program|stencil: a level's box taken as inside the grid|within(nb);  // nothing to wrap|true;  // nothing to wrap"
  "program|stencil: an adjoint's taps taken as inside the grid|within(grown(b, dims, coefficient_reach()));  // and so|true;  // and so"
  "program|stencil: a boundary level's fixed edges never decided|      decided_once(!Inner && !within(nb) && g.edge == boundary::fixed, [&](auto edges) {|      decided_once(false, [&](auto edges) {"
  "program|stencil: a boundary tile's last level past the grid's last row|    cut(t.y0, t.ey, g.ny);|    static_cast<void>(cut);"
  "program|stencil: inner tiles one row too many|    rect.row_last = static_cast<std::uint32_t>(last[row]);|    rect.row_last = static_cast<std::uint32_t>(last[row] + 1);"
  "program|stencil: a box one row past the grid copied|b.y0 + b.ey <= static_cast<std::int64_t>(g.ny) &&|b.y0 + b.ey <= static_cast<std::int64_t>(g.ny) + 1 &&"
  "team|stencil: a periodic box read a cell on along x|      auto const gx = static_cast<std::size_t>(wrapped(b.x0 + x, nx));|      auto const gx = static_cast<std::size_t>(wrapped(b.x0 + x + 1, nx));"
  "team|stencil: a box's copies not waited for|    cuda::pipeline_consumer_wait_prior<0>(pipe);|"
  "team|stencil: a copy's row carry dropped|        offset += row_carry;|"
  "team|stencil: a box's 16-byte copies read one copy on|                           src + static_cast<std::size_t>(f) * field_stride + Width * c.offset,|                           src + static_cast<std::size_t>(f) * field_stride + Width * c.offset + (Width > 1 ? Width : 0),"
  "team|forward: launched on the reverse's persistent grid|blocks_for(kernel, count, smem, forward_grid_blocks_)|blocks_for(kernel, count, smem, grid_blocks_)"
  "runner|forward: run on the reverse's tiles|    forward.tile = forward_tile_;|    static_cast<void>(forward_tile_);"
  "team|sweep: a column's last run one cell short|      int const n = along - first < length ? along - first : length;|      int const n = along - first < length ? along - first - 1 : length;"
  "team|sweep: runs of a column overlap by a cell|      int const first = c.q * length;|      int const first = c.q * (length - 1);"
  "program|tile walk: a tile's place from swapped divisors|span(range.span_divisor()), kept(range.kept_divisor()), width(rect.width),
      cols(rect.cols)|span(range.span_divisor()), kept(range.kept_divisor()), width(rect.cols),
      cols(rect.width)"
  "sweep|sweep: a window preloaded one cell on|        value_[base + k + 1] = first[across + (lo + k) * step_];|        value_[base + k + 1] = first[across + (lo + k + 1) * step_];"
  "sweep|sweep: a window moved on twice a cell|    at_ += step_;
  }|    at_ += 2 * step_;
  }"
)

status=0
for entry in "${mutations[@]}"; do
  target=${entry%%|*}
  entry=${entry#*|}
  name=${entry%%|*}
  [[ -z "${ONLY:-}" || "$name" =~ $ONLY ]] || continue
  rest=${entry#*|}
  find=${rest%%|*}
  replace=${rest#*|}
  restore
  file=${!target}
  python3 - "$file" "$find" "$replace" <<'PY'
import sys
path, find, replace = sys.argv[1:]
text = open(path).read()
if text.count(find) != 1:
    sys.exit(f"mutation target found {text.count(find)} times: {find!r}")
open(path, "w").write(text.replace(find, replace))
PY
  if ! cmake --build "$build" --target tapeflow_emulated_gpu_tests >/dev/null; then
    printf '%-45s does not build\n' "$name"
    status=1
    continue
  fi
  log=$(mktemp)
  rc=0
  "$build/tests/tapeflow_emulated_gpu_tests" --gtest_brief=1 >"$log" 2>&1 || rc=$?
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sed -E 's/^\[  FAILED  \] ([^ ,]+).*/\1/' | sort -u >"$log.names" || true
  failed=$(wc -l <"$log.names")
  names=$(head -3 "$log.names" | tr '\n' ' ')
  if [ "$failed" -eq 0 ] && [ "$rc" -ne 0 ]; then
    failed=all
    names="(the test binary died, exit status $rc)"
  fi
  printf '%-45s %3s failing: %s\n' "$name" "$failed" "$names"
  [ "$failed" != 0 ] || status=1
  rm -f "$log" "$log.names"
done
restore
cmake --build "$build" --target tapeflow_emulated_gpu_tests >/dev/null
exit $status
