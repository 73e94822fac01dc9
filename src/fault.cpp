// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/fault.hpp>

#include <array>
#include <atomic>

namespace tapeflow::fault {
namespace {

struct armed_site {
  std::atomic<std::size_t> countdown{0};  // 0: disarmed
  std::atomic<std::size_t> fired{0};
};

armed_site& at(site s) noexcept
{
  static std::array<armed_site, 3> sites;
  return sites[static_cast<std::size_t>(s)];
}

}  // namespace

void fail_nth(site s, std::size_t n) noexcept { at(s).countdown.store(n); }

void clear() noexcept
{
  for (site s : {site::device_allocation, site::host_allocation, site::copy}) { fail_nth(s, 0); }
}

std::size_t injected(site s) noexcept { return at(s).fired.load(); }

namespace detail {
bool fires(site s) noexcept
{
  armed_site& a = at(s);
  std::size_t left = a.countdown.load();
  while (left != 0) {
    if (a.countdown.compare_exchange_weak(left, left - 1)) {
      if (left == 1) {
        a.fired.fetch_add(1);
        return true;
      }
      return false;
    }
  }
  return false;
}
}  // namespace detail

}  // namespace tapeflow::fault
