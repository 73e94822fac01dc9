#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole benchmark pipeline in one command, on a GPU machine:
#   1. builds tapeflow_bench for the GPU here (preset bench-sm90: CUDA sm_90, no GoogleTest needed)
#      unless BUILD_DIR names a build that has it;
#   2. runs every suite (warm-up, event-timed medians, same-run D2D copy) into
#      bench/results/<date>-<device>.json;
#   3. runs the PyTorch and JAX peers (bench/peers) and appends their rows to that file;
#   4. renders docs/results.md and docs/results.png from it.
#
#   bench/run.sh [--quick] [extra tapeflow_bench options, e.g. --suite tape_bound,allen_cahn]
#   BUILD_DIR=build/gpu-sm90 PYTHON=python3 bench/run.sh
#   COMMIT=<sha> names the commit where the tree has no .git (a copy carried to a GPU machine);
#   PEER_TIMEOUT=<seconds> stops a peer script that runs longer (counted as failed).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
if [ "${1:-}" = "--quick" ]; then
  quick=(--quick)
  shift
fi
build=${BUILD_DIR:-build/bench-sm90}
python=${PYTHON:-python3}
export PATH="$PATH:/usr/local/cuda/bin"

if [ ! -x "$build/tapeflow_bench" ]; then
  cmake --preset bench-sm90
  cmake --build "$build" --target tapeflow_bench
fi

mkdir -p bench/results
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
bench_rc=0
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
"$build/tapeflow_bench" "${quick[@]}" --commit "$commit" \
  --out "$raw" "$@" || bench_rc=$?
[ -s "$raw" ] || { echo "run.sh: tapeflow_bench wrote no results (exit $bench_rc)" >&2; exit 1; }

# bench/results/<date>-<device slug>.json, named from what the driver measured.
results=$("$python" - "$raw" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
slug = re.sub(r"[^a-z0-9]+", "-", r["device"].lower()).strip("-")
print(f"bench/results/{r['date']}-{slug}{'-quick' if r.get('quick') else ''}.json")
PY
)
cp "$raw" "$results"

peer_rc=0
"$python" bench/peers/run.py --results "$results" "${quick[@]}" ${PEER_TIMEOUT:+--timeout "$PEER_TIMEOUT"} || peer_rc=$?
"$python" bench/render.py "$results" --require-png
echo "results: $results (tapeflow_bench exit $bench_rc, peers exit $peer_rc)"
[ "$bench_rc" -eq 0 ] && [ "$peer_rc" -eq 0 ]
