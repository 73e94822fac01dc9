// SPDX-License-Identifier: Apache-2.0
// A stencil, as tapeflow's segment steps take it (docs/stencils.md): a state of `fields` values per
// cell on a 1-, 2- or 3-D grid, advanced one time step by a per-cell function of the values at a
// fixed set of taps, and that function's adjoint. The per-cell math is the user's, written once as
// host+device functions; the library owns the loops, the tiles, the halos and the segments.
//
//   struct heat {
//     using value_type = float;
//     static constexpr int dims = 2;                      // 1, 2 or 3
//     static constexpr int fields = 1;                    // values per cell
//     using forward_taps = stencil::taps<stencil::tap<0, 0>, stencil::tap<-1, 0>, stencil::tap<1, 0>,
//                                        stencil::tap<0, -1>, stencil::tap<0, 1>>;
//     // u' of one cell: u holds the values at forward_taps (in their order), out one per field
//     TAPEFLOW_HOST_DEVICE void forward(float const* u, float* out) const;
//
//     // the adjoint, in gather form: λ of one cell from u at forward_taps and the next step's λ
//     // at adjoint_taps (fields * ... values: g[t] is λ'(field of tap t) at tap t)
//     using adjoint_taps = stencil::taps<...>;
//     TAPEFLOW_HOST_DEVICE void adjoint(float const* u, float const* g, float* lambda) const;
//
//     // or in scatter form (the reverse of `forward`, as Enzyme makes it): from u at forward_taps
//     // and the cell's own λ' (one per field), each tap's share of the adjoint (one per tap)
//     TAPEFLOW_HOST_DEVICE void reverse(float const* u, float const* g, float* contributions) const;
//   };
//
// The state is field-major and x fastest: value (f, x, y, z) is state[f * cells + (z * ny + y) * nx
// + x]. A tap reads field `Field` at the cell offset by (DX, DY, DZ); DY and DZ must be 0 where the
// grid has fewer dimensions. A scatter-form adjoint is applied as a gather, offset by offset in tap
// order, so that the gradient is the same bits on every backend and in every run.
//
// A stencil whose step depends on where and when it is applied, or on per-cell coefficients with
// a gradient of their own (the wave equation's squared slowness, a source injected at one cell, a
// misfit at receivers at every step), takes a site as the last argument of each function:
//
//   static constexpr int coefficients = 1;  // per-cell coefficients (0 when absent)
//   void forward(T const* u, T* out, stencil::site<T> const& at) const;      // at.coefficients: the cell's own
//   void adjoint(T const* u, T const* g, T* lambda, stencil::site<T> const& at) const;
//                                           // at.coefficients: those of each adjoint tap's cell, tap by tap
//   // (or reverse(u, g, contributions, at), at.coefficients: the cell's own)
//   // with coefficients: this step's dL/dc of the cell's own coefficients (one per coefficient),
//   // from u at forward_taps and the cell's own λ' (one per field); the library adds it to the
//   // parameter adjoint, last step first, as a one-step chain does
//   void parameter_adjoint(T const* u, T const* g, T* dc, stencil::site<T> const& at) const;
//   // optional: sees the cell's values of u_t (one per field) once for every t of a forward
//   void observe(T const* u, stencil::site<T> const& at) const;
//
// The forward reads a cell's own coefficients only, so a coefficient's adjoint is local to its cell.
// A level's cells run at once (a GPU block's threads; on the CPU, a row's cells in vector lanes), so
// whatever a call writes beyond its outputs (observe()'s record) is its own cell's: no sum over
// cells, no value another cell's call reads. `at.interior` says every tap of the call lies inside
// the grid (an inner tile's cells): a stencil that tests its neighbours against a fixed grid's edge
// may skip the tests there, which lets a CPU's compiler run those cells in vector lanes
// (tapeflow::select, <tapeflow/select.hpp>, for a test that stays).
// Coefficients are laid out as the state; outside a fixed grid they read 0 (a stencil that divides
// by one skips the taps outside: `at` says where the cell is).
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tapeflow::stencil {

namespace detail {
[[nodiscard]] constexpr int farthest(int dx, int dy, int dz) noexcept
{
  int const x = dx < 0 ? -dx : dx;
  int const y = dy < 0 ? -dy : dy;
  int const z = dz < 0 ? -dz : dz;
  int const xy = x > y ? x : y;
  return xy > z ? xy : z;
}
}  // namespace detail

/// One value a stencil reads for a cell: field `Field` at the cell offset by (DX, DY, DZ).
template <int DX, int DY = 0, int DZ = 0, int Field = 0>
struct tap {
  static constexpr int dx = DX;
  static constexpr int dy = DY;
  static constexpr int dz = DZ;
  static constexpr int field = Field;
  /// The farthest the tap reaches along any axis.
  static constexpr int reach = detail::farthest(DX, DY, DZ);
};

/// The taps of a per-cell function, in the order it receives their values.
template <class... Taps>
struct taps {
  static constexpr int size = sizeof...(Taps);
  /// The farthest any tap reaches (the stencil's radius).
  static constexpr int radius = [] {
    int r = 0;
    ((r = Taps::reach > r ? Taps::reach : r), ...);
    return r;
  }();
  template <int I>
  using at = std::tuple_element_t<I, std::tuple<Taps...>>;
};

namespace detail {
template <class F, class List, int... I>
TAPEFLOW_HOST_DEVICE inline void each_tap(F& f, std::integer_sequence<int, I...>)
{
  (f(typename List::template at<I>{}, std::integral_constant<int, I>{}), ...);
}
}  // namespace detail

/// Calls f(tap{}, std::integral_constant<int, i>{}) for each tap of `List`, in order, unrolled.
template <class List, class F>
TAPEFLOW_HOST_DEVICE inline void for_each_tap(F&& f)
{
  detail::each_tap<F, List>(f, std::make_integer_sequence<int, List::size>{});
}

/// What lies beyond the grid's edges.
enum class boundary {
  periodic,  ///< the grid wraps around along every axis
  fixed,     ///< every cell outside holds `ghost` at every step; its adjoint is dropped
};

[[nodiscard]] constexpr char const* to_string(boundary b) noexcept
{
  return b == boundary::periodic ? "periodic" : "fixed";
}

/// The grid a stencil runs on: extents along x (fastest), y and z (1 where the stencil has fewer
/// dimensions), and its boundary.
template <class T>
struct grid {
  std::size_t nx{1};
  std::size_t ny{1};
  std::size_t nz{1};
  boundary edge{boundary::periodic};
  T ghost{};  ///< the value of every cell outside a fixed grid

  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t cells() const noexcept { return nx * ny * nz; }
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t extent(int axis) const noexcept
  {
    return axis == 0 ? nx : axis == 1 ? ny : nz;
  }
};

/// Where and when a per-cell function is applied, for a stencil whose functions take it.
template <class T>
struct site {
  std::size_t step{0};  ///< t: the step applied is u_t -> u_{t+1} (observe(): the state is u_t)
  std::int64_t x{0};    ///< the cell's coordinates in the whole grid
  std::int64_t y{0};
  std::int64_t z{0};
  /// The coefficients the function reads (see the top of this file); null without coefficients.
  T const* coefficients{nullptr};
  /// Every tap the function reads lies inside the grid, as the library knows it of an inner tile's
  /// cells (false where it does not know): a stencil that tests its neighbours against a fixed
  /// grid's edges may skip the tests, which lets a CPU's compiler run a row of such cells in vector
  /// lanes (and an inner tile's kernels drop them on a GPU).
  bool interior{false};
};

// ---- the contract, checked once -------------------------------------------------------------------

namespace detail {
/// Whether Op<Args...> is a valid type (std::experimental::is_detected).
template <class Void, template <class...> class Op, class... Args>
struct detected : std::false_type {};
template <template <class...> class Op, class... Args>
struct detected<std::void_t<Op<Args...>>, Op, Args...> : std::true_type {};
template <template <class...> class Op, class... Args>
inline constexpr bool detected_v = detected<void, Op, Args...>::value;

// What each part of the contract is, as a type that exists only where S has it. A = the
// arguments after the stencil.
template <class S>
using value_of = typename S::value_type;
template <class S>
using site_of = site<value_of<S>> const&;
template <class S>
using coefficients_member = decltype(S::coefficients);
template <class S>
using forward_taps_member = typename S::forward_taps;
template <class S>
using adjoint_taps_member = typename S::adjoint_taps;
template <class S, class... A>
using forward_call = decltype(std::declval<S const&>().forward(std::declval<value_of<S> const*>(),
                                                               std::declval<value_of<S>*>(), std::declval<A>()...));
template <class S, class... A>
using adjoint_call =
  decltype(std::declval<S const&>().adjoint(std::declval<value_of<S> const*>(), std::declval<value_of<S> const*>(),
                                            std::declval<value_of<S>*>(), std::declval<A>()...));
template <class S, class... A>
using reverse_call =
  decltype(std::declval<S const&>().reverse(std::declval<value_of<S> const*>(), std::declval<value_of<S> const*>(),
                                            std::declval<value_of<S>*>(), std::declval<A>()...));
template <class S>
using parameter_adjoint_call = decltype(std::declval<S const&>().parameter_adjoint(
  std::declval<value_of<S> const*>(), std::declval<value_of<S> const*>(), std::declval<value_of<S>*>(),
  std::declval<site_of<S>>()));
template <class S>
using observe_call =
  decltype(std::declval<S const&>().observe(std::declval<value_of<S> const*>(), std::declval<site_of<S>>()));

template <class S, bool = detected_v<coefficients_member, S>>
struct coefficient_count : std::integral_constant<int, 0> {};
template <class S>
struct coefficient_count<S, true> : std::integral_constant<int, S::coefficients> {};

template <class S>
inline constexpr bool takes_site = detected_v<forward_call, S, site_of<S>>;

/// Whether S's adjoint `Call` exists, with a site last where S's forward takes one.
template <template <class...> class Call, class S>
inline constexpr bool has_adjoint_form =
  takes_site<S> ? detected_v<Call, S, site_of<S>> : detected_v<Call, S>;

template <class S>
inline constexpr bool has_gather = detected_v<adjoint_taps_member, S> && has_adjoint_form<adjoint_call, S>;
template <class S>
inline constexpr bool has_scatter = has_adjoint_form<reverse_call, S>;
template <class S>
inline constexpr bool has_forward = detected_v<forward_taps_member, S> && (detected_v<forward_call, S> || takes_site<S>);
template <class S>
inline constexpr bool has_parameter_adjoint = detected_v<parameter_adjoint_call, S>;
template <class S>
inline constexpr bool has_observe = detected_v<observe_call, S>;

template <int Dims, class List>
struct taps_fit;
template <int Dims, class... Ts>
struct taps_fit<Dims, taps<Ts...>> {
  template <class S>
  static constexpr bool fields_ok = ((Ts::field >= 0 && Ts::field < S::fields) && ...);
  static constexpr bool axes_ok = ((Dims >= 2 || Ts::dy == 0) && ...) && ((Dims >= 3 || Ts::dz == 0) && ...);
};
}  // namespace detail

/// True when S's adjoint is given in gather form (adjoint_taps and adjoint()), which is used where
/// both forms are given; false when only the scatter form (reverse()) is.
template <class S>
inline constexpr bool is_gather_v = detail::has_gather<S>;

/// Per-cell coefficients of S: S::coefficients where declared, else 0.
template <class S>
inline constexpr int coefficients_v = detail::coefficient_count<S>::value;

/// True when S's functions take a site (stencil::site) as their last argument.
template <class S>
inline constexpr bool takes_site_v = detail::takes_site<S>;

/// True when S observes every state of a forward (observe()).
template <class S>
inline constexpr bool observes_v = detail::has_observe<S>;

/// Checks the contract at the top of this file, one message per mistake.
template <class S>
struct check_stencil {
  static_assert(std::is_floating_point_v<typename S::value_type>, "tapeflow::stencil: value_type must be float or double");
  static_assert(S::dims >= 1 && S::dims <= 3, "tapeflow::stencil: dims must be 1, 2 or 3");
  static_assert(S::fields >= 1, "tapeflow::stencil: fields (values per cell) must be at least 1");
  static_assert(detail::has_forward<S>,
                "tapeflow::stencil: the stencil needs `using forward_taps = stencil::taps<...>;` and "
                "`void forward(value_type const* u, value_type* out) const`");
  static_assert(detail::has_gather<S> || detail::has_scatter<S>,
                "tapeflow::stencil: the stencil needs an adjoint: `using adjoint_taps = ...;` with `void adjoint("
                "value_type const* u, value_type const* g, value_type* lambda) const` (gather form), or `void "
                "reverse(value_type const* u, value_type const* g, value_type* contributions) const` (scatter form), "
                "each with a last argument `stencil::site<value_type> const&` where forward() takes one");
  static_assert(coefficients_v<S> >= 0, "tapeflow::stencil: coefficients (per cell) cannot be negative");
  static_assert(coefficients_v<S> == 0 || takes_site_v<S>,
                "tapeflow::stencil: a stencil with coefficients reads them from its site: forward(u, out, "
                "stencil::site<value_type> const& at)");
  static_assert(coefficients_v<S> == 0 || detail::has_parameter_adjoint<S>,
                "tapeflow::stencil: a stencil with coefficients needs `void parameter_adjoint(value_type const* u, "
                "value_type const* g, value_type* dc, stencil::site<value_type> const& at) const`");
  static_assert(!detail::has_observe<S> || takes_site_v<S>,
                "tapeflow::stencil: observe(u, at) is for a stencil whose functions take a site");
  static_assert(std::is_trivially_copyable_v<S>, "tapeflow::stencil: a stencil is copied to the device: it must be "
                                                 "trivially copyable (its coefficients as plain members)");
  static_assert(detail::taps_fit<S::dims, typename S::forward_taps>::template fields_ok<S> &&
                  detail::taps_fit<S::dims, typename S::forward_taps>::axes_ok,
                "tapeflow::stencil: a forward tap names a field past `fields` or an axis past `dims`");
  static constexpr bool ok = true;
};

/// How far one time step and its adjoint reach: what a segment's halos are made of.
struct reach {
  int forward{0};  ///< u_{t+1} at a cell needs u_t this far away
  int lambda{0};   ///< λ_t at a cell needs λ_{t+1} this far away
  int state{0};    ///< λ_t at a cell needs u_t this far away

  template <class S>
  [[nodiscard]] static constexpr reach of() noexcept
  {
    static_assert(check_stencil<S>::ok);
    int const r = S::forward_taps::radius;
    if constexpr (is_gather_v<S>) {
      return {r, S::adjoint_taps::radius, r};
    } else {
      return {r, r, 2 * r};  // λ_t(x) gathers reverse() of the cells x - offset, which read u around them
    }
  }
};

// ---- the shape of one segment of k steps on one tile ----------------------------------------------

/// A tile of the grid: its extents along each axis (1 past the stencil's dimensions).
struct tile_extent {
  int x{1};
  int y{1};
  int z{1};
};

/// Tiles of extent `t` covering an nx x ny x nz grid (the last along each axis cut by the edge).
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t tiles_covering(std::size_t nx, std::size_t ny, std::size_t nz,
                                                                        tile_extent t) noexcept
{
  return ((nx + t.x - 1) / t.x) * ((ny + t.y - 1) / t.y) * ((nz + t.z - 1) / t.z);
}

/// Cells of a box of `t` grown by `halo` along each of the first `dims` axes (and by `pad` more
/// cells along x).
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr std::size_t box_cells(tile_extent t, int dims, int halo,
                                                                   int pad = 0) noexcept
{
  std::size_t const bx = static_cast<std::size_t>(t.x + 2 * halo + pad);
  std::size_t const by = dims >= 2 ? static_cast<std::size_t>(t.y + 2 * halo) : 1;
  std::size_t const bz = dims >= 3 ? static_cast<std::size_t>(t.z + 2 * halo) : 1;
  return bx * by * bz;
}

/// The halos of a segment of `k` steps on one tile. The reverse of the segment computes λ_i on the
/// tile grown by i·lambda (i = k-1 .. 0) from λ_{i+1} and u_i; u_i is recomputed from the segment's
/// checkpoint u_0 on the tile grown by state_halo(i), wide enough for every later level it feeds.
struct segment_shape {
  int k{1};
  reach r{};

  /// Halo of the recomputed u_i (0 <= i < k) in the reverse.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr int state_halo(int i) const noexcept
  {
    return (k - 1) * r.lambda + r.state + (k - 1 - i) * r.forward;
  }
  /// Halo of λ_i (0 <= i <= k) in the reverse.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr int lambda_halo(int i) const noexcept { return i * r.lambda; }
  /// Halo of u_i (0 <= i <= k) in the forward of a segment.
  [[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr int forward_halo(int i) const noexcept { return (k - i) * r.forward; }
};

/// The farthest a segment's tiles read beyond their own cells: the reverse's halo of the
/// checkpoint or of λ, or the forward's halo, whichever is widest (a slab's ghost planes).
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr int deepest_halo(segment_shape s) noexcept
{
  int const a = s.state_halo(0);
  int const b = s.lambda_halo(s.k);
  int const c = s.forward_halo(0);
  int const ab = a > b ? a : b;
  return ab > c ? ab : c;
}

/// Cells a box of values `bytes` bytes wide, the tile `t` grown by `halo`, may gain when it is
/// loaded as whole 16-byte copies: widened along x to 16-byte boundaries on both sides
/// (tile_program::loaded_box, on grids whose rows are whole copies). 0 where its copies cannot be
/// 16 bytes wide: values that do not divide 16, or a tile width that is not a multiple of a copy,
/// so that its tiles do not all start on a boundary. (Not the grid's: the ranks of a distributed
/// run plan their parts alike.)
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr int copy_pad(std::size_t bytes, tile_extent t, int halo) noexcept
{
  if (bytes >= 16 || 16 % bytes != 0) { return 0; }
  auto const wide = static_cast<int>(16 / bytes);
  if (t.x % wide != 0) { return 0; }
  return 2 * ((wide - halo % wide) % wide);  // as many on each side: the tile starts on a boundary
}
/// The cells the reverse's loaded boxes of a segment may gain (copy_pad): u_0's (the checkpoint's)
/// and λ_k's. Zero: boxes loaded as they are.
struct box_pads {
  int state{0};
  int lambda{0};
};
/// Values (of every field) a tile's reverse of a k-step segment holds at once: the k levels of u
/// and two of λ (u_0 and λ_k as loaded: `pad`). The forward holds two levels of u.
[[nodiscard]] constexpr std::size_t reverse_scratch_values(segment_shape s, tile_extent t, int dims, int fields,
                                                           box_pads pad = {}) noexcept
{
  std::size_t v = 0;
  for (int i = 0; i < s.k; ++i) { v += box_cells(t, dims, s.state_halo(i), i == 0 ? pad.state : 0); }
  return (v + 2 * box_cells(t, dims, s.lambda_halo(s.k), pad.lambda)) * static_cast<std::size_t>(fields);
}
[[nodiscard]] constexpr std::size_t forward_scratch_values(segment_shape s, tile_extent t, int dims, int fields) noexcept
{
  return 2 * box_cells(t, dims, s.forward_halo(0)) * static_cast<std::size_t>(fields);
}
/// The pads of a segment's loaded boxes of values of type T.
template <class T>
[[nodiscard]] TAPEFLOW_HOST_DEVICE constexpr box_pads copy_pads(segment_shape s, tile_extent t) noexcept
{
  return {copy_pad(sizeof(T), t, s.state_halo(0)), copy_pad(sizeof(T), t, s.lambda_halo(s.k))};
}

}  // namespace tapeflow::stencil
