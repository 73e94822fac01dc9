// SPDX-License-Identifier: Apache-2.0
// GMM's description (kernels/common/describe.hpp): its CLI, benchmark suite and typed tests.
#pragma once

#include "gmm.hpp"

#include <tapeflow/workloads/common/describe.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <type_traits>
#include <vector>

namespace tapeflow::workloads::gmm {

struct description {
  static constexpr workload_text text{
    "gmm", "ADBench's Gaussian mixture objective (f64) and its gradient w.r.t. alphas, means, icf",
    "Computes ADBench's GMM objective of N points in d dimensions under K components (Wishart\n"
    "prior gamma, m) and its gradient with respect to the alphas, the means and the\n"
    "inverse-covariance factors, through one tape layer of per-(point, component) records.",
    "  IN.bin   f64: alphas (K), means (K*d, row-major), icf (K*d(d+1)/2: per component the d\n"
    "           log-diagonal entries, then the strict lower triangle column by column), x (N*d)\n"
    "  G.bin    f64: d alphas (K), d means (K*d), d icf (K*d(d+1)/2), laid out as the parameters"};
  static constexpr precision precisions = precision::f64_only;
  static constexpr tape_kind tape = tape_kind::layer;
  using problem = gmm::problem;
  using options = gmm::options;
  static constexpr auto fields = std::make_tuple(
    count("d", &problem::d, "D", "dimensions", "d", flag_use::shape_required, 1, 4096),
    count("k", &problem::k, "K", "components", "K", flag_use::shape_required, 1, 1U << 20),
    count("points", &problem::n, "N", "points", "N", flag_use::shape_required, 1, std::size_t{1} << 32),
    real("gamma", &problem::gamma, "G", "Wishart prior gamma, above 0 (default 1)", "gamma"),
    count("m", &problem::m, "M", "Wishart prior m (default 0)", "m", flag_use::optional, 0, 1U << 20));

  static void validate(problem const& p) { gmm::validate(p); }
  static std::string size_key(problem const& p, std::string const&)
  {
    return "d" + std::to_string(p.d) + " K" + std::to_string(p.k) + " N" + std::to_string(p.n);
  }
  static std::vector<array_spec> inputs(problem const& p)
  {
    return {{"alphas", p.k}, {"means", p.k * p.d}, {"icf", p.k * icf_size(p.d)}, {"x", p.n * p.d}};
  }
  static std::vector<array_spec> gradients(problem const& p)
  {
    return {{"d alphas", p.k}, {"d means", p.k * p.d}, {"d icf", p.k * icf_size(p.d)}};
  }
  template <class T>
  static std::vector<std::vector<T>> random_inputs(problem const& p, std::uint64_t seed)
  {
    static_assert(std::is_same_v<T, double>, "GMM runs in f64");
    gmm::inputs in = gmm::random_inputs(p, seed);
    return {std::move(in.alphas), std::move(in.means), std::move(in.icf), std::move(in.x)};
  }
  template <class T>
  static std::unique_ptr<session<T>> open(problem const& p, options const& o)
  {
    static_assert(std::is_same_v<T, double>, "GMM runs in f64");
    return gmm::open(p, o);
  }
  template <class T>
  static tape_report plan(problem const& p, options const& o)
  {
    tape_report r;
    r.layer = gmm::plan(p, o);
    r.tape_bytes = r.layer->records * r.layer->record_bytes;
    return r;
  }
  static std::vector<bench_suite<description>> bench_suites()
  {
    return {{"gmm", 50, "GMM (ADBench, f64) d2..d128, K5..K200, N1k..10k: objective vs objective + gradient",
             [](bench_sizes const& s, std::string const&) {
               std::vector<problem> sizes{{2, 5, 1000}, {10, 25, 10000}, {20, 50, 10000}, {64, 100, 10000},
                                          {128, 200, 10000}};
               if (s.overrides({"gmm.d", "gmm.k", "gmm.n"})) {
                 sizes = {{s.size("gmm.d", 2, 2), s.size("gmm.k", 5, 5), s.size("gmm.n", 1000, 1000)}};
               } else if (s.quick()) {
                 sizes = {{2, 5, 1000}, {10, 25, 1000}};
               }
               std::vector<bench_case<description>> cases;
               for (problem const& p : sizes) { cases.push_back({"tapeflow", p}); }
               return cases;
             }}};
  }
  static problem test_problem() { return {3, 4, 37}; }
};

}  // namespace tapeflow::workloads::gmm
