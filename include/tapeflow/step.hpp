// SPDX-License-Identifier: Apache-2.0
// The Step contract of tapeflow::chain, checked once, up front: a Step that misses a member or
// declares one with the wrong signature stops the compilation with one message per member,
// naming the member and the signature the chain calls — not with errors from inside the chain.
//
// A Step provides:
//   using value_type  = ...;   // element of the state
//   using record_type = ...;   // tape record (tapeflow::is_record_v)
//   std::size_t state_size() const;          // values in the state
//   std::size_t records_per_step() const;    // records one step writes, or, for layers of
//   std::size_t records_per_step(std::size_t step) const;  // different sizes, records step `step` writes
//   void forward(std::size_t step, value_type const* in, value_type* out, stream_view s) const;
//   void augmented_forward(std::size_t step, value_type const* in, value_type* out,
//                          tape_writer<record_type> tape, stream_view s) const;
//   void reverse(std::size_t step, tape_reader<record_type> tape, pipeline_plan const& plan,
//                value_type const* adjoint_out, value_type* adjoint_in, stream_view s) const;
// and, for a stencil whose reverse reads its neighbours' records (tapeflow/halo.hpp):
//   std::size_t halo_records() const;        // records read on each side of a tile
// and, for a device step whose reverse can run the sm_90 bulk-copy pipeline
// (tapeflow/device/launch.cuh, device::bulk_copy_runs):
//   bool bulk_copy_runs() const;             // the code loaded for its bulk reverse kernel is sm_90
// and, for a step with parameters θ (weights, a coefficient) whose gradient dL/dθ is wanted:
//   std::size_t parameter_size() const;      // values in θ
//   void reverse(std::size_t step, tape_reader<record_type> tape, pipeline_plan const& plan,
//                value_type const* adjoint_out, value_type* adjoint_in,
//                value_type* parameter_adjoint, stream_view s) const;
// in place of the reverse above: it adds this step's dL/dθ to `parameter_adjoint` (+=), which
// the chain zeroes before each reverse and reads back as chain::parameter_adjoint().
#pragma once

#include <tapeflow/device/views.hpp>
#include <tapeflow/plan.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/stream.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tapeflow::detail::step_contract {

template <class S, class = void>
struct has_value_type : std::false_type {};
template <class S>
struct has_value_type<S, std::void_t<typename S::value_type>> : std::true_type {};

template <class S, class = void>
struct has_record_type : std::false_type {};
template <class S>
struct has_record_type<S, std::void_t<typename S::record_type>> : std::true_type {};

template <class S, class = void>
struct has_state_size : std::false_type {};
template <class S>
struct has_state_size<S, std::enable_if_t<std::is_convertible_v<decltype(std::declval<S const&>().state_size()),
                                                                  std::size_t>>> : std::true_type {};

template <class S, class = void>
struct has_records_per_step : std::false_type {};
template <class S>
struct has_records_per_step<
  S, std::enable_if_t<std::is_convertible_v<decltype(std::declval<S const&>().records_per_step()), std::size_t>>>
  : std::true_type {};

template <class S, class = void>
struct has_records_per_step_of : std::false_type {};
template <class S>
struct has_records_per_step_of<S, std::enable_if_t<std::is_convertible_v<
                                    decltype(std::declval<S const&>().records_per_step(std::size_t{})), std::size_t>>>
  : std::true_type {};

template <class S, class = void>
struct has_forward : std::false_type {};
template <class S>
struct has_forward<S, std::void_t<decltype(std::declval<S const&>().forward(
                        std::size_t{}, std::declval<typename S::value_type const*>(),
                        std::declval<typename S::value_type*>(), std::declval<stream_view>()))>> : std::true_type {};

template <class S, class = void>
struct has_augmented_forward : std::false_type {};
template <class S>
struct has_augmented_forward<S, std::void_t<decltype(std::declval<S const&>().augmented_forward(
                                  std::size_t{}, std::declval<typename S::value_type const*>(),
                                  std::declval<typename S::value_type*>(),
                                  std::declval<tape_writer<typename S::record_type>>(), std::declval<stream_view>()))>>
  : std::true_type {};

template <class S, class = void>
struct has_reverse : std::false_type {};
template <class S>
struct has_reverse<S, std::void_t<decltype(std::declval<S const&>().reverse(
                        std::size_t{}, std::declval<tape_reader<typename S::record_type>>(),
                        std::declval<pipeline_plan const&>(), std::declval<typename S::value_type const*>(),
                        std::declval<typename S::value_type*>(), std::declval<stream_view>()))>> : std::true_type {};

template <class S, class = void>
struct has_parameter_reverse : std::false_type {};
template <class S>
struct has_parameter_reverse<
  S, std::void_t<decltype(std::declval<S const&>().reverse(
       std::size_t{}, std::declval<tape_reader<typename S::record_type>>(), std::declval<pipeline_plan const&>(),
       std::declval<typename S::value_type const*>(), std::declval<typename S::value_type*>(),
       std::declval<typename S::value_type*>(), std::declval<stream_view>()))>> : std::true_type {};

/// parameter_size is optional: declared (under that name) makes the Step one with parameters.
template <class S, class = void>
struct declares_parameters : std::false_type {};
template <class S>
struct declares_parameters<S, std::void_t<decltype(&S::parameter_size)>> : std::true_type {};

template <class S, class = void>
struct has_parameter_size : std::false_type {};
template <class S>
struct has_parameter_size<S, std::enable_if_t<std::is_convertible_v<
                               decltype(std::declval<S const&>().parameter_size()), std::size_t>>> : std::true_type {};

/// halo_records is optional: declared (under that name) is enough to be checked.
template <class S, class = void>
struct declares_halo : std::false_type {};
template <class S>
struct declares_halo<S, std::void_t<decltype(&S::halo_records)>> : std::true_type {};

template <class S, class = void>
struct has_halo : std::false_type {};
template <class S>
struct has_halo<S, std::enable_if_t<std::is_convertible_v<decltype(std::declval<S const&>().halo_records()),
                                                           std::size_t>>> : std::true_type {};

/// bulk_copy_runs is optional too.
template <class S, class = void>
struct declares_bulk_check : std::false_type {};
template <class S>
struct declares_bulk_check<S, std::void_t<decltype(&S::bulk_copy_runs)>> : std::true_type {};

template <class S, class = void>
struct has_bulk_check : std::false_type {};
template <class S>
struct has_bulk_check<S, std::enable_if_t<std::is_same_v<decltype(std::declval<S const&>().bulk_copy_runs()), bool>>>
  : std::true_type {};

template <class S, bool = has_record_type<S>::value>
struct record_is_valid : std::false_type {};
template <class S>
struct record_is_valid<S, true> : std::bool_constant<is_record_v<typename S::record_type>> {};

template <class S>
inline constexpr bool types_ok = has_value_type<S>::value && has_record_type<S>::value;

/// Each member on its own, so that one mistake gives one message. A signature is only checked
/// once the types it is written in exist.
template <class S>
struct check {
  static constexpr bool value_type = has_value_type<S>::value;
  static constexpr bool record_type = has_record_type<S>::value;
  static constexpr bool record = !has_record_type<S>::value || record_is_valid<S>::value;
  static constexpr bool state_size = has_state_size<S>::value;
  static constexpr bool records_per_step = has_records_per_step<S>::value || has_records_per_step_of<S>::value;
  static constexpr bool forward = !types_ok<S> || has_forward<S>::value;
  static constexpr bool augmented_forward = !types_ok<S> || has_augmented_forward<S>::value;
  static constexpr bool reverse = !types_ok<S> || declares_parameters<S>::value || has_reverse<S>::value;
  static constexpr bool halo = !declares_halo<S>::value || has_halo<S>::value;
  static constexpr bool bulk_check = !declares_bulk_check<S>::value || has_bulk_check<S>::value;
  static constexpr bool parameter_size = !declares_parameters<S>::value || has_parameter_size<S>::value;
  static constexpr bool parameter_reverse =
    !types_ok<S> || !declares_parameters<S>::value || has_parameter_reverse<S>::value;
  static constexpr bool all = value_type && record_type && record && state_size && records_per_step && forward &&
                              augmented_forward && reverse && halo && bulk_check && parameter_size &&
                              parameter_reverse;
};

}  // namespace tapeflow::detail::step_contract

namespace tapeflow {

/// True when `Step` meets the chain's Step contract (the top of this file).
template <class Step>
inline constexpr bool is_step_v = detail::step_contract::check<Step>::all;

/// Records the reverse of `step` reads on each side of a tile: step.halo_records() where the Step
/// declares it, else 0.
template <class Step>
[[nodiscard]] std::size_t halo_records_of(Step const& step)
{
  if constexpr (detail::step_contract::has_halo<Step>::value) {
    return static_cast<std::size_t>(step.halo_records());
  } else {
    static_cast<void>(step);
    return 0;
  }
}

/// Whether the chain may grant `step` a bulk-copy plan where the device has the engine:
/// step.bulk_copy_runs() where the Step declares it (the code loaded for its reverse kernel must be
/// sm_90), else true (and a bulk kernel loaded as older code is refused at launch, not trapped).
template <class Step>
[[nodiscard]] bool bulk_copy_runs_of(Step const& step)
{
  if constexpr (detail::step_contract::has_bulk_check<Step>::value) {
    return step.bulk_copy_runs();
  } else {
    static_cast<void>(step);
    return true;
  }
}

/// True when `Step` declares parameters (parameter_size()): its reverse takes a parameter adjoint.
template <class Step>
inline constexpr bool has_parameters_v = detail::step_contract::declares_parameters<Step>::value;

/// Values in the Step's parameter vector: step.parameter_size() where declared, else 0.
template <class Step>
[[nodiscard]] std::size_t parameter_size_of(Step const& step)
{
  if constexpr (detail::step_contract::has_parameter_size<Step>::value) {
    return static_cast<std::size_t>(step.parameter_size());
  } else {
    static_cast<void>(step);
    return 0;
  }
}

namespace detail {
/// Instantiated for a Step that breaks the contract: one static_assert per member at fault.
template <class Step>
struct report_step_contract {
  using c = step_contract::check<Step>;
  static_assert(c::value_type, "tapeflow: the Step has no `using value_type = ...;` (the type of its state's values)");
  static_assert(c::record_type, "tapeflow: the Step has no `using record_type = ...;` (its tape record)");
  static_assert(c::record,
                "tapeflow: Step::record_type is not a record: it must be trivially copyable, declared alignas(16) "
                "and a multiple of 16 bytes (tapeflow::value_record<T, N> is one)");
  static_assert(c::state_size, "tapeflow: the Step needs `std::size_t state_size() const` (values in the state)");
  static_assert(c::records_per_step,
                "tapeflow: the Step needs `std::size_t records_per_step() const` (records one step writes) or "
                "`std::size_t records_per_step(std::size_t step) const` (records step `step` writes)");
  static_assert(c::forward, "tapeflow: Step::forward must be callable as `void forward(std::size_t step, "
                            "value_type const* in, value_type* out, tapeflow::stream_view) const`");
  static_assert(c::augmented_forward,
                "tapeflow: Step::augmented_forward must be callable as `void augmented_forward(std::size_t step, "
                "value_type const* in, value_type* out, tapeflow::tape_writer<record_type>, tapeflow::stream_view) "
                "const`");
  static_assert(c::reverse,
                "tapeflow: Step::reverse must be callable as `void reverse(std::size_t step, "
                "tapeflow::tape_reader<record_type>, tapeflow::pipeline_plan const&, value_type const* adjoint_out, "
                "value_type* adjoint_in, tapeflow::stream_view) const`");
  static_assert(c::parameter_size, "tapeflow: Step::parameter_size, where declared, must be `std::size_t "
                                   "parameter_size() const` (values in the step's parameters)");
  static_assert(c::parameter_reverse,
                "tapeflow: a Step that declares parameter_size() needs a reverse callable as `void reverse(std::size_t "
                "step, tapeflow::tape_reader<record_type>, tapeflow::pipeline_plan const&, value_type const* "
                "adjoint_out, value_type* adjoint_in, value_type* parameter_adjoint, tapeflow::stream_view) const` "
                "(it adds the step's dL/dparameters to parameter_adjoint)");
  static_assert(c::halo, "tapeflow: Step::halo_records, where declared, must be `std::size_t halo_records() const` "
                         "(records its reverse reads on each side of a tile)");
  static_assert(c::bulk_check, "tapeflow: Step::bulk_copy_runs, where declared, must be `bool bulk_copy_runs() const` "
                               "(whether its reverse kernel's loaded code runs the sm_90 bulk-copy pipeline)");
};

/// Step `t`'s reverse: the one that adds the step's dL/dθ to `parameter_adjoint` where the Step
/// declares parameters, the plain one otherwise (`parameter_adjoint` unused).
template <class Step>
void reverse_step(Step const& step, std::size_t t, tape_reader<typename Step::record_type> tape,
                  pipeline_plan const& plan, typename Step::value_type const* adjoint_out,
                  typename Step::value_type* adjoint_in, typename Step::value_type* parameter_adjoint, stream_view s)
{
  if constexpr (has_parameters_v<Step>) {
    step.reverse(t, tape, plan, adjoint_out, adjoint_in, parameter_adjoint, s);
  } else {
    static_cast<void>(parameter_adjoint);
    step.reverse(t, tape, plan, adjoint_out, adjoint_in, s);
  }
}
}  // namespace detail

}  // namespace tapeflow
