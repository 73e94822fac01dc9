// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/memory.hpp>
#include <tapeflow/tape.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace tapeflow {
namespace {

using rec4 = value_record<float, 4>;
using rec8 = value_record<double, 4>;

static_assert(is_record_v<rec4>);
static_assert(is_record_v<rec8> && sizeof(rec8) == 32);
static_assert(!is_record_v<float>);
struct unaligned_record { float v[4]; };
static_assert(!is_record_v<unaligned_record>);

TEST(Tape, LayersAreALifoWithWriterAndReaderViews)
{
  tape t(backend::cpu);
  EXPECT_TRUE(t.empty());
  for (std::size_t i = 0; i < 3; ++i) {
    layer& l = t.push<rec4>(10 + i, 4);
    EXPECT_EQ(l.index(), i);
    EXPECT_EQ(l.records(), 10 + i);
    EXPECT_EQ(l.layout().tiles(), (10 + i + 3) / 4);
    tape_writer<rec4> w = l.writer<rec4>();
    for (std::size_t r = 0; r < w.size(); ++r) {
      w.write(r, rec4{{float(i), float(r), 0.5f, -1.0f}});
    }
    l.commit();
  }
  EXPECT_EQ(t.depth(), 3u);
  EXPECT_EQ(t.bytes(), (10 + 11 + 12) * sizeof(rec4));
  for (std::size_t i = 3; i-- > 0;) {
    tape_reader<rec4> const r = t.top().reader<rec4>();
    EXPECT_EQ(r.layout().records, 10 + i);
    for (std::size_t tile = 0; tile < r.tiles(); ++tile) {
      for (std::size_t k = 0; k < r.tile_size(tile); ++k) {
        EXPECT_EQ(r.tile(tile)[k].values[0], float(i));
        EXPECT_EQ(r.tile(tile)[k].values[1], float(r.layout().first(tile) + k));
      }
    }
    t.pop();
  }
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.bytes(), 0u);
  EXPECT_EQ(t.peak_bytes(), (10 + 11 + 12) * sizeof(rec4));
  EXPECT_EQ(t.layers_pushed(), 3u);
}

TEST(Tape, LayerStateIsEnforced)
{
  tape t(backend::cpu);
  layer& l = t.push<rec4>(8, 4);
  EXPECT_THROW(static_cast<void>(l.reader<rec4>()), logic_error);  // read before commit
  l.commit();
  EXPECT_THROW(l.commit(), logic_error);                           // commit twice
  EXPECT_THROW(static_cast<void>(l.writer<rec4>()), logic_error);  // write after commit
  EXPECT_THROW(static_cast<void>(l.reader<rec8>()), logic_error);  // wrong record type
  EXPECT_NO_THROW(static_cast<void>(l.reader<rec4>()));
}

TEST(Tape, BadPushesAndEmptyPopsAreErrors)
{
  tape t(backend::cpu);
  EXPECT_THROW(t.push(16, 0, 4), logic_error);
  EXPECT_THROW(t.push(16, 10, 0), logic_error);
  EXPECT_THROW(t.push(12, 10, 4), logic_error);
  EXPECT_THROW(t.push(16, static_cast<std::size_t>(-1) / 8, 4), logic_error);
  EXPECT_THROW(t.pop(), logic_error);
  EXPECT_THROW(static_cast<void>(t.top()), logic_error);
  EXPECT_TRUE(t.empty());
}

TEST(Tape, BudgetIsNeverExceededAndAFailedPushChangesNothing)
{
  tape t(backend::cpu, tape_options{3 * 10 * sizeof(rec4)});
  for (int i = 0; i < 3; ++i) { t.push<rec4>(10, 4).commit(); }
  std::size_t const before = device_memory_usage(backend::cpu).current_bytes;
  EXPECT_THROW(t.push<rec4>(1, 1), budget_error);
  EXPECT_EQ(t.depth(), 3u);
  EXPECT_EQ(t.bytes(), t.budget_bytes());
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, before);
  t.pop();
  EXPECT_NO_THROW(t.push<rec4>(10, 4));
  EXPECT_LE(t.peak_bytes(), t.budget_bytes());
}

TEST(Tape, AnAdoptedBufferIsACommittedLayerWithItsBytes)
{
  tape t(backend::cpu, tape_options{2 * 10 * sizeof(rec4)});
  device_buffer storage(backend::cpu, 10 * sizeof(rec4), {});
  std::vector<rec4> written(10);
  for (std::size_t r = 0; r < written.size(); ++r) { written[r] = rec4{{float(r), 2.0f, 3.0f, 4.0f}}; }
  storage.upload(written.data(), storage.size(), {});
  void const* const address = storage.data();
  layer& l = t.adopt<rec4>(10, 4, std::move(storage));
  EXPECT_EQ(storage.size(), 0u);
  EXPECT_EQ(l.storage().data(), address);  // the buffer itself, not a copy
  EXPECT_EQ(t.bytes(), 10 * sizeof(rec4));
  EXPECT_THROW(static_cast<void>(l.writer<rec4>()), logic_error);  // already committed
  tape_reader<rec4> const r = l.reader<rec4>();
  EXPECT_EQ(r.tile(2)[1].values[0], 9.0f);
  EXPECT_EQ(t.layers_pushed(), 1u);
  t.pop();
  EXPECT_EQ(t.bytes(), 0u);
}

TEST(Tape, BadAdoptionsChangeNothing)
{
  tape t(backend::cpu, tape_options{10 * sizeof(rec4)});
  device_buffer small(backend::cpu, 9 * sizeof(rec4), {});
  EXPECT_THROW(t.adopt<rec4>(10, 4, std::move(small)), logic_error);  // fewer bytes than the records
  EXPECT_EQ(small.size(), 9 * sizeof(rec4));
  device_buffer big(backend::cpu, 11 * sizeof(rec4), {});
  EXPECT_THROW(t.adopt<rec4>(11, 4, std::move(big)), budget_error);
  EXPECT_EQ(big.size(), 11 * sizeof(rec4));  // still the caller's
  EXPECT_THROW(t.adopt<rec4>(0, 4, std::move(big)), logic_error);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.bytes(), 0u);
  EXPECT_NO_THROW(t.adopt<rec4>(10, 4, std::move(big)));  // a larger buffer holds the records
}

TEST(Memory, BuffersAreAccountedAndReleased)
{
  memory_usage const before = device_memory_usage(backend::cpu);
  {
    device_buffer a(backend::cpu, 1000, {});
    device_buffer b(backend::cpu, 24, {});
    EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, before.current_bytes + 1024);
    device_buffer c = std::move(a);
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(c.size(), 1000u);
    std::vector<unsigned char> host(1000, 7);
    c.upload(host.data(), host.size(), {});
    c.fill(0xAB, {});
    c.download(host.data(), host.size(), {});
    EXPECT_EQ(host[999], 0xAB);
    EXPECT_THROW(c.upload(host.data(), 10, {}, 995), logic_error);
    EXPECT_THROW(b.copy_from(c, {}), logic_error);
    c.fill(0x11, 10, 20, {});  // bytes [10, 30) only
    c.download(host.data(), host.size(), {});
    EXPECT_EQ(host[9], 0xAB);
    EXPECT_EQ(host[10], 0x11);
    EXPECT_EQ(host[29], 0x11);
    EXPECT_EQ(host[30], 0xAB);
    EXPECT_THROW(c.fill(0, 990, 11, {}), logic_error);
    b.copy_from(c, 20, {});  // the first 20 bytes of a larger buffer
    std::vector<unsigned char> first(24, 0);
    b.download(first.data(), first.size(), {});
    EXPECT_EQ(first[9], 0xAB);
    EXPECT_EQ(first[19], 0x11);
    EXPECT_THROW(b.copy_from(c, 25, {}), logic_error);
  }
  EXPECT_EQ(device_memory_usage(backend::cpu).current_bytes, before.current_bytes);
  EXPECT_GE(device_memory_usage(backend::cpu).peak_bytes, before.current_bytes + 1024);
  EXPECT_THROW(device_buffer(backend::cpu, 0, {}), logic_error);
}

TEST(Tape, PeakBytesAreTheMostEverHeld)
{
  tape t(backend::cpu);
  t.push<rec4>(10, 4).commit();
  t.push<rec4>(11, 4).commit();
  t.pop();
  t.push<rec4>(1, 1).commit();  // fewer bytes than before the pop
  EXPECT_EQ(t.bytes(), (10 + 1) * sizeof(rec4));
  EXPECT_EQ(t.peak_bytes(), (10 + 11) * sizeof(rec4));
}

}  // namespace
}  // namespace tapeflow
