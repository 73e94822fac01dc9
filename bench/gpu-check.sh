#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU validation in one command, on a machine with an NVIDIA GPU (docs/gpu-validation.md).
# The build is made elsewhere, where GoogleTest is (preset gpu-sm90: gtest and cudart static,
# cuBLAS the toolkit's shared library), and carried here; nothing is compiled on the GPU machine.
#
#   bench/gpu-check.sh [STAGE ...]        default: env tests sanitize cli quick bench peers
#   bench/gpu-check.sh env tests+sanitize+cli quick     `a+b` runs correctness stages at once
#
#   env       the device, driver, toolkit and tools
#   tests     every CTest test of the carried build: the GPU tests run for real, the host and CLI
#             tests with a GPU present (the CLI's `auto` backend picks it)
#   sanitize  compute-sanitizer memcheck (with leak check) and initcheck over every GPU test and
#             the host suite's CUDA cases (host tier, determinism, injected faults, Enzyme slots);
#             racecheck and synccheck over the tile pipelines, the tiers (the chains' policies and
#             streams, the host tier), the thread tape and every workload's kernels (RACE_FILTER,
#             HOST_RACE_FILTER); eight processes at once (four tools, two binaries)
#   mpi       the distributed tests on the GPU, ranks sharing it (a build with TAPEFLOW_MPI against
#             PyPI's MPICH in .mpich, carried with it; docs/distributed.md): 1 to 4 ranks, then two
#             ranks under memcheck (with leak check), initcheck, racecheck and synccheck; one rank
#             through NCCL where the build has tapeflow::nccl
#   enzyme    the Enzyme example's Enzyme-generated cubins (a build with TAPEFLOW_ENZYME) through chains
#             under every policy (tapeflow_enzyme_gpu_tests), then under each compute-sanitizer tool
#             (memcheck with leak check: Enzyme's caches in the pool, none left on the device heap)
#   hip       the HIP source path built for HIP's NVIDIA platform (HIP_BUILD_DIR, build/hip-nvidia):
#             its GPU tests, then memcheck over them
#   cli       the README's main job on the GPU, its gradient compared with the CPU backend's; the
#             packed LSTM on the GPU against torch.nn.LSTM (tests/torch/lstm_packed.py); where an
#             sm_80-only CLI was carried (SM80_CLI, build/cli-sm80/tapeflow), --bulk-copy through it
#             must plan cp.async (its compute_80 code has no bulk pipeline) and match the CPU
#   profile   Nsight Compute counters and stall reasons of the kernels behind missed targets
#   quick     bench/run.sh --quick: the whole benchmark pipeline (driver, peers, render) at tiny sizes
#   bench     tapeflow_bench at the brief's sizes into bench/results/<date>-<device>.json
#   peers     the PyTorch / JAX peers at full size, appended to that file; renders docs/results.*
#
# Environment: BUILD_DIR (build/gpu-sm90), SM80_CLI (build/cli-sm80/tapeflow), LOG_DIR (gpu-check),
# COMMIT (the tree's commit where it
# has no .git), SANITIZE_TIMEOUT (s per tool, 420), BENCH_TIMEOUT (s, 330), PEER_TIMEOUT (s per
# peer script, 150), BENCH_ARGS (extra tapeflow_bench options), PEER_ARGS (extra run.py options),
# RACE_FILTER, HOST_FILTER, HOST_RACE_FILTER (gtest filters of the GPU and the host test binaries).
# Each stage's log is LOG_DIR/<stage>*.log; LOG_DIR/summary.txt has one line per stage. The exit
# status is 0 only when every stage that ran passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

build=${BUILD_DIR:-build/gpu-sm90}
logs=${LOG_DIR:-gpu-check}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$logs"
summary="$logs/summary.txt"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(env tests sanitize cli quick bench peers)
failed=0

note() { printf '%s\n' "$*" | tee -a "$summary"; }
elapsed() { printf '%ds' $((SECONDS - $1)); }

# cuBLAS is linked as the toolkit's shared library: find it on this machine (the toolkit, or the
# nvidia-cublas wheel beside PyTorch) when the loader does not.
# The same for NCCL (a build with tapeflow::nccl), whose library the nvidia-nccl wheel brings.
find_library_dir() {  # LIBRARY PYTHON_MODULE
  ldconfig -p 2>/dev/null | grep -q "$1\\.so\\." && return
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c "import $2, os; print(os.path.join($2.__path__[0], 'lib'))" 2>/dev/null); do
    if compgen -G "$dir/$1.so.*" >/dev/null; then
      export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      return
    fi
  done
}
find_library_dir libcublas nvidia.cublas
find_library_dir libnccl nvidia.nccl

# CTest files hold the absolute paths of the machine that configured the build: make that source
# path lead here when it does not exist on this machine.
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [ -n "$source_dir" ] && [ ! -e "$source_dir" ]; then
  mkdir -p "$(dirname "$source_dir")" && ln -s "$PWD" "$source_dir"
fi

# Tests that are CMake scripts (the CLI under mpiexec) name the build machine's cmake: link it to
# this machine's when that path does not exist.
cmake_path=$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [ -n "$cmake_path" ] && [ ! -e "$cmake_path" ] && command -v cmake >/dev/null; then
  mkdir -p "$(dirname "$cmake_path")" && ln -s "$(command -v cmake)" "$cmake_path"
fi

gpu_tests="$build/tests/tapeflow_gpu_tests"
host_tests="$build/tests/tapeflow_tests"
race_filter=${RACE_FILTER:-'*TilePipeline*:*HaloWindows*:*HaloChain*:*TapeBound*:AllenCahn.*:*Lbm*:*Rk4*:*ThreadTape*:GpuChains.*:StencilSegments.*'}
# The host suite's cases on the CUDA backend: instantiations named .../cuda or .../cuda_<site>.
host_filter=${HOST_FILTER:-'*/cuda:*/cuda_*'}
host_race_filter=${HOST_RACE_FILTER:-'Backends/HostTier.*/cuda:SitesAndPolicies/InjectedFaults.*/cuda_offload_*'}

stage_env() {
  {
    date -u
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
      --format=csv
    nvcc --version | tail -2
    compute-sanitizer --version | tail -1
    python3 -c 'import torch, jax; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version()); print("jax", jax.__version__, jax.devices())'
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    ldd "$gpu_tests" | grep -E 'cublas|cudart|gtest|stdc'
    "$build/tapeflow" info
  } >"$logs/env.log" 2>&1
}

stage_tests() {
  # Host tests and GPU tests, with the GPU present. Six at a time: this machine has cores to spare.
  # Left out: the Python checks of the benchmark pipeline (their interpreter path is the build
  # machine's; they run in CI, and the quick stage runs the pipeline itself here), the tests that run
  # the build machine's compiler and CMake (label compiler; CI runs them) and the emulated device's
  # tests (CPU work, run in CI; device time is for the device); the Enzyme route's tests (its host
  # tests and PTX checks run in CI; its GPU tests are the enzyme stage).
  ctest --test-dir "$build" --output-on-failure -j6 --timeout 600 --label-exclude "python|compiler|emulated|enzyme" \
    --output-junit "$PWD/$logs/tests.xml" >"$logs/tests.log" 2>&1
  local rc=$?
  grep -E 'tests passed|tests failed|Total Test time' "$logs/tests.log" | tee -a "$summary"
  # GoogleTest marks a skipped GPU test as passed in CTest's count: none may be skipped here,
  # except the cases the tests themselves say need another device.
  "$gpu_tests" --gtest_brief=1 >"$logs/tests-gpu-direct.log" 2>&1 || rc=1
  grep -E '^\[  (PASSED|SKIPPED|FAILED)' "$logs/tests-gpu-direct.log" | tee -a "$summary"
  return $rc
}

sanitize_one() {  # tool, log name, binary, gtest filter, extra options...
  local tool=$1 name=$2 binary=$3 filter=$4
  shift 4
  timeout --signal=INT --kill-after=20 "${SANITIZE_TIMEOUT:-420}" \
    compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit "${PRINT_LIMIT:-100}" "$@" \
    "$binary" --gtest_filter="$filter" --gtest_brief=0 >"$logs/sanitize-$name.log" 2>&1
  local rc=$?
  local errors
  errors=$(grep -E '^========= (ERROR|RACECHECK) SUMMARY' "$logs/sanitize-$name.log" | tail -1)
  local tests
  tests=$(grep -cE '^\[       OK \]' "$logs/sanitize-$name.log")
  local skipped
  skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$logs/sanitize-$name.log")
  note "  $name: exit $rc, ${errors:-no summary (stopped?)}, $tests tests passed under it, $skipped skipped"
  # Errors by the test that was running (the first ten tests with any).
  awk '/^\[ RUN/ {test = $4} /^========= +(Uninitialized|Invalid|Race|Barrier|Leaked|Program hit)/ {n[test]++}
       END {for (t in n) print "    " n[t] " in " t}' "$logs/sanitize-$name.log" | sort -rn | head -10 | tee -a "$summary"
  # A filter that matches nothing sanitizes nothing: that is a failure, not a pass.
  [ "$tests" -gt 0 ] || rc=1
  return $rc
}

stage_sanitize() {
  # Eight processes at once: four tools, each over the GPU tests and over the host suite's CUDA
  # cases (the machine has cores to spare, and the GPU memory for all of them).
  local pids=() rc=0
  sanitize_one memcheck memcheck "$gpu_tests" '*' --leak-check full & pids+=($!)
  sanitize_one memcheck memcheck-host "$host_tests" "$host_filter" --leak-check full & pids+=($!)
  # initcheck is the slowest tool: the GPU tests in three shards (GoogleTest's sharding), each
  # error without its backtrace so that every one is printed, counted by test.
  local shard
  for shard in 0 1 2; do
    GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$shard PRINT_LIMIT=20000 \
      sanitize_one initcheck "initcheck-$shard" "$gpu_tests" '*' --show-backtrace no & pids+=($!)
  done
  PRINT_LIMIT=20000 sanitize_one initcheck initcheck-host "$host_tests" "$host_filter" --show-backtrace no & pids+=($!)
  sanitize_one racecheck racecheck "$gpu_tests" "$race_filter" --racecheck-report hazard & pids+=($!)
  sanitize_one racecheck racecheck-host "$host_tests" "$host_race_filter" --racecheck-report hazard & pids+=($!)
  sanitize_one synccheck synccheck "$gpu_tests" "$race_filter" & pids+=($!)
  sanitize_one synccheck synccheck-host "$host_tests" "$host_race_filter" & pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return $rc
}

stage_mpi() {
  local gpu_mpi=$build/tests/tapeflow_gpu_mpi_tests nccl_tests=$build/tests/tapeflow_nccl_tests
  local mpiexec=${MPIEXEC:-.mpich/bin/mpiexec} rc=0 ranks tool
  if [ ! -x "$gpu_mpi" ] || [ ! -x "$mpiexec" ]; then
    note "  needs $gpu_mpi and $mpiexec: build with -DTAPEFLOW_MPI=ON -DMPI_HOME=\$PWD/.mpich (docs/distributed.md)"
    return 1
  fi
  for ranks in 1 2 3 4; do
    "$mpiexec" -n "$ranks" "$gpu_mpi" --gtest_brief=1 >"$logs/mpi-ranks-$ranks.log" 2>&1 || rc=1
    # Every rank prints its own summary: a rank passed when it printed one and no test of it failed.
    note "  $ranks rank(s) on one GPU: $(grep -cE '^\[==========\] .* ran\.' "$logs/mpi-ranks-$ranks.log") of $ranks" \
      "finished, failed: $(grep -E '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$logs/mpi-ranks-$ranks.log" | sed 's/ (.*//' |
      sort | uniq -c | tr -s ' \n' ' ')none else," \
      "$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$logs/mpi-ranks-$ranks.log") tests skipped"
  done
  for tool in memcheck initcheck racecheck synccheck; do
    local extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    timeout --signal=INT --kill-after=20 "${SANITIZE_TIMEOUT:-420}" "$mpiexec" -n 2 \
      compute-sanitizer --tool "$tool" --error-exitcode 99 "${extra[@]}" "$gpu_mpi" --gtest_brief=1 \
      >"$logs/mpi-sanitize-$tool.log" 2>&1 || rc=1
    note "  2 ranks under $tool: $(grep -E '^========= (ERROR|RACECHECK) SUMMARY' "$logs/mpi-sanitize-$tool.log" | sort | uniq -c | tr -s ' \n' ' ')" \
      "failed tests: $(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$logs/mpi-sanitize-$tool.log")"
  done
  if [ -x "$nccl_tests" ]; then
    "$mpiexec" -n 1 "$nccl_tests" >"$logs/mpi-nccl.log" 2>&1 || rc=1
    note "  NCCL, one rank: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$logs/mpi-nccl.log" | tr -s ' \n' ' ')"
  fi
  return $rc
}

stage_enzyme() {
  local tests=$build/tests/enzyme/tapeflow_enzyme_gpu_tests rc=0 tool
  if [ ! -x "$tests" ]; then
    note "  needs $tests: configure with -DTAPEFLOW_ENZYME=ON (.ci/install-enzyme.sh; docs/enzyme.md)"
    return 1
  fi
  "$tests" --gtest_brief=0 >"$logs/enzyme.log" 2>&1 || rc=1
  grep -E '^\[  (PASSED|SKIPPED|FAILED)|hand-written' "$logs/enzyme.log" | tee -a "$summary"
  for tool in memcheck initcheck racecheck synccheck; do
    local extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
    sanitize_one "$tool" "enzyme-$tool" "$tests" '*' "${extra[@]}" || rc=1
  done
  return $rc
}

stage_hip() {
  local hip_build=${HIP_BUILD_DIR:-build/hip-nvidia} rc=0
  local tests=$hip_build/tests/tapeflow_gpu_tests
  if [ ! -x "$tests" ]; then
    note "  needs $tests: the HIP source path built for HIP's NVIDIA platform (docs/gpu-validation.md)"
    return 1
  fi
  "$tests" --gtest_brief=1 >"$logs/hip.log" 2>&1 || rc=1
  grep -E '^\[  (PASSED|SKIPPED|FAILED)' "$logs/hip.log" | tee -a "$summary"
  sanitize_one memcheck hip-memcheck "$tests" '*' --leak-check full || rc=1
  return $rc
}

cli_job() {  # work folder. Every command's failure fails the stage: `set -e` has no effect in a
            # function that runs as an `if` condition, as every stage does (run_stage).
  local work=$1 tapeflow=$build/tapeflow
  "$tapeflow" init allen-cahn --n 512 --out "$work/u0.bin" || return 1
  "$tapeflow" run allen-cahn --n 512 --steps 100 --input "$work/u0.bin" --grad-out "$work/gpu.bin" \
    --json "$logs/cli-gpu.json" || return 1
  "$tapeflow" run allen-cahn --n 512 --steps 100 --input "$work/u0.bin" --grad-out "$work/cpu.bin" \
    --backend cpu || return 1
  for policy in offload recompute auto; do
    "$tapeflow" run allen-cahn --n 512 --steps 100 --input "$work/u0.bin" --grad-out "$work/$policy.bin" \
      --policy "$policy" --budget 25M || return 1
  done
  # A binary of sm_80 code only runs on this GPU as compute_80 PTX the driver compiles for it
  # (binaryVersion 90, ptxVersion 80): asked for bulk copies, it must plan cp.async, not trap.
  local sm80=${SM80_CLI:-build/cli-sm80/tapeflow}
  if [ -x "$sm80" ]; then
    "$sm80" run allen-cahn --n 512 --steps 100 --input "$work/u0.bin" --grad-out "$work/sm80.bin" \
      --bulk-copy >"$work/sm80.log" || { cat "$work/sm80.log"; return 1; }
    grep -E 'each layer:' "$work/sm80.log"
    if grep -q 'bulk-copy pipeline' "$work/sm80.log" || ! grep -q 'cp.async pipeline' "$work/sm80.log"; then
      echo "sm_80 binary with --bulk-copy: not planned as cp.async"; return 1
    fi
    echo "sm_80 binary with --bulk-copy: planned cp.async"
  else
    echo "no sm_80 CLI at $sm80 (tools/pack-gpu-build.sh builds one): its --bulk-copy check skipped"
  fi
  python3 - "$work" <<'PY' || return 1
import array, math, sys
w = sys.argv[1]
def load(name):
    a = array.array("f")
    with open(f"{w}/{name}.bin", "rb") as f:
        a.frombytes(f.read())
    return a
gpu, cpu = load("gpu"), load("cpu")
assert len(gpu) == len(cpu) == 512 * 512 and all(math.isfinite(x) for x in gpu)
err = math.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(gpu, cpu)) / sum(float(y) ** 2 for y in cpu))
print(f"GPU vs CPU backend gradient: relative error {err:.3e}")
assert err < 1e-4, err
for policy in ("offload", "recompute", "auto"):
    same = load(policy) == gpu
    print(f"{policy} --budget 25M: {'same bits as store' if same else 'DIFFERENT bits from store'}")
    assert same
import os
if os.path.exists(f"{w}/sm80.bin"):  # compute_80 code, compiled apart: the CPU's gradient, not the bits
    sm80 = load("sm80")
    err = math.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(sm80, cpu)) / sum(float(y) ** 2 for y in cpu))
    print(f"sm_80 binary vs CPU backend gradient: relative error {err:.3e}"
          f" ({'the same bits as' if sm80 == gpu else 'other bits than'} the sm_90 build's)")
    assert len(sm80) == len(cpu) and err < 1e-4, err
PY
  # The packed LSTM on the GPU against torch.nn.LSTM on a PackedSequence, in float64.
  python3 tests/torch/lstm_packed.py "$tapeflow" --backend cuda || return 1
}

stage_cli() {
  local work rc=0
  work=$(mktemp -d)
  cli_job "$work" >"$logs/cli.log" 2>&1 || rc=1
  rm -rf "$work"
  grep -E '^tapeflow run|relative error|bits|^lstm_packed|sm_80' "$logs/cli.log" |
    sed -n '1p;/error/p;/bits/p;/^lstm_packed/p;/sm_80/p' | tee -a "$summary"
  return $rc
}

profile_one() {  # name, timeout (s), kernel regex, launch count, tapeflow_bench arguments...
  local name=$1 limit=$2 kernels=$3 count=$4
  shift 4
  timeout "$limit" ncu "${ncu_args[@]}" --kernel-name regex:"$kernels" --launch-count "$count" \
    "$build/tapeflow_bench" "$@" --warmup 0 --repeats 1 --out "/tmp/profile-$name.json" \
    >"$logs/profile-$name.log" 2>&1
}

stage_profile() {
  # Nsight Compute on the kernels whose targets the benchmarks missed: speed of light, memory
  # workload, warp stall reasons. Allen–Cahn at the brief's grid for two steps (primal, augmented
  # forward and reverse, cp.async then register double-buffering); RK4's arena and global-stack
  # reverses; LBM's three kernels for two steps; GMM's kernels at ADBench's largest size; the
  # LSTM's cell kernels and cuBLAS GEMMs over five steps; the stencil library's segment and one-step
  # kernels (Allen–Cahn at 8 steps, Burgers at 4). PROFILE (default: all six) picks some.
  local ncu_args=(--clock-control none --kernel-name-base demangled --section SpeedOfLight
                  --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats
                  --section InstructionStats --section SourceCounters)
  local rc=0 which=" ${PROFILE:-allen-cahn rk4 lbm gmm lstm segments} "
  [[ $which == *" allen-cahn "* ]] && { profile_one allen-cahn 150 'primal_kernel|augmented_forward_kernel|reverse_kernel' 10 \
    --suite allen_cahn --set allen-cahn.steps=2 || rc=1; }
  [[ $which == *" rk4 "* ]] && { profile_one rk4 100 'chunk_reverse_kernel|stack_reverse_kernel' 3 --suite rk4 || rc=1; }
  [[ $which == *" lbm "* ]] && { profile_one lbm 100 'primal_kernel|augmented_forward_kernel|reverse_kernel' 6 \
    --suite lbm --set lbm.steps=2 || rc=1; }
  [[ $which == *" gmm "* ]] && { profile_one gmm 120 'kernel' 30 \
    --suite gmm --set gmm.d=128 --set gmm.k=200 --set gmm.n=10000 || rc=1; }
  [[ $which == *" lstm "* ]] && { profile_one lstm 120 'cells_kernel|gemm|xmma' 24 \
    --suite lstm --set lstm.T=5 || rc=1; }
  # The stencil library's tile program (issue 24): Allen–Cahn's segment kernels at 8192², 8 steps
  # (the suite's one-step rows run first, unprofiled), and Burgers' one-step library kernels.
  [[ $which == *" segments "* ]] && { profile_one segments 200 'stencil::detail::(advance|reverse)_kernel' 6 \
    --suite allen_cahn --set allen-cahn.steps=8 || rc=1; }
  [[ $which == *" segments "* ]] && { profile_one segments-burgers 120 'stencil::detail::advance_kernel' 2 \
    --suite burgers --set burgers.steps=4 || rc=1; }
  grep -E '^  [a-z_:<>]+.*\(|Duration|DRAM Throughput|Memory Throughput' "$logs"/profile-*.log | head -120 >>"$summary"
  return $rc
}

stage_quick() {
  BUILD_DIR="$build" COMMIT="$commit" PEER_TIMEOUT=120 timeout 300 bench/run.sh --quick >"$logs/quick.log" 2>&1
}

stage_bench() {
  local results
  timeout --signal=INT --kill-after=20 "${BENCH_TIMEOUT:-330}" \
    "$build/tapeflow_bench" --commit "$commit" --out "$logs/bench-raw.json" ${BENCH_ARGS:-} >"$logs/bench.log" 2>&1
  local rc=$?
  grep -E '^== .*: [0-9.]+ s$|failed' "$logs/bench.log" | tee -a "$summary"
  [ -s "$logs/bench-raw.json" ] || return 1
  mkdir -p bench/results
  results=$(python3 - "$logs/bench-raw.json" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
slug = re.sub(r"[^a-z0-9]+", "-", r["device"].lower()).strip("-")
print(f"bench/results/{r['date']}-{slug}.json")
PY
)
  cp "$logs/bench-raw.json" "$results"
  echo "$results" >"$logs/results-path"
  note "  results: $results"
  return $rc
}

stage_peers() {
  local results
  results=$(cat "$logs/results-path" 2>/dev/null) || { note "  peers: no results file from the bench stage"; return 1; }
  python3 bench/peers/run.py --results "$results" --timeout "${PEER_TIMEOUT:-150}" ${PEER_ARGS:-} >"$logs/peers.log" 2>&1
  local rc=$?
  grep -E '^peer .*(failed|stopped)|appended' "$logs/peers.log" | tee -a "$summary"
  python3 bench/render.py "$results" --require-png >>"$logs/peers.log" 2>&1 || rc=1
  return $rc
}

run_stage() {  # name: runs stage_<name>, notes PASS/FAIL and its time
  local start=$SECONDS
  if "stage_$1"; then
    note "PASS $1 ($(elapsed "$start"))"
  else
    note "FAIL $1 ($(elapsed "$start")): see $logs/$1*.log"
    return 1
  fi
}

note "gpu-check at commit $commit, $(date -u +%FT%TZ), stages: ${stages[*]}"
for group in "${stages[@]}"; do
  # `a+b` runs stages a and b at the same time (correctness stages only: never a timed one).
  IFS=+ read -r -a parts <<<"$group"
  for stage in "${parts[@]}"; do
    declare -F "stage_$stage" >/dev/null || { note "unknown stage '$stage'"; exit 2; }
  done
  if [ ${#parts[@]} -eq 1 ]; then
    run_stage "${parts[0]}" || failed=1
  else
    pids=()
    for stage in "${parts[@]}"; do run_stage "$stage" & pids+=($!); done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  fi
done
exit $failed
