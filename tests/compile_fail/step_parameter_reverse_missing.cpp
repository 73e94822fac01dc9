// SPDX-License-Identifier: Apache-2.0
// Must not compile, with exactly one error that names the mistake: a step that declares
// parameters but whose reverse takes no parameter adjoint.
#include <tapeflow/chain.hpp>

struct step {
  using value_type = float;
  using record_type = tapeflow::value_record<float, 4>;
  std::size_t state_size() const { return 4; }
  std::size_t records_per_step() const { return 1; }
  std::size_t parameter_size() const { return 2; }
  void forward(std::size_t, float const*, float*, tapeflow::stream_view) const {}
  void augmented_forward(std::size_t, float const*, float*, tapeflow::tape_writer<record_type>, tapeflow::stream_view) const {}
  void reverse(std::size_t, tapeflow::tape_reader<record_type>, tapeflow::pipeline_plan const&, float const*, float*,
               tapeflow::stream_view) const {}
};

int main()
{
  tapeflow::chain<step> c(step{}, 3, tapeflow::chain_options{});
  tapeflow::device_buffer x(tapeflow::backend::cpu, 16, {});
  c.forward(x);
  c.reverse(x);
  return static_cast<int>(c.stats().steps);
}
