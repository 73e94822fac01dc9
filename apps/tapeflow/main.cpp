// SPDX-License-Identifier: Apache-2.0
// The tapeflow command-line tool: an application above the library (tapeflow::workloads).
//
//   tapeflow info
//   tapeflow init  <workload> [shape] --out IN.bin [--dtype f32|f64] [--seed S]
//   tapeflow run   <workload> [problem] --input IN.bin --grad-out G.bin [options] [--json STATS.json]
//   tapeflow plan  <workload> [problem] [options]
//   tapeflow bench <workload> [problem] [options] [--warmup W] [--repeats R] [--json ROW.json]
//
// Workloads: allen-cahn, lbm, gmm, lstm, rk4, burgers (common.cpp lists them; each has its own
// file). Every command of every workload takes the same common flags and reports bad usage or
// input the same way. Exit status: 0 on success, 2 on bad usage or input (a message says what),
// 1 on a runtime failure. Under an MPI launcher (a build with TAPEFLOW_MPI), `run allen-cahn`
// cuts the grid over the ranks (docs/distributed.md); rank 0 prints and writes the files.
#include <tapeflow/workloads/common/args.hpp>
#include "common.hpp"
#include "ranks.hpp"

#include <tapeflow/backend.hpp>
#include <tapeflow/config.hpp>
#include <tapeflow/error.hpp>

#include <cstdio>
#include <new>
#include <string>
#include <vector>

namespace tapeflow::cli {
namespace {

std::string workload_names()
{
  std::string names;
  for (workload const* w : all_workloads()) { names += (names.empty() ? "" : ", ") + w->name; }
  return names;
}

std::string usage_text()
{
  std::string text =
    "usage: tapeflow <command> [<workload>] [options]\n\n"
    "commands:\n"
    "  info                   backends compiled into this build and the devices present\n"
    "  init <workload>        write random inputs of the workload (the file `run` reads)\n"
    "  run <workload>         the workload's gradient through the tape: inputs in, gradient out\n"
    "  plan <workload>        how the tape would be laid out and where it would live, without running\n"
    "  bench <workload>       primal and gradient times (medians of timed runs after a warm-up)\n\n"
    "workloads:\n";
  for (workload const* w : all_workloads()) {
    std::string name = "  " + w->name;
    name.resize(25, ' ');
    text += name + w->summary + "\n";
  }
  return text + "\n'tapeflow <command> <workload> --help' describes a command's options and files.\n";
}

bool wants_help(std::vector<std::string> const& args)
{
  for (auto const& a : args) {
    if (a == "--help" || a == "-h") { return true; }
  }
  return false;
}

int command_info()
{
  std::printf("tapeflow %d.%d.%d\n", TAPEFLOW_VERSION_MAJOR, TAPEFLOW_VERSION_MINOR, TAPEFLOW_VERSION_PATCH);
  std::printf("backends:\n");
  for (backend kind : {backend::cpu, backend::cuda, backend::hip}) {
    std::string state = backend_available(kind)    ? "available"
                        : backend_compiled(kind) ? "compiled; " + backend_unavailable_reason(kind)
                                                 : "not compiled into this build";
    std::printf("  %-5s %s\n", std::string{to_string(kind)}.c_str(), state.c_str());
  }
  std::printf("devices:\n");
  for (device_limits const& d : list_devices()) {
    std::printf("  %s:%d  %s\n", std::string{to_string(d.kind)}.c_str(), d.ordinal, d.name.c_str());
    std::printf("         %d %s, %s staging per block, %s memory", d.multiprocessors,
                d.kind == backend::cpu ? "threads" : "multiprocessors", human_bytes(d.shared_mem_per_block).c_str(),
                human_bytes(d.global_mem_bytes).c_str());
    if (d.kind == backend::cuda) { std::printf(", sm_%d", d.compute_capability); }
    if (d.kind != backend::cpu) { std::printf(", %s", d.async_copy ? "async copy" : "no async copy"); }
    std::printf("\n");
  }
  return 0;
}

/// `tapeflow <cmd> <workload> ...`.
int command_workload(command cmd, std::vector<std::string> const& args)
{
  if (args.empty() || args[0].rfind("--", 0) == 0 || args[0] == "-h") {
    if (wants_help(args)) {
      std::printf("usage: tapeflow %s <workload> [options]\n\nworkloads: %s\n'tapeflow %s <workload> --help' lists its "
                  "options and files.\n",
                  to_string(cmd), workload_names().c_str(), to_string(cmd));
      return 0;
    }
    throw usage_error("'" + std::string{to_string(cmd)} + "' needs a workload: " + workload_names());
  }
  workload const* w = nullptr;
  for (workload const* candidate : all_workloads()) {
    if (candidate->name == args[0]) { w = candidate; }
  }
  if (w == nullptr) { throw usage_error("unknown workload '" + args[0] + "' (known: " + workload_names() + ")"); }
  std::vector<std::string> const rest(args.begin() + 1, args.end());
  if (wants_help(rest)) {
    std::fputs(help_for(*w, cmd).c_str(), stdout);
    return 0;
  }
  parsed_args const parsed = parse_for(*w, cmd, rest);
  switch (cmd) {
    case command::init: return w->init(parsed);
    case command::run: return w->run(parsed);
    case command::plan: return w->plan(parsed);
    case command::bench: return w->bench(parsed);
  }
  return 1;
}

int dispatch(std::vector<std::string> const& args)
{
  if (args.empty()) {
    std::fputs(usage_text().c_str(), stderr);
    return 2;
  }
  std::string const& name = args[0];
  std::vector<std::string> const rest(args.begin() + 1, args.end());
  if (name == "--help" || name == "-h" || name == "help") {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("tapeflow %d.%d.%d\n", TAPEFLOW_VERSION_MAJOR, TAPEFLOW_VERSION_MINOR, TAPEFLOW_VERSION_PATCH);
    return 0;
  }
  if (name == "info") {
    if (wants_help(rest)) {
      std::printf("usage: tapeflow info\n\nLists the backends compiled into this build, whether each has a device, and\n"
                  "every device's limits as the planner sees them.\n");
      return 0;
    }
    if (!rest.empty()) { throw usage_error("'info' takes no options"); }
    return command_info();
  }
  for (command cmd : {command::init, command::run, command::plan, command::bench}) {
    if (name == to_string(cmd)) { return command_workload(cmd, rest); }
  }
  throw usage_error("unknown command '" + name + "' (commands: info, init, run, plan, bench)");
}

}  // namespace
}  // namespace tapeflow::cli

int main(int argc, char** argv)
{
  using namespace tapeflow;
  cli::mpi_scope const mpi(argc, argv);  // under mpirun: the ranks a decomposed run is cut over
  std::vector<std::string> const args(argv + 1, argv + argc);
  // What the command printed first, then "tapeflow: <what>" on standard error; the exit status.
  auto const fail = [&mpi](char const* prefix, std::exception const& e, char const* suffix, int status) {
    return mpi.end(status, std::string{"tapeflow: "} + prefix + e.what() + "\n" + suffix);
  };
  try {
    int const status = cli::dispatch(args);
    return mpi.end(status, "");
  } catch (cli::stopped_by_another_rank const& e) {  // that rank says why
    return mpi.end(e.status(), "");
  } catch (cli::usage_error const& e) {
    return fail("", e, "(see 'tapeflow --help')\n", 2);
  } catch (logic_error const& e) {  // bad input reached the library
    return fail("", e, "", 2);
  } catch (io_error const& e) {
    return fail("", e, "", 2);
  } catch (unavailable_error const& e) {
    return fail("not available: ", e, "", 2);
  } catch (budget_error const& e) {
    return fail("", e, "", 2);
  } catch (distributed_error const& e) {  // another rank failed: it says why
    return fail("", e, "", 2);
  } catch (out_of_memory const& e) {  // a problem larger than this machine: input it cannot take
    return fail("out of memory: ", e, "('tapeflow plan' shows the tape; a smaller problem, or --budget, may fit)\n", 2);
  } catch (std::bad_alloc const& e) {
    return mpi.end(2, std::string{"tapeflow: out of host memory: the problem's buffers or plan do not fit this "
                                  "machine ("} + e.what() + ")\n");
  } catch (std::exception const& e) {
    return fail("failed: ", e, "", 1);
  }
}
