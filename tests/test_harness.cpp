// SPDX-License-Identifier: Apache-2.0
// The test harness itself: the comparison every numerical test goes through, and how GPU tests
// tell "no GPU here" (skip) from "a GPU that cannot be used" (fail).
#include "reference.hpp"

#include <tapeflow/backend.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tapeflow {
namespace {

TEST(RelativeError, IsNormWiseAndZeroForEqualVectors)
{
  std::vector<double> const b{1.0, -4.0, 2.0};
  EXPECT_EQ(testing::relative_error(b, b), 0.0);
  std::vector<double> const a{1.0, -4.0, 2.5};
  EXPECT_DOUBLE_EQ(testing::relative_error(a, b), 0.5 / 4.0);
  std::vector<float> const narrow{1.0f, -4.0f, 2.0f};
  EXPECT_EQ(testing::relative_error(narrow, b), 0.0);
}

TEST(RelativeError, FailsEveryToleranceOnNaNOrInfinity)
{
  double const nan = std::numeric_limits<double>::quiet_NaN();
  double const inf = std::numeric_limits<double>::infinity();
  std::vector<double> const b{1.0, 2.0, 3.0};
  for (std::size_t at = 0; at < b.size(); ++at) {
    for (double bad : {nan, -nan, inf, -inf}) {
      std::vector<double> a = b;
      a[at] = bad;
      EXPECT_FALSE(testing::relative_error(a, b) < 1e300) << "a[" << at << "] = " << bad;
      EXPECT_FALSE(testing::relative_error(b, a) < 1e300) << "b[" << at << "] = " << bad;
    }
  }
  std::vector<float> const narrow{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  EXPECT_FALSE(testing::relative_error(narrow, b) < 1e300);
}

TEST(RelativeError, FailsEveryToleranceWhenTheSizesDiffer)
{
  std::vector<double> const b{1.0, 2.0, 3.0};
  std::vector<double> const longer{1.0, 2.0, 3.0, 4.0};
  std::vector<double> const shorter{1.0, 2.0};
  EXPECT_FALSE(testing::relative_error(longer, b) < 1e300);
  EXPECT_FALSE(testing::relative_error(shorter, b) < 1e300);
  EXPECT_FALSE(testing::relative_error(std::vector<double>{}, b) < 1e300);
}

TEST(BackendStatus, ADeviceCountFailureIsNoGpuOnlyWithoutDeviceOrDriver)
{
  using detail::count_failure;
  // No device: the driver says so, or no driver is installed at all (the runtime then reports an
  // insufficient driver).
  EXPECT_FALSE(detail::count_failure_means_unusable(count_failure::no_device, false));
  EXPECT_FALSE(detail::count_failure_means_unusable(count_failure::no_device, true));
  EXPECT_FALSE(detail::count_failure_means_unusable(count_failure::insufficient_driver, false));
  // A driver older than the runtime, or any other failure: a GPU machine that is broken, which
  // GPU tests must report as a failure, not skip.
  EXPECT_TRUE(detail::count_failure_means_unusable(count_failure::insufficient_driver, true));
  EXPECT_TRUE(detail::count_failure_means_unusable(count_failure::other, false));
  EXPECT_TRUE(detail::count_failure_means_unusable(count_failure::other, true));
}

TEST(BackendStatus, TheCpuIsAlwaysAvailable)
{
  EXPECT_EQ(query_backend_status(backend::cpu), backend_status::available);
  for (backend kind : {backend::cuda, backend::hip}) {
    backend_status const status = query_backend_status(kind);
    EXPECT_EQ(status == backend_status::available, backend_available(kind)) << to_string(kind);
    EXPECT_EQ(status == backend_status::not_compiled, !backend_compiled(kind)) << to_string(kind);
    EXPECT_EQ(status == backend_status::available, backend_unavailable_reason(kind).empty()) << to_string(kind);
  }
}

}  // namespace
}  // namespace tapeflow
