// SPDX-License-Identifier: Apache-2.0
// The tier planner. Cost model (docs/tiers.md): a host-tier layer costs its copies, which overlap
// the compute of the other layers (D2H behind the forward, H2D ahead of the reverse); a recompute
// layer costs the untaped forward steps that rebuild it. The planner keeps what fits on the
// device, and places the rest where the estimated overhead is lowest.
//
// One file, a little over 400 lines: plan_tiers and the four placements it chooses among (the
// host split, Revolve, greedy eviction, the mixed schedule) share the request's summary and the
// cost helpers, and are read together; the schedule a placement runs is in src/schedule/.
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/revolve.hpp>
#include <tapeflow/tiers.hpp>

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdio>
#include <optional>

namespace tapeflow {

std::string_view to_string(tier t) noexcept
{
  switch (t) {
    case tier::device: return "device";
    case tier::host: return "host";
    case tier::recompute: return "recompute";
  }
  return "unknown";
}

std::size_t tier_plan::count(tier t) const noexcept
{
  return static_cast<std::size_t>(std::count(tiers.begin(), tiers.end(), t));
}

namespace {

double copy_ms(std::size_t bytes, double gbps) { return gbps > 0 ? static_cast<double>(bytes) / (gbps * 1e6) : 0.0; }

struct summary {
  std::size_t total{0};
  std::size_t largest{0};
  double forward_ms{0};
  double reverse_ms{0};
  bool uniform{true};
};

summary summarise(std::vector<layer_info> const& layers)
{
  summary s;
  for (layer_info const& l : layers) {
    TAPEFLOW_EXPECTS(l.tape_bytes > 0, "every layer needs a positive tape size");
    TAPEFLOW_EXPECTS(l.tape_bytes <= static_cast<std::size_t>(-1) - s.total, "the tape's size overflows");
    TAPEFLOW_EXPECTS(plannable_ms(l.forward_ms) && plannable_ms(l.reverse_ms) && plannable_ms(l.aug_forward_ms),
                     "a layer's costs must be finite, from 0 to 1e12 ms");
    s.total += l.tape_bytes;
    s.largest = std::max(s.largest, l.tape_bytes);
    s.forward_ms += l.forward_ms;
    s.reverse_ms += l.reverse_ms;
    s.uniform = s.uniform && l.tape_bytes == layers.front().tape_bytes;
  }
  return s;
}

double aug_ms(layer_info const& l) { return l.aug_forward_ms > 0 ? l.aug_forward_ms : l.forward_ms; }

/// Forward and reverse of every layer kept on the device: what every plan's overhead is over.
double store_ms(std::vector<layer_info> const& layers)
{
  double ms = 0;
  for (layer_info const& l : layers) { ms += aug_ms(l) + l.reverse_ms; }
  return ms;
}

void finish(tier_plan& plan, std::vector<layer_info> const& layers)
{
  for (std::size_t i = 0; i < layers.size(); ++i) {
    plan.bytes_per_tier[static_cast<std::size_t>(plan.tiers[i])] += layers[i].tape_bytes;
  }
  if (plan.policy != tape_policy::mixed) { plan.predicted_ms = store_ms(layers) + plan.overhead_ms; }
}

/// Keeps the last layers on the device and sends the earlier ones to the host tier through a
/// ring; `all_host` sends every layer. Tries every ring size the budget allows (a bigger ring
/// hides more copy latency, a smaller one leaves room to keep layers) and keeps the cheapest.
/// Empty when the device or host budget cannot hold any.
std::optional<tier_plan> host_plan(tier_request const& r, summary const& s, bool all_host)
{
  std::size_t const budget = r.budgets.device_bytes;
  std::size_t const n = r.layers.size();
  double const per_layer_forward = s.forward_ms / static_cast<double>(n);
  double const per_layer_reverse = s.reverse_ms / static_cast<double>(n);
  // More slots than cover one copy with compute, or than there are layers, never help.
  double const copy = copy_ms(s.largest, std::min(r.bw.h2d_GBps, r.bw.d2h_GBps));
  // (Clamped before the conversion: a tiny reverse cost makes the ratio arbitrarily large.)
  double const ratio = per_layer_reverse > 0 ? std::ceil(copy / per_layer_reverse) : 1.0;
  std::size_t const useful = static_cast<std::size_t>(std::min(ratio, static_cast<double>(n))) + 2;
  std::size_t max_slots = std::min(useful, n);
  if (budget != 0) { max_slots = std::min(max_slots, budget / s.largest); }

  std::optional<tier_plan> best;
  bool jumped = false;
  for (std::size_t slots = 1; slots <= max_slots; ++slots) {
    tier_plan plan;
    plan.policy = tape_policy::offload;
    plan.tiers.assign(n, tier::host);
    std::size_t kept = 0;
    if (!all_host) {
      // The last layers are reversed first: keep as many of them as fit beside the ring.
      std::size_t const reserved = slots * s.largest;
      for (std::size_t i = n; i-- > 0;) {
        if (budget != 0 && r.layers[i].tape_bytes > budget - reserved - kept) { break; }
        plan.tiers[i] = tier::device;
        kept += r.layers[i].tape_bytes;
      }
    }
    std::size_t const offloaded = plan.count(tier::host);
    if (offloaded == 0) { continue; }  // everything fits: that is the store plan
    plan.ring_slots = std::min(slots, offloaded);
    plan.prefetch_distance = plan.ring_slots - 1;
    plan.device_bytes = kept + plan.ring_slots * s.largest;
    double d2h = 0;
    double h2d = 0;
    double d2h_latency = 0;
    double h2d_latency = 0;
    double const lead = static_cast<double>(plan.prefetch_distance);
    for (std::size_t i = 0; i < n; ++i) {
      if (plan.tiers[i] != tier::host) { continue; }
      plan.host_bytes += r.layers[i].tape_bytes;
      double const out = copy_ms(r.layers[i].tape_bytes, r.bw.d2h_GBps);
      double const in = copy_ms(r.layers[i].tape_bytes, r.bw.h2d_GBps);
      d2h += out;
      h2d += in;
      // A copy can only hide behind the compute of the layers it leads by.
      d2h_latency += std::max(0.0, out - lead * per_layer_forward);
      h2d_latency += std::max(0.0, in - lead * per_layer_reverse);
    }
    if (r.budgets.host_bytes != 0 && plan.host_bytes > r.budgets.host_bytes) { continue; }
    plan.overhead_ms = std::max(d2h_latency, d2h - s.forward_ms) + std::max(h2d_latency, h2d - s.reverse_ms);
    // Ties go to the bigger ring: more lookahead absorbs jitter the model does not see.
    double const plan_cost = plan.overhead_ms;
    if (!best || plan.overhead_ms <= best->overhead_ms) { best = std::move(plan); }
    // A bigger ring cannot be cheaper once, in each direction, the copies' latency is no more than
    // what their total time costs (or is nothing): a bigger ring pushes layers off the device, so
    // the total only grows, and latency was all it could win back. Where that leaves a cost, it
    // ties only while the same layers stay on the device, so the last ring that keeps them is the
    // one to take, and nothing after it. (Trying every ring, each over every layer, took half a
    // minute for 10^5 layers whose copies are far slower than a reverse.)
    bool const copy_bound = d2h_latency <= std::max(d2h - s.forward_ms, 0.0) &&
                            h2d_latency <= std::max(h2d - s.reverse_ms, 0.0) && plan_cost > 0;
    if (copy_bound && !jumped) {
      std::size_t const same = all_host || budget == 0 ? max_slots : std::min(max_slots, (budget - kept) / s.largest);
      if (same <= slots) { break; }
      slots = same - 1;  // the loop's increment evaluates that ring next, and then stops
      jumped = true;
    } else if (jumped) {
      break;
    }
  }
  if (best) { finish(*best, r.layers); }
  return best;
}

/// Revolve over a uniform chain, with as many snapshots as the budget holds beside one layer.
std::optional<tier_plan> revolve_plan(tier_request const& r, summary const& s)
{
  std::size_t const n = r.layers.size();
  // Without a budget, a snapshot of every step, as many as the address space holds beside the
  // layer (n states of 2^56 bytes wrapped the device bytes to a few).
  std::size_t snapshots = std::min(n, (std::numeric_limits<std::size_t>::max() - s.largest) / r.state_bytes);
  if (r.budgets.device_bytes != 0) {
    if (r.budgets.device_bytes < s.largest + r.state_bytes) { return std::nullopt; }
    snapshots = std::min(n, (r.budgets.device_bytes - s.largest) / r.state_bytes);
  }
  tier_plan plan;
  plan.policy = tape_policy::recompute;
  plan.tiers.assign(n, tier::recompute);
  plan.snapshots = snapshots;
  plan.recompute_steps = revolve_forward_steps(n, snapshots);
  plan.device_bytes = s.largest + snapshots * r.state_bytes;
  // Over store: the untaped steps, and every snapshot's store and restore, each a copy of the
  // state on the device (docs/tiers.md, "The planner's cost model").
  std::size_t const copies = revolve_state_copies(n, snapshots);
  plan.overhead_ms = static_cast<double>(plan.recompute_steps) * s.forward_ms / static_cast<double>(n) +
                     static_cast<double>(copies) * copy_ms(r.state_bytes, r.bw.d2d_GBps);
  finish(plan, r.layers);
  return plan;
}

/// Greedy eviction over layers of unequal size and cost.
std::optional<tier_plan> greedy_plan(tier_request const& r, summary const& s)
{
  if (r.budgets.device_bytes != 0 && s.largest > r.budgets.device_bytes) { return std::nullopt; }
  std::vector<bool> const evicted =
    r.budgets.device_bytes == 0 ? std::vector<bool>(r.layers.size(), false)
                                : greedy_eviction(r.layers, r.budgets.device_bytes);
  tier_plan plan;
  plan.policy = tape_policy::recompute;
  plan.tiers.resize(r.layers.size());
  std::size_t resident = 0;
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    plan.tiers[i] = evicted[i] ? tier::recompute : tier::device;
    if (evicted[i]) {
      plan.overhead_ms += r.layers[i].forward_ms;
      ++plan.recompute_steps;
    } else {
      resident += r.layers[i].tape_bytes;
    }
  }
  plan.device_bytes = std::min(r.budgets.device_bytes == 0 ? resident : r.budgets.device_bytes,
                               resident + s.largest);
  finish(plan, r.layers);
  return plan;
}

/// The mixed schedule: the optimiser of tapeflow/schedule.hpp over the chain, under the cost
/// model of docs/tiers.md. The device budget holds the working layer (the one taped just before
/// its reverse) and, when layers go to the host, two slots they pass through; the optimiser
/// gets the rest. Tried without and with the host, the cheaper kept. Empty when nothing fits.
std::optional<tier_plan> mixed_plan(tier_request const& r, summary const& s, bool host_allowed)
{
  std::size_t const n = r.layers.size();
  schedule_model m;
  m.state_bytes = r.state_bytes;
  for (layer_info const& l : r.layers) { m.steps.push_back({l.forward_ms, aug_ms(l), l.reverse_ms, l.tape_bytes}); }
  // A layer kept on the host costs its copies where they outlast the compute they overlap: the
  // D2H copy runs behind the next step's forward, the H2D prefetch behind the next step's reverse.
  for (std::size_t i = 0; i < n; ++i) {
    layer_info const& next = r.layers[std::min(i + 1, n - 1)];
    double const out = copy_ms(r.layers[i].tape_bytes, r.bw.d2h_GBps);
    double const in = copy_ms(r.layers[i].tape_bytes, r.bw.h2d_GBps);
    m.host_layer_ms.push_back(std::max(0.0, out - std::min(next.forward_ms, aug_ms(next))) +
                              std::max(0.0, in - next.reverse_ms));
  }
  // Checkpoints are copies on the compute stream: device to device, or to and from pinned memory.
  m.write_ms[0] = m.read_ms[0] = copy_ms(r.state_bytes, r.bw.d2d_GBps);
  m.write_ms[1] = copy_ms(r.state_bytes, r.bw.d2h_GBps);
  m.read_ms[1] = copy_ms(r.state_bytes, r.bw.h2d_GBps);
  std::size_t const everything = s.total + n * r.state_bytes;
  std::size_t const budget = r.budgets.device_bytes == 0 ? everything + 3 * s.largest : r.budgets.device_bytes;
  std::size_t const host = r.budgets.host_bytes == 0 ? everything : r.budgets.host_bytes;

  std::optional<tier_plan> best;
  for (bool const use_host : {false, true}) {
    if (use_host && !host_allowed) { continue; }
    std::size_t const reserved = (use_host ? 3 : 1) * s.largest;
    if (budget < reserved) { continue; }
    m.device_bytes = budget - reserved;
    m.host_bytes = use_host ? host : 0;
    m.host_layers = use_host;
    m.checkpoints[1] = use_host;
    schedule sched;
    try {
      sched = optimal_schedule(m);
    } catch (budget_error const&) {
      continue;
    }
    if (best && best->predicted_ms <= sched.predicted_ms) { continue; }
    tier_plan plan;
    plan.policy = tape_policy::mixed;
    plan.predicted_ms = sched.predicted_ms;
    plan.overhead_ms = sched.predicted_ms - store_ms(r.layers);
    plan.tiers.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      plan.tiers[i] = sched.fate[i] == layer_fate::device ? tier::device
                      : sched.fate[i] == layer_fate::host ? tier::host
                                                          : tier::recompute;
      plan.recompute_steps += sched.recomputed[i];
    }
    plan.snapshots = sched.checkpoints[0] + sched.checkpoints[1];
    plan.ring_slots = use_host && sched.peak_host_bytes > 0 ? 2 : 0;
    plan.prefetch_distance = plan.ring_slots > 0 ? 1 : 0;
    plan.device_bytes = sched.peak_device_bytes + s.largest + plan.ring_slots * s.largest;
    plan.host_bytes = sched.peak_host_bytes;
    plan.mixed = std::move(sched);
    finish(plan, r.layers);
    best = std::move(plan);
  }
  return best;
}

[[noreturn]] void no_fit(tier_request const& r, summary const& s, std::string const& why)
{
  auto const budget = [](std::size_t bytes) { return bytes == 0 ? std::string{"none"} : detail::shown_bytes(bytes); };
  TAPEFLOW_FAIL_BYTES(budget_error,
                      "policy '" + std::string{to_string(r.policy)} + "': " + why + " (tape " +
                        detail::shown_bytes(s.total) + " in " + std::to_string(r.layers.size()) +
                        " layers of up to " + detail::shown_bytes(s.largest) + "; device budget " +
                        budget(r.budgets.device_bytes) + ", host budget " + budget(r.budgets.host_bytes) + ")",
                      s.total);
}

}  // namespace

std::vector<bool> greedy_eviction(std::vector<layer_info> const& layers, std::size_t device_budget)
{
  TAPEFLOW_EXPECTS(device_budget > 0, "greedy eviction needs a positive device budget");
  std::vector<bool> evicted(layers.size(), false);
  std::vector<std::size_t> resident;
  std::size_t bytes = 0;
  // Layers all alike (bytes and cost) score by staleness alone: the oldest resident goes first,
  // the search below in its order, without scanning every resident layer per eviction (which made
  // 10^5 layers take 20 s).
  bool const alike = std::all_of(layers.begin(), layers.end(), [&](layer_info const& l) {
    return l.tape_bytes == layers.front().tape_bytes && l.forward_ms == layers.front().forward_ms;
  });
  std::size_t oldest = 0;  // alike: resident[oldest..] are resident
  for (std::size_t now = 0; now < layers.size(); ++now) {
    if (layers[now].tape_bytes > device_budget) {
      TAPEFLOW_FAIL_BYTES(budget_error,
                          "layer " + std::to_string(now) + " alone needs " + std::to_string(layers[now].tape_bytes) +
                            " bytes; the device budget is " + std::to_string(device_budget),
                          layers[now].tape_bytes);
    }
    while (alike && bytes + layers[now].tape_bytes > device_budget) {
      std::size_t const victim = resident[oldest++];
      bytes -= layers[victim].tape_bytes;
      evicted[victim] = true;
    }
    while (bytes + layers[now].tape_bytes > device_budget) {
      // h = cost / (bytes * staleness): cheap, large, long-untouched layers go first.
      auto const score = [&](std::size_t i) {
        double const staleness = static_cast<double>(now - i);
        return layers[i].forward_ms / (static_cast<double>(layers[i].tape_bytes) * staleness);
      };
      auto victim = std::min_element(resident.begin(), resident.end(),
                                     [&](std::size_t a, std::size_t b) { return score(a) < score(b); });
      bytes -= layers[*victim].tape_bytes;
      evicted[*victim] = true;
      resident.erase(victim);
    }
    resident.push_back(now);
    bytes += layers[now].tape_bytes;
  }
  return evicted;
}

tier_plan plan_tiers(tier_request const& r)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::plan_tiers");
  TAPEFLOW_EXPECTS(!r.layers.empty(), "the planner needs at least one layer");
  TAPEFLOW_EXPECTS(r.policy == tape_policy::automatic || r.policy == tape_policy::store ||
                     r.policy == tape_policy::offload || r.policy == tape_policy::recompute ||
                     r.policy == tape_policy::mixed,
                   "unknown tape policy " + std::to_string(static_cast<int>(r.policy)));
  TAPEFLOW_EXPECTS(r.state_bytes <= max_plan_bytes, "a chain's state of " + std::to_string(r.state_bytes) +
                                                      " bytes is past what the planners take (2^56)");
  summary const s = summarise(r.layers);
  std::size_t const budget = r.budgets.device_bytes;
  if (budget != 0 && budget < r.min_device_bytes) {
    TAPEFLOW_FAIL_BYTES(budget_error,
                        "the device budget of " + std::to_string(budget) +
                          " bytes is smaller than the least a layer's reverse runs in (" +
                          std::to_string(r.min_device_bytes) + " bytes: its staged tiles, or the layer if smaller)",
                        r.min_device_bytes);
  }
  bool const chain = s.uniform && r.state_bytes > 0;
  auto const recompute = [&] { return chain ? revolve_plan(r, s) : greedy_plan(r, s); };

  tier_plan store;
  store.policy = tape_policy::store;
  store.tiers.assign(r.layers.size(), tier::device);
  store.device_bytes = s.total;
  finish(store, r.layers);
  bool const store_fits = budget == 0 || s.total <= budget;

  switch (r.policy) {
    case tape_policy::store:
      if (!store_fits) { no_fit(r, s, "the whole tape does not fit the device budget"); }
      return store;
    case tape_policy::offload:
      if (auto plan = host_plan(r, s, true)) { return *plan; }
      no_fit(r, s, "the host tier needs a device ring of at least one layer and host memory for every layer");
    case tape_policy::recompute:
      if (r.state_bytes > 0 && !s.uniform) {
        // A chain of unequal layers: the optimiser's schedule on the device alone (Revolve's
        // closed form is for equal steps).
        std::optional<tier_plan> plan = mixed_plan(r, s, false);
        if (plan) {
          plan->policy = tape_policy::recompute;
          return *plan;
        }
        no_fit(r, s, "recomputation needs the largest layer and one snapshot of the state on the device");
      }
      if (auto plan = recompute()) { return *plan; }
      no_fit(r, s, chain ? "recomputation needs one layer and one snapshot of the state on the device"
                         : "recomputation needs the largest layer on the device");
    case tape_policy::mixed:
      TAPEFLOW_FAIL(logic_error, "policy 'mixed' is what 'auto' resolves to; ask for 'auto'");
    case tape_policy::automatic: break;
  }
  if (store_fits) { return store; }
  if (r.state_bytes > 0) {
    if (auto plan = mixed_plan(r, s, r.host_helps)) { return *plan; }
    // Below a working layer beside the mixed schedule's host slots, every layer can still pass
    // through the host tier's ring.
    if (r.host_helps) {
      if (auto plan = host_plan(r, s, false)) { return *plan; }
    }
    no_fit(r, s, r.host_helps ? "no schedule of device, host and recomputed layers fits the budgets"
                              : "no schedule of device and recomputed layers fits the device budget (on the CPU "
                                "backend auto leaves host memory out: a copy there saves nothing; ask for offload)");
  }
  // Tapes that are not chains: the cheaper of the host split and greedy recomputation.
  std::optional<tier_plan> mixed = r.host_helps ? host_plan(r, s, false) : std::nullopt;
  std::optional<tier_plan> rebuilt = greedy_plan(r, s);
  if (mixed && (!rebuilt || mixed->overhead_ms <= rebuilt->overhead_ms)) {
    mixed->policy = tape_policy::offload;
    return *mixed;
  }
  if (rebuilt) { return *rebuilt; }
  no_fit(r, s, "neither the host tier nor recomputation fits the budgets");
}

std::string tier_plan::describe() const
{
  std::string text = "policy " + std::string{to_string(policy)} + ": " + std::to_string(count(tier::device)) +
                     " device, " + std::to_string(count(tier::host)) + " host, " +
                     std::to_string(count(tier::recompute)) + " recompute layers; device tape peak " +
                     detail::shown_bytes(device_bytes);
  if (ring_slots > 0) {
    text += "; host tier " + detail::shown_bytes(host_bytes) + " pinned, ring of " + std::to_string(ring_slots) +
            " slots, prefetch distance " + std::to_string(prefetch_distance);
  }
  if (!mixed.actions.empty()) {
    text += "; " + std::to_string(mixed.checkpoints[0]) + " device and " + std::to_string(mixed.checkpoints[1]) +
            " host checkpoints stored, " + std::to_string(recompute_steps) + " untaped steps";
  } else if (policy == tape_policy::recompute && snapshots > 0) {
    text += "; Revolve with " + std::to_string(snapshots) + " snapshots, " + std::to_string(recompute_steps) +
            " untaped steps";
  } else if (policy == tape_policy::recompute) {
    text += "; " + std::to_string(recompute_steps) + " layers rebuilt";
  }
  char overhead[96];
  if (!mixed.actions.empty()) {
    std::snprintf(overhead, sizeof overhead, "; predicted %.3f ms, estimated overhead %.3f ms", predicted_ms,
                  overhead_ms);
  } else {
    std::snprintf(overhead, sizeof overhead, "; estimated overhead %.3f ms", overhead_ms);
  }
  return text + overhead;
}

std::vector<schedule_action> chain_actions(tier_plan const& plan, std::size_t steps)
{
  TAPEFLOW_EXPECTS(steps > 0 && plan.tiers.size() == steps, "a chain's tier plan has one tier per step");
  if (!plan.mixed.actions.empty()) { return plan.mixed.actions; }
  if (plan.policy == tape_policy::recompute) { return revolve_actions(steps, plan.snapshots); }
  TAPEFLOW_EXPECTS(plan.count(tier::recompute) == 0, "a tier split without recomputation keeps every layer");
  std::vector<level> where(steps, level::device);
  for (std::size_t t = 0; t < steps; ++t) { where[t] = plan.tiers[t] == tier::host ? level::host : level::device; }
  return kept_actions(where, false);
}

}  // namespace tapeflow
