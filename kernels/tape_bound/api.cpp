// SPDX-License-Identifier: Apache-2.0
#include "backends.hpp"
#include "tape_bound.hpp"

#include <tapeflow/error.hpp>
#include <tapeflow/workloads/common/session.hpp>

#include <string>

namespace tapeflow::workloads::tape_bound {

std::string_view to_string(variant v) noexcept
{
  switch (v) {
    case variant::naive_soa: return "naive-soa";
    case variant::aos_direct: return "aos-direct";
    case variant::staged: return "staged-cp.async";
    case variant::register_db: return "staged-register-db";
    case variant::bulk: return "staged-bulk";
    case variant::recompute: return "recompute-only";
  }
  return "unknown";
}

bool supported(variant v, backend kind)
{
  static_cast<void>(v);  // only GPU builds tell variants apart
  if (!backend_available(kind)) { return false; }
  switch (kind) {
    case backend::cpu: return true;
#if defined(TAPEFLOW_HAS_CUDA)
    case backend::cuda: return v != variant::bulk || detail::bulk_kernels_runnable();
#elif defined(TAPEFLOW_HAS_HIP)
    case backend::hip: return v != variant::bulk && v != variant::staged;
#endif
    default: return false;
  }
}

namespace {
void check(std::vector<float> const& u, std::vector<float> const& g_out, variant v, backend kind)
{
  TAPEFLOW_EXPECTS(!u.empty(), "the tape-bound problem needs at least one region");
  TAPEFLOW_EXPECTS(g_out.size() == u.size(), "g_out holds " + std::to_string(g_out.size()) + " values, u holds " +
                                               std::to_string(u.size()));
  if (!supported(v, kind)) {
    TAPEFLOW_FAIL(unavailable_error, "the " + std::string{to_string(v)} + " reverse does not run on " +
                                       std::string{tapeflow::to_string(kind)} + " in this build or on this device");
  }
}
}  // namespace

std::vector<float> gradient(std::vector<float> const& u, std::vector<float> const& g_out, variant v, backend kind,
                            pipeline_request pipeline)
{
  check(u, g_out, v, kind);
  return on_backend(
    kind, "the tape-bound microbenchmark", [&] { return detail::gradient_cpu(u, g_out, v, pipeline); },
    [&](auto) { return detail::gradient_gpu(u, g_out, v, pipeline); });
}

sweep_timing benchmark(std::vector<float> const& u, std::vector<float> const& g_out, variant v, backend kind,
                       int warmup, int repeats, pipeline_request pipeline)
{
  check(u, g_out, v, kind);
  TAPEFLOW_EXPECTS(repeats >= 1 && warmup >= 0, "a benchmark needs repeats >= 1 and warmup >= 0");
  auto no_cpu = []() -> sweep_timing {
    TAPEFLOW_FAIL(unavailable_error, "the tape-bound benchmark times GPU kernels; the CPU backend has none");
  };
  return on_backend(kind, "the tape-bound microbenchmark", no_cpu,
                    [&](auto) { return detail::benchmark_gpu(u, g_out, v, warmup, repeats, pipeline); });
}

}  // namespace tapeflow::workloads::tape_bound
