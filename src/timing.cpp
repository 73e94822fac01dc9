// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/timing.hpp>

#include <algorithm>

namespace tapeflow {

double median(std::vector<double> samples)
{
  TAPEFLOW_EXPECTS(!samples.empty(), "a median needs at least one sample");
  std::sort(samples.begin(), samples.end());
  std::size_t const m = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[m] : 0.5 * (samples[m - 1] + samples[m]);
}

}  // namespace tapeflow
