// SPDX-License-Identifier: Apache-2.0
// Long chains in blocks: the steps grouped into blocks of about equal bytes, planned as one step
// each, and the blocks' schedule run as the steps' (docs/tiers.md, "Long chains").
#include "schedule/internal.hpp"

#include <algorithm>

namespace tapeflow::detail::scheduling {

std::optional<blocks> in_blocks(schedule_model const& m, std::size_t count)
{
  std::size_t const n = m.steps.size();
  double total = 0;
  for (step_cost const& s : m.steps) { total += static_cast<double>(s.layer_bytes); }
  blocks b;
  b.first.push_back(0);
  double done = 0;  // bytes of the steps before t
  for (std::size_t t = 0; t < n; ++t) {
    if (t > b.first.back() && done >= total * static_cast<double>(b.first.size()) / static_cast<double>(count)) {
      b.first.push_back(t);
    }
    done += static_cast<double>(m.steps[t].layer_bytes);
  }
  b.first.push_back(n);

  b.model = m;
  b.model.steps.clear();
  b.model.host_layer_ms.clear();
  std::size_t reserve = 0;
  for (std::size_t k = 0; k + 1 < b.first.size(); ++k) {
    step_cost sum;
    double host = 0;
    for (std::size_t t = b.first[k]; t < b.first[k + 1]; ++t) {
      step_cost const& s = m.steps[t];
      sum.forward_ms += s.forward_ms;
      sum.aug_forward_ms += s.aug_forward_ms;
      sum.reverse_ms += s.reverse_ms;
      sum.layer_bytes += s.layer_bytes;
      host += host_penalty(m, t);
    }
    reserve = std::max(reserve, sum.layer_bytes - m.steps[b.first[k + 1] - 1].layer_bytes);
    b.model.steps.push_back(sum);
    if (!m.host_layer_ms.empty()) { b.model.host_layer_ms.push_back(host); }
  }
  if (reserve > 0 && (!m.device_layers || reserve > m.device_bytes)) { return std::nullopt; }
  b.model.device_bytes -= reserve;
  return b;
}

std::vector<schedule_action> unblocked(blocks const& b, std::vector<schedule_action> const& coarse)
{
  std::vector<schedule_action> out;
  std::vector<level> where(b.first.back(), level::device);
  for (schedule_action const& a : coarse) {
    std::size_t const first = b.first[a.step];
    std::size_t const end = b.first[a.step + 1];
    switch (a.kind) {
      case action_kind::advance: out.push_back({action_kind::advance, first, b.first[a.to], a.where, false}); break;
      case action_kind::taped:
        for (std::size_t t = first; t < end; ++t) {
          bool const last = t + 1 == end;
          where[t] = a.kept || last ? a.where : level::device;
          out.push_back({action_kind::taped, t, 0, where[t], a.kept || !last});
        }
        break;
      case action_kind::reverse:
        for (std::size_t t = end; t-- > first;) { out.push_back({action_kind::reverse, t, 0, where[t], false}); }
        break;
      case action_kind::store:
      case action_kind::restore:
      case action_kind::release: out.push_back({a.kind, first, 0, a.where, false}); break;
    }
  }
  return out;
}

}  // namespace tapeflow::detail::scheduling
