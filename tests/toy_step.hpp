// SPDX-License-Identifier: Apache-2.0
// A toy chain step for tests: x' = x + x^2 / 2 elementwise, two values per record, reverse
// through cpu::reverse_tiles (in place, or the staging ring when the plan asks for it). Its
// gradient is known in closed form. Its record is its input state (padded), so it may say so:
// with record_is_state, the chain keeps x_t's buffer as layer t instead of calling augmented_forward.
#pragma once

#include <tapeflow/chain.hpp>
#include <tapeflow/cpu/reverse.hpp>

#include <memory>

namespace tapeflow {

struct toy_step {
  using value_type = double;
  using record_type = value_record<double, 2>;

  std::size_t size;
  std::shared_ptr<std::size_t> reverse_calls = std::make_shared<std::size_t>(0);
  bool record_is_state = false;
  std::shared_ptr<std::size_t> augmented_calls = std::make_shared<std::size_t>(0);

  [[nodiscard]] std::size_t state_size() const noexcept { return size; }
  [[nodiscard]] std::size_t records_per_step() const noexcept { return (size + 1) / 2; }
  [[nodiscard]] bool tapes_state() const noexcept { return record_is_state; }

  void forward(std::size_t, double const* in, double* out, stream_view) const
  {
    for (std::size_t k = 0; k < size; ++k) { out[k] = in[k] + 0.5 * in[k] * in[k]; }
  }

  void augmented_forward(std::size_t, double const* in, double* out, tape_writer<record_type> tape, stream_view) const
  {
    ++*augmented_calls;
    for (std::size_t r = 0; r < tape.size(); ++r) {
      record_type rec{};
      for (std::size_t c = 0; c < 2 && 2 * r + c < size; ++c) {
        double const x = in[2 * r + c];
        rec.values[c] = x;
        out[2 * r + c] = x + 0.5 * x * x;
      }
      tape.write(r, rec);
    }
  }

  void reverse(std::size_t, tape_reader<record_type> tape, pipeline_plan const& plan, double const* g_out,
               double* g_in, stream_view) const
  {
    ++*reverse_calls;
    cpu::reverse_tiles(tape, plan, [&](std::size_t, record_type const* staged, std::size_t first, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t c = 0; c < 2 && 2 * (first + i) + c < size; ++c) {
          std::size_t const k = 2 * (first + i) + c;
          g_in[k] = g_out[k] * (1.0 + staged[i].values[c]);
        }
      }
    });
  }
};

}  // namespace tapeflow
