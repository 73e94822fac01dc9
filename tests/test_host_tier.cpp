// SPDX-License-Identifier: Apache-2.0
// The host tier on its own (detail/host_tier.hpp): layers written through a ring of device slots
// come back in the order they are asked for, prefetches stop at the slots there are, pinned memory
// is pooled, checkpoints round-trip, and misuse is a logic_error. The chain's use of it (every
// policy that keeps anything on the host) is tested in test_tiers.cpp and the GPU tests; these
// cases pin the machinery's own contract. The CPU backend always (its copy streams are worker
// threads, so copies really overlap; a slot there is host memory the test can read); the emulated
// device (lazy streams run a copy only when something waits for it, so a missing wait shows
// deterministically; its slots are host memory too); a GPU where there is one (its slots are
// device memory: the layers' bytes are checked through the chain's gradients instead).
#include "gpu_backend.hpp"

#include <tapeflow/detail/host_tier.hpp>
#include <tapeflow/error.hpp>
#include <tapeflow/fault.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/stream.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

using detail::host_tier;

constexpr std::size_t layer = 4096;
constexpr std::size_t steps = 6;

class HostTier : public ::testing::TestWithParam<backend> {
 protected:
  void SetUp() override
  {
    TAPEFLOW_REQUIRE_DEVICE(GetParam());
    kind_ = GetParam();
    if (kind_ != backend::cpu) { stream_.emplace(kind_); }  // CPU steps run on the default stream
  }
  [[nodiscard]] stream_view s() const { return stream_ ? stream_->view() : stream_view{}; }

  /// That the slot at `p` holds `bytes` bytes of `value` (once the stream is done), where a slot
  /// is memory the host can read: the CPU backend's, and the emulated device's.
  void expect_filled(void const* p, std::size_t bytes, unsigned char value, std::string const& what)
  {
#if !defined(TAPEFLOW_EMULATED)
    if (kind_ != backend::cpu) { return; }
#endif
    synchronize(kind_, s());
    auto const* b = static_cast<unsigned char const*>(p);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bytes; ++i) { wrong += b[i] != value ? 1 : 0; }
    EXPECT_EQ(wrong, 0u) << what;
  }

  /// One gradient's worth: every step's layer written (filled with 0x10 + step), then read back
  /// last-first with up to `distance` prefetches queued ahead.
  void write_and_read_back(host_tier& h, std::size_t distance)
  {
    h.begin(s());
    for (std::size_t t = 0; t < steps; ++t) {
      void* slot = h.begin_write(t, layer, s());
      ASSERT_NE(slot, nullptr);
      h.fill_slot(t, static_cast<unsigned char>(0x10 + t), s());
      h.end_write(t, s());
    }
    EXPECT_EQ(h.host_bytes(), steps * layer);
    std::size_t next = steps;  // the next layer to queue, counting down
    auto queue_ahead = [&] {
      while (next > 0 && h.queued() < distance && h.prefetch(next - 1)) { --next; }
    };
    queue_ahead();
    for (std::size_t t = steps; t-- > 0;) {
      if (next > t) { next = t; }  // t itself is read now, prefetched or not
      void const* slot = h.begin_read(t, s());
      queue_ahead();
      expect_filled(slot, layer, static_cast<unsigned char>(0x10 + t), "layer " + std::to_string(t));
      h.end_read(t, s());
    }
    h.end(s());
    EXPECT_EQ(h.host_bytes(), 0u);
    EXPECT_EQ(h.prefetches(), steps);
  }

  backend kind_{backend::cpu};
  std::optional<stream> stream_;
};

std::string backend_name(::testing::TestParamInfo<backend> const& param_info)
{
  return std::string{to_string(param_info.param)};
}

TEST_P(HostTier, LayersComeBackWithTheirBytesThroughARingOfSlots)
{
  for (std::size_t slots : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(slots) + " slots");
    host_tier h(kind_, layer, steps, slots, false);
    write_and_read_back(h, slots - 1);
    EXPECT_EQ(h.ring_bytes(), slots * layer);
    EXPECT_EQ(h.peak_host_bytes(), steps * layer);
    if (kind_ == backend::cpu) {
      // A slow copy engine changes when copies land, not what comes back: a prefetch waits for its
      // layer's copy out, a write for its slot's last copy.
      fault::scoped_cpu_copy_delay const slow(std::chrono::milliseconds(1));
      write_and_read_back(h, slots - 1);
    }
  }
}

TEST_P(HostTier, PrefetchesStopAtTheSlotsThereAre)
{
  host_tier h(kind_, layer, steps, 2, false);
  h.begin(s());
  for (std::size_t t = 0; t < steps; ++t) {
    static_cast<void>(h.begin_write(t, layer, s()));
    h.fill_slot(t, static_cast<unsigned char>(0x10 + t), s());  // a layer is written before it goes out
    h.end_write(t, s());
  }
  EXPECT_TRUE(h.prefetch(5));
  EXPECT_TRUE(h.prefetch(5));  // already queued: not queued twice
  EXPECT_TRUE(h.prefetch(4));
  EXPECT_EQ(h.queued(), 2u);
  EXPECT_FALSE(h.prefetch(3)) << "both slots hold a prefetched layer";
  EXPECT_EQ(h.prefetches(), 2u);
  // Reading a layer that has no slot while both are taken is refused, not a wait that never ends.
  EXPECT_THROW(static_cast<void>(h.begin_read(3, s())), logic_error);
  static_cast<void>(h.begin_read(5, s()));
  EXPECT_EQ(h.queued(), 1u);
  EXPECT_FALSE(h.prefetch(3)) << "one slot is being read, the other holds layer 4";
  h.end_read(5, s());
  EXPECT_TRUE(h.prefetch(3));
  for (std::size_t t : {4, 3}) {
    static_cast<void>(h.begin_read(t, s()));
    h.end_read(t, s());
  }
  h.end(s());
  EXPECT_EQ(h.prefetches(), 3u);
  EXPECT_EQ(h.host_bytes(), 3 * layer) << "layers 0, 1 and 2 were never read back";
}

TEST_P(HostTier, APrefetchIntoASlotWaitsForTheSlotsLastCopyOut)
{
  // Layer 0 comes back first, into the slot layer 4 was written into, while layer 4's copy out
  // of it may still be queued behind the others: the prefetch must not overwrite the slot before
  // that copy has read it (layer 4 would come back with layer 0's bytes). A slow copy engine on
  // the CPU keeps the copies out in flight.
  std::optional<fault::scoped_cpu_copy_delay> slow;
  if (kind_ == backend::cpu) { slow.emplace(std::chrono::milliseconds(2)); }
  host_tier h(kind_, layer, steps, 2, false);
  h.begin(s());
  for (std::size_t t = 0; t < steps; ++t) {
    static_cast<void>(h.begin_write(t, layer, s()));
    h.fill_slot(t, static_cast<unsigned char>(0x10 + t), s());
    h.end_write(t, s());
  }
  for (std::size_t t : {0, 5, 4, 3, 2, 1}) {
    void const* slot = h.begin_read(t, s());
    expect_filled(slot, layer, static_cast<unsigned char>(0x10 + t), "layer " + std::to_string(t));
    h.end_read(t, s());
  }
  h.end(s());
}

TEST_P(HostTier, ASecondGradientAllocatesNothing)
{
  host_tier h(kind_, layer, steps, 2, false);
  write_and_read_back(h, 1);
  memory_usage const device_before = device_memory_usage(kind_);
  memory_usage const host_before = host_memory_usage(kind_);
  write_and_read_back(h, 1);
  EXPECT_EQ(device_memory_usage(kind_).allocations, device_before.allocations);
  EXPECT_EQ(host_memory_usage(kind_).allocations, host_before.allocations);
  EXPECT_EQ(host_memory_usage(kind_).allocated_bytes, host_before.allocated_bytes);
}

TEST_P(HostTier, CheckpointsRoundTripThroughPinnedMemory)
{
  host_tier h(kind_, layer, steps, 2, false);
  std::size_t const bytes = 3000;
  std::vector<unsigned char> values(bytes);
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  for (unsigned char& v : values) { v = static_cast<unsigned char>(rng()); }
  device_buffer state(kind_, bytes, s());
  state.upload(values.data(), bytes, s());
  h.begin(s());
  h.store(2, state, s());
  h.store(4, state, s());
  state.fill(0, s());
  h.restore(2, state, s());
  std::vector<unsigned char> back(bytes);
  state.download(back.data(), bytes, s());
  EXPECT_EQ(back, values);
  EXPECT_EQ(h.host_bytes(), 2 * bytes);
  h.release(2);
  h.release(4);
  EXPECT_EQ(h.host_bytes(), 0u);
  EXPECT_EQ(h.peak_host_bytes(), 2 * bytes);
  h.end(s());
}

TEST_P(HostTier, MisuseIsALogicError)
{
  EXPECT_THROW(host_tier(kind_, layer, steps, 0, false), logic_error);
  host_tier h(kind_, layer, steps, 2, false);
  h.begin(s());
  EXPECT_THROW(static_cast<void>(h.prefetch(1)), logic_error) << "prefetch before the layer was written";
  EXPECT_THROW(static_cast<void>(h.begin_write(1, layer + 1, s())), logic_error) << "larger than a slot";
  EXPECT_THROW(static_cast<void>(h.begin_write(steps, layer, s())), logic_error) << "a step past the chain";
  static_cast<void>(h.begin_write(1, layer, s()));
  h.fill_slot(1, 0x11, s());
  EXPECT_THROW(static_cast<void>(h.begin_read(1, s())), logic_error) << "read while it is written";
  h.end_write(1, s());
  EXPECT_THROW(h.end_write(1, s()), logic_error) << "ended twice";
  EXPECT_THROW(static_cast<void>(h.begin_write(1, layer, s())), logic_error) << "written twice";
  EXPECT_THROW(h.end_read(1, s()), logic_error) << "end_read before begin_read";
  static_cast<void>(h.begin_read(1, s()));
  EXPECT_THROW(static_cast<void>(h.begin_read(1, s())), logic_error) << "read twice at once";
  h.end_read(1, s());
  device_buffer state(kind_, 64, s());
  state.fill(1, s());
  EXPECT_THROW(h.restore(3, state, s()), logic_error) << "no checkpoint of step 3";
  EXPECT_THROW(h.release(3), logic_error);
  h.store(3, state, s());
  EXPECT_THROW(h.store(3, state, s()), logic_error) << "stored twice";
  EXPECT_THROW(h.store(steps, state, s()), logic_error);
  h.release(3);
  h.end(s());
}

INSTANTIATE_TEST_SUITE_P(Backends, HostTier, ::testing::Values(backend::cpu, backend::cuda), backend_name);

// The compute stream's waits are timed when asked: a slow copy engine is a CPU backend setting.
class HostTierOnTheCpu : public HostTier {
 protected:
  void SetUp() override { kind_ = backend::cpu; }
};

TEST_F(HostTierOnTheCpu, StallsAreTimedWhenAsked)
{
  host_tier h(kind_, layer, steps, 1, true);
  fault::scoped_cpu_copy_delay const slow(std::chrono::milliseconds(2));
  write_and_read_back(h, 0);
  // One slot: every write waits for the previous layer's 2 ms copy out, every read for its own
  // 2 ms copy back.
  EXPECT_GT(h.stall_ms(), 8.0);
  host_tier untimed(kind_, layer, steps, 1, false);
  write_and_read_back(untimed, 0);
  EXPECT_EQ(untimed.stall_ms(), 0.0);
}

TEST_P(HostTier, ALayerWrittenRightAfterAnotherGoesToTheNextSlot)
{
  // Slots are taken round the ring: a layer written while the one before it is still being copied
  // out goes to the other slot, so its write need not wait for that copy.
  host_tier h(kind_, layer, steps, 2, false);
  h.begin(s());
  void* previous = nullptr;
  for (std::size_t t = 0; t < steps; ++t) {
    void* slot = h.begin_write(t, layer, s());
    EXPECT_NE(slot, previous) << "layer " << t;
    previous = slot;
    h.fill_slot(t, static_cast<unsigned char>(0x10 + t), s());
    h.end_write(t, s());
  }
  for (std::size_t t = steps; t-- > 0;) {
    static_cast<void>(h.begin_read(t, s()));
    h.end_read(t, s());
  }
  h.end(s());
}

}  // namespace
}  // namespace tapeflow
