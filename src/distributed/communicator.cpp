// SPDX-License-Identifier: Apache-2.0
// single_rank, and what the ranks agree on (tapeflow/distributed/communicator.hpp).
#include <tapeflow/distributed/communicator.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace tapeflow::distributed {

void single_rank::allgather(void const* send, void* receive, std::size_t bytes)
{
  if (bytes != 0) { std::memmove(receive, send, bytes); }
}

exchange_ticket single_rank::start_exchange(std::vector<outgoing> const& sends, std::vector<incoming> const& receives)
{
  for (outgoing const& out : sends) {
    TAPEFLOW_EXPECTS(out.tag >= 0 && out.tag < 32767, "a message's tag must lie in [0, 32766], not " + std::to_string(out.tag));
  }
  std::vector<bool> taken(sends.size(), false);
  for (incoming const& in : receives) {
    TAPEFLOW_EXPECTS(in.peer == 0, "a single rank receives only from rank 0, not " + std::to_string(in.peer));
    auto const match = std::find_if(sends.begin(), sends.end(), [&](outgoing const& out) {
      return !taken[static_cast<std::size_t>(&out - sends.data())] && out.tag == in.tag;
    });
    TAPEFLOW_EXPECTS(match != sends.end(), "a receive of tag " + std::to_string(in.tag) +
                                             " has no send of that tag: a single rank would wait for ever");
    TAPEFLOW_EXPECTS(match->bytes == in.bytes, "a message of tag " + std::to_string(in.tag) + " sends " +
                                                 std::to_string(match->bytes) + " bytes to a receive of " +
                                                 std::to_string(in.bytes));
    taken[static_cast<std::size_t>(match - sends.begin())] = true;
    if (in.bytes != 0) { std::memmove(in.data, match->data, in.bytes); }
  }
  for (outgoing const& out : sends) {
    TAPEFLOW_EXPECTS(out.peer == 0, "a single rank sends only to rank 0, not " + std::to_string(out.peer));
  }
  TAPEFLOW_EXPECTS(std::all_of(taken.begin(), taken.end(), [](bool t) { return t; }),
                   "a send to itself has no receive of its tag");
  pending_.push_back(next_);
  return next_++;
}

void single_rank::finish_exchange(exchange_ticket ticket)
{
  auto const at = std::find(pending_.begin(), pending_.end(), ticket);
  TAPEFLOW_EXPECTS(at != pending_.end(), "exchange " + std::to_string(ticket) + " is not pending");
  pending_.erase(at);
}

namespace {

/// Every rank's `values` (checked to be the same length everywhere), rank after rank.
template <class T>
std::vector<T> gather_vectors(communicator& comm, std::vector<T> const& values)
{
  std::size_t const n = values.size();
  std::vector<std::size_t> const lengths = gather_all(comm, n);
  bool const same = std::all_of(lengths.begin(), lengths.end(), [&](std::size_t l) { return l == lengths[0]; });
  TAPEFLOW_EXPECTS(same, "ranks reduce lists of different lengths (rank 0: " + std::to_string(lengths[0]) +
                           ", this rank: " + std::to_string(n) + ")");
  std::vector<T> all(n * static_cast<std::size_t>(comm.size()));
  if (n != 0) { comm.allgather(values.data(), all.data(), n * sizeof(T)); }
  return all;
}

template <class T>
void sum_vectors_in_rank_order(communicator& comm, std::vector<T>& values)
{
  std::vector<T> const all = gather_vectors(comm, values);
  std::size_t const n = values.size();
  for (std::size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r) { sum += static_cast<double>(all[r * n + i]); }
    values[i] = static_cast<T>(sum);
  }
}

}  // namespace

std::size_t min_over_ranks(communicator& comm, std::size_t value)
{
  std::vector<std::size_t> const all = gather_all(comm, value);
  return *std::min_element(all.begin(), all.end());
}

double max_over_ranks(communicator& comm, double value)
{
  std::vector<double> const all = gather_all(comm, value);
  return *std::max_element(all.begin(), all.end());
}

void max_over_ranks(communicator& comm, std::vector<double>& values)
{
  std::vector<double> const all = gather_vectors(comm, values);
  std::size_t const n = values.size();
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), values.begin());
  for (std::size_t r = 1; r < static_cast<std::size_t>(comm.size()); ++r) {
    for (std::size_t i = 0; i < n; ++i) { values[i] = std::max(values[i], all[r * n + i]); }
  }
}

double sum_in_rank_order(communicator& comm, double value)
{
  double sum = 0;
  for (double const v : gather_all(comm, value)) { sum += v; }
  return sum;
}

void sum_in_rank_order(communicator& comm, std::vector<double>& values) { sum_vectors_in_rank_order(comm, values); }
void sum_in_rank_order(communicator& comm, std::vector<float>& values) { sum_vectors_in_rank_order(comm, values); }

void require_same(communicator& comm, std::uint64_t fingerprint, std::string const& what)
{
  std::vector<std::uint64_t> const all = gather_all(comm, fingerprint);
  std::string differ;
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) { differ += (differ.empty() ? "" : ", ") + std::to_string(r); }
  }
  if (!differ.empty()) {
    throw distributed_error(tapeflow::detail::where(__FILE__, __LINE__) + "the ranks disagree on " + what +
                              ": rank(s) " + differ + " differ from rank 0",
                            -1);
  }
}

}  // namespace tapeflow::distributed
