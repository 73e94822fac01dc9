// SPDX-License-Identifier: Apache-2.0
// What the stencil tests compare the library with: each stencil's definition applied cell by cell
// over the whole grid (a naive reference written from the definition), its gradient, random
// states and the comparisons. Shared by the segment tests (segment_tests.hpp) and the
// distributed tests (tests/distributed/).
#pragma once

#include "stencils.hpp"

#include <tapeflow/chain_options.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stencil/stencil.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tapeflow::testing {
namespace {

namespace st = tapeflow::stencil;

// ---- the reference: the stencil's definition, cell by cell over the whole grid --------------------

struct tap_offsets {
  std::vector<int> dx, dy, dz, field;
};
template <class... Taps>
tap_offsets offsets_of(st::taps<Taps...>)
{
  tap_offsets o;
  o.dx = std::vector<int>{Taps::dx...};
  o.dy = std::vector<int>{Taps::dy...};
  o.dz = std::vector<int>{Taps::dz...};
  o.field = std::vector<int>{Taps::field...};
  return o;
}

template <class T>
struct grid_values {
  st::grid<T> g;
  int fields;
  [[nodiscard]] bool inside(std::int64_t x, std::int64_t y, std::int64_t z) const
  {
    return x >= 0 && y >= 0 && z >= 0 && x < std::int64_t(g.nx) && y < std::int64_t(g.ny) && z < std::int64_t(g.nz);
  }
  static std::int64_t wrap(std::int64_t v, std::size_t n)
  {
    std::int64_t const m = std::int64_t(n);
    return ((v % m) + m) % m;
  }
  /// The value of field f at (x, y, z): wrapped, or `outside` past a fixed grid's edge.
  T at(std::vector<T> const& v, int f, std::int64_t x, std::int64_t y, std::int64_t z, T outside) const
  {
    if (g.edge == st::boundary::periodic) {
      x = wrap(x, g.nx);
      y = wrap(y, g.ny);
      z = wrap(z, g.nz);
    } else if (!inside(x, y, z)) {
      return outside;
    }
    return v[std::size_t(f) * g.cells() + (std::size_t(z) * g.ny + std::size_t(y)) * g.nx + std::size_t(x)];
  }
  template <class F>
  void each_cell(F&& f) const
  {
    for (std::size_t z = 0; z < g.nz; ++z) {
      for (std::size_t y = 0; y < g.ny; ++y) {
        for (std::size_t x = 0; x < g.nx; ++x) { f(std::int64_t(x), std::int64_t(y), std::int64_t(z)); }
      }
    }
  }
  std::size_t index(int f, std::int64_t x, std::int64_t y, std::int64_t z) const
  {
    return std::size_t(f) * g.cells() + (std::size_t(z) * g.ny + std::size_t(y)) * g.nx + std::size_t(x);
  }
};

template <class S, class T = typename S::value_type>
std::vector<T> reference_step(S const& s, st::grid<T> const& g, std::vector<T> const& u)
{
  grid_values<T> const v{g, S::fields};
  tap_offsets const o = offsets_of(typename S::forward_taps{});
  std::vector<T> out(u.size());
  v.each_cell([&](std::int64_t x, std::int64_t y, std::int64_t z) {
    T taps[S::forward_taps::size];
    T next[S::fields];
    for (std::size_t t = 0; t < o.dx.size(); ++t) { taps[t] = v.at(u, o.field[t], x + o.dx[t], y + o.dy[t], z + o.dz[t], g.ghost); }
    s.forward(taps, next);
    for (int f = 0; f < S::fields; ++f) { out[v.index(f, x, y, z)] = next[f]; }
  });
  return out;
}

/// λ_t from u_t and λ_{t+1} by the definition: the gather form as given, the scatter form summed
/// over the taps in order from the cells that read this one.
template <class S, class T = typename S::value_type>
std::vector<T> reference_adjoint(S const& s, st::grid<T> const& g, std::vector<T> const& u, std::vector<T> const& next)
{
  grid_values<T> const v{g, S::fields};
  tap_offsets const o = offsets_of(typename S::forward_taps{});
  std::vector<T> out(u.size());
  v.each_cell([&](std::int64_t x, std::int64_t y, std::int64_t z) {
    T lambda[S::fields];
    if constexpr (st::is_gather_v<S>) {
      tap_offsets const a = offsets_of(typename S::adjoint_taps{});
      T taps[S::forward_taps::size];
      T gv[S::adjoint_taps::size];
      for (std::size_t t = 0; t < o.dx.size(); ++t) { taps[t] = v.at(u, o.field[t], x + o.dx[t], y + o.dy[t], z + o.dz[t], g.ghost); }
      for (std::size_t t = 0; t < a.dx.size(); ++t) { gv[t] = v.at(next, a.field[t], x + a.dx[t], y + a.dy[t], z + a.dz[t], T(0)); }
      s.adjoint(taps, gv, lambda);
    } else {
      for (int f = 0; f < S::fields; ++f) { lambda[f] = T(0); }
      for (std::size_t t = 0; t < o.dx.size(); ++t) {
        std::int64_t const yx = x - o.dx[t];
        std::int64_t const yy = y - o.dy[t];
        std::int64_t const yz = z - o.dz[t];
        if (g.edge == st::boundary::fixed && !v.inside(yx, yy, yz)) { continue; }
        T taps[S::forward_taps::size];
        T gv[S::fields];
        T contributions[S::forward_taps::size];
        for (std::size_t q = 0; q < o.dx.size(); ++q) {
          taps[q] = v.at(u, o.field[q], yx + o.dx[q], yy + o.dy[q], yz + o.dz[q], g.ghost);
        }
        for (int f = 0; f < S::fields; ++f) { gv[f] = v.at(next, f, yx, yy, yz, T(0)); }
        s.reverse(taps, gv, contributions);
        lambda[o.field[t]] += contributions[t];
      }
    }
    for (int f = 0; f < S::fields; ++f) { out[v.index(f, x, y, z)] = lambda[f]; }
  });
  return out;
}

template <class T>
struct gradient_of {
  std::vector<T> final_state;
  std::vector<T> gradient;  ///< dL/du_0 for L = 0.5 sum(u_T^2)
  chain_stats stats{};
};

template <class S, class T = typename S::value_type>
gradient_of<T> reference_gradient(S const& s, st::grid<T> const& g, std::size_t steps, std::vector<T> const& u0)
{
  std::vector<std::vector<T>> states{u0};
  for (std::size_t t = 0; t < steps; ++t) { states.push_back(reference_step(s, g, states.back())); }
  gradient_of<T> r;
  r.final_state = states.back();
  std::vector<T> lambda = states.back();
  for (std::size_t t = steps; t-- > 0;) { lambda = reference_adjoint(s, g, states[t], lambda); }
  r.gradient = lambda;
  return r;
}

/// Where the reference and the kernels are compiled by the same compiler (the CPU backend, the
/// emulated device) they agree bit for bit; a GPU compiler may contract into FMAs differently.
constexpr bool reference_bits_hold =
#if defined(TAPEFLOW_TEST_ON_GPU) && !defined(TAPEFLOW_EMULATED)
  false;
#else
  true;
#endif

/// Small tiles of odd sizes, so that the tests' small grids hold many tiles, some cut by the edge,
/// and the halos of long segments reach past the neighbouring tiles (and, periodic, around). In
/// 3-D a segment's levels grow as the cube of the halo: tiny tiles keep them in 48 KiB.
constexpr st::tile_extent test_tile(int dims)
{
  return dims == 1 ? st::tile_extent{7, 1, 1} : dims == 2 ? st::tile_extent{7, 5, 1} : st::tile_extent{3, 2, 2};
}

/// Runs `c` (a chain of any stencil Step on `kind`) from `u0` to L = 0.5 sum(u_T^2): the final
/// state, dL/du_0 (seeded with u_T) and the chain's stats.
template <class Chain, class T>
gradient_of<T> run_half_squares(Chain& c, backend kind, std::vector<T> const& u0)
{
  std::size_t const bytes = u0.size() * sizeof(T);
  device_buffer state(kind, bytes, {});
  state.upload(u0.data(), bytes, {});
  c.forward(state);
  device_buffer adjoint(kind, bytes, {});
  adjoint.copy_from(state, {});  // dL/du_T = u_T
  c.reverse(adjoint);
  gradient_of<T> r;
  r.final_state.resize(u0.size());
  r.gradient.resize(u0.size());
  state.download(r.final_state.data(), bytes, {});
  adjoint.download(r.gradient.data(), bytes, {});
  r.stats = c.stats();
  return r;
}

template <class T>
std::vector<T> random_state(std::size_t values, unsigned seed, double lo, double hi)
{
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(values);
  for (T& x : v) { x = T(d(rng)); }
  return v;
}

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Largest |a - b| relative to the largest |b|.
template <class T>
double relative_difference(std::vector<T> const& a, std::vector<T> const& b)
{
  double diff = 0;
  double scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / (scale > 0 ? scale : 1);
}

}  // namespace
}  // namespace tapeflow::testing
