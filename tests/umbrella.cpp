// SPDX-License-Identifier: Apache-2.0
// Compiled alone by the umbrella_header_is_plain_cxx test: <tapeflow/tapeflow.hpp> needs nothing
// but a C++17 compiler, and brings the host API (a few names from each part, used).
#include <tapeflow/tapeflow.hpp>

#include <type_traits>

static_assert(std::is_class_v<tapeflow::chain_options>);
static_assert(std::is_class_v<tapeflow::device_buffer>);
static_assert(std::is_class_v<tapeflow::tape>);
static_assert(std::is_class_v<tapeflow::tile_window<tapeflow::value_record<float, 4>>>);
static_assert(std::is_class_v<tapeflow::cpu::tile_ring<tapeflow::value_record<float, 4>>>);
static_assert(std::is_class_v<tapeflow::thread_tape_options>);
static_assert(std::is_class_v<tapeflow::captured_program>);
static_assert(std::is_class_v<tapeflow::dual<double>>);
static_assert(std::is_base_of_v<tapeflow::error, tapeflow::budget_error>);
static_assert(std::is_class_v<tapeflow::stencil::segment_plan>);

int main()
{
  tapeflow::pipeline_request r;
  tapeflow::cpu::parallel_for(0, 1, [](std::size_t, std::size_t) {});
  return static_cast<int>(r.records) + static_cast<int>(tapeflow::is_step_v<int>);
}
