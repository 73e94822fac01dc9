// SPDX-License-Identifier: Apache-2.0
// The emulated device itself (docs/emulation.md): that its barriers, votes, atomics, asynchronous
// copies, streams, graphs and errors behave as the CUDA semantics it stands in for — and that it
// turns the bugs those semantics allow (a missing barrier, a read before a copy's wait, a host read
// before a stream's wait) into wrong results or typed errors, deterministically.
#include <tapeflow/device/launch.cuh>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/emulated/cuda.hpp>
#include <tapeflow/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace tapeflow {
namespace {

/// Device memory for a test, freed at scope exit.
template <class T>
struct device_array {
  explicit device_array(std::size_t n) : size(n)
  {
    void* p = nullptr;
    TAPEFLOW_CUDA_TRY(cudaMalloc(&p, n * sizeof(T)));
    data = static_cast<T*>(p);
  }
  ~device_array() { static_cast<void>(cudaFree(data)); }
  device_array(device_array const&) = delete;
  device_array& operator=(device_array const&) = delete;

  std::vector<T> download() const
  {
    std::vector<T> host(size);
    TAPEFLOW_CUDA_TRY(cudaMemcpy(host.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* data{nullptr};
  std::size_t size{0};
};

/// Restores the emulator's settings at scope exit.
struct with_settings {
  explicit with_settings(emu::settings const& s) : previous(emu::configure(s)) {}
  ~with_settings() { emu::configure(previous); }
  with_settings(with_settings const&) = delete;
  with_settings& operator=(with_settings const&) = delete;
  emu::settings previous;
};

// Each thread writes its slot of shared memory, then reads its neighbour's.
template <bool Barrier>
__global__ void rotate_kernel(unsigned* out)
{
  unsigned* const slots = device::dynamic_shared<unsigned>();
  slots[threadIdx.x] = threadIdx.x * 3U + 1U;
  if constexpr (Barrier) { __syncthreads(); }
  out[blockIdx.x * blockDim.x + threadIdx.x] = slots[(threadIdx.x + 1U) % blockDim.x];
}

TEST(Emulator, ABarrierOrdersSharedMemoryAndItsAbsenceShows)
{
  unsigned const threads = 64;
  unsigned const blocks = 3;
  device_array<unsigned> out(threads * blocks);
  device::launch(rotate_kernel<true>, blocks, threads, threads * sizeof(unsigned), {}, out.data);
  std::vector<unsigned> const good = out.download();
  for (unsigned i = 0; i < threads * blocks; ++i) { EXPECT_EQ(good[i], ((i % threads + 1U) % threads) * 3U + 1U) << i; }

  // Without the barrier a thread reads its neighbour's slot before the neighbour ran: the
  // dynamic shared memory still holds the emulator's 0xFF fill.
  device::launch(rotate_kernel<false>, blocks, threads, threads * sizeof(unsigned), {}, out.data);
  std::vector<unsigned> const racy = out.download();
  EXPECT_EQ(std::count(racy.begin(), racy.end(), 0xFFFFFFFFU), static_cast<long>(blocks * (threads - 1)));
}

// Thread order of arrival at an atomic, as tickets.
__global__ void ticket_kernel(unsigned* counter, unsigned* tickets)
{
  tickets[threadIdx.x] = atomicAdd(counter, 1U);
}

std::vector<unsigned> tickets_with(emu::settings const& s)
{
  with_settings const scoped(s);
  device_array<unsigned> counter(1);
  device_array<unsigned> tickets(128);
  TAPEFLOW_CUDA_TRY(cudaMemset(counter.data, 0, sizeof(unsigned)));
  device::launch(ticket_kernel, 1, 128, 0, {}, counter.data, tickets.data);
  return tickets.download();
}

TEST(Emulator, TheRandomScheduleIsSeededAndInterleavesThreads)
{
  emu::settings s = emu::current_settings();
  s.random_schedule = false;
  std::vector<unsigned> const sequential = tickets_with(s);
  std::vector<unsigned> identity(128);
  std::iota(identity.begin(), identity.end(), 0U);
  EXPECT_EQ(sequential, identity) << "the sequential schedule runs threads in order";

  s.random_schedule = true;
  s.seed = 11;
  std::vector<unsigned> const a = tickets_with(s);
  std::vector<unsigned> const again = tickets_with(s);
  s.seed = 12;
  std::vector<unsigned> const b = tickets_with(s);
  EXPECT_EQ(a, again) << "one seed, one interleaving";
  EXPECT_NE(a, identity);
  EXPECT_NE(a, b);
  std::vector<unsigned> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity) << "every ticket handed out once";
}

// A trap in one thread of one block.
__global__ void trap_kernel(unsigned* out)
{
  if (blockIdx.x == 2 && threadIdx.x == 5) { __trap(); }
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Lanes of warp 0 wait at a vote while thread 0 waits at a barrier: neither can complete.
__global__ void deadlock_kernel(unsigned* out)
{
  if (threadIdx.x == 0) {
    __syncthreads();
  } else if (threadIdx.x < 32) {
    out[threadIdx.x] = __ballot_sync(0xFFFFFFFFU, 1);
  }
}

/// Waits for the launches before, which must have failed with a trap whose report holds `report`;
/// clears the error.
void expect_trap(std::string const& report, char const* why)
{
  try {
    TAPEFLOW_CUDA_TRY(cudaDeviceSynchronize());
    ADD_FAILURE() << why;
  } catch (platform_error const& e) {
    EXPECT_EQ(e.name(), "cudaErrorLaunchFailure");
    EXPECT_NE(std::string{e.what()}.find(report), std::string::npos) << e.what();
  }
  emu::clear_error();
}

TEST(Emulator, TrapsAndDeadlocksAreTypedErrorsNamingTheThread)
{
  device_array<unsigned> out(4 * 32);
  device::launch(trap_kernel, 4, 32, 0, {}, out.data);
  expect_trap("__trap() in block (2,0,0), thread (5,0,0)", "a trap must fail the launch");

  device::launch(deadlock_kernel, 1, 64, 0, {}, out.data);
  try {
    TAPEFLOW_CUDA_TRY(cudaDeviceSynchronize());
    ADD_FAILURE() << "a deadlock must fail the launch";
  } catch (platform_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("deadlock in block (0,0,0)"), std::string::npos) << what;
    EXPECT_NE(what.find("waits at __syncthreads"), std::string::npos) << what;
    EXPECT_NE(what.find("waits at __ballot_sync"), std::string::npos) << what;
  }
  emu::clear_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "usable again once the error is cleared";
}

TEST(Emulator, BadLaunchShapesAreTypedErrors)
{
  device_array<unsigned> out(32);
  // > 1024 threads: the launch path refuses it from the kernel's attributes, and the emulator's
  // own launch (what a launch that bypassed the helper would reach) with cudaErrorInvalidConfiguration.
  EXPECT_THROW(device::launch(trap_kernel, 1, 2048, 0, {}, out.data), logic_error);
  emu::launch_kernel(reinterpret_cast<void const*>(&trap_kernel), dim3(1), dim3(2048), 0, nullptr, [] {});
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // Past 48 KiB of shared memory only as far as the kernel opted in: the launch path opts in (up
  // to the device's 227 KiB), a launch that bypassed it is refused.
  EXPECT_NO_THROW(device::launch(rotate_kernel<true>, 1, 32, 64 * 1024, {}, out.data));
  EXPECT_THROW(device::launch(rotate_kernel<true>, 1, 32, 228 * 1024, {}, out.data), platform_error);
  emu::launch_kernel(reinterpret_cast<void const*>(&trap_kernel), dim3(1), dim3(32), 64 * 1024, nullptr, [] {});
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "a kernel that did not opt in";
  EXPECT_THROW(device::launch(trap_kernel, 0, 32, 0, {}, out.data), logic_error);          // an empty grid
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Votes: lanes with an odd index vote yes, in a block with a partial last warp.
__global__ void vote_kernel(unsigned* out)
{
  unsigned const lane = threadIdx.x % 32U;
  unsigned const warp_lanes = min(32U, blockDim.x - (threadIdx.x - lane));
  unsigned const mask = warp_lanes == 32U ? 0xFFFFFFFFU : (1U << warp_lanes) - 1U;
  out[threadIdx.x] = __ballot_sync(mask, (lane % 2U) == 1U);
}

TEST(Emulator, BallotsGatherTheWarpsVotes)
{
  device_array<unsigned> out(48);
  device::launch(vote_kernel, 1, 48, 0, {}, out.data);
  std::vector<unsigned> const got = out.download();
  for (unsigned t = 0; t < 32; ++t) { EXPECT_EQ(got[t], 0xAAAAAAAAU) << t; }
  for (unsigned t = 32; t < 48; ++t) { EXPECT_EQ(got[t], 0xAAAAU) << t; }
}

// Every lane votes alone (its own mask), as fully diverged lanes do.
__global__ void lone_vote_kernel(unsigned* out)
{
  unsigned const lane = threadIdx.x % 32U;
  out[threadIdx.x] = __ballot_sync(1U << lane, lane % 3U == 0U);
}

TEST(Emulator, LanesVotingApartKeepTheirOwnResultsUnderEverySchedule)
{
  for (std::uint64_t seed : {1U, 2U, 3U, 4U}) {
    emu::settings s = emu::current_settings();
    s.random_schedule = true;
    s.seed = seed;
    with_settings const scoped(s);
    device_array<unsigned> out(96);
    device::launch(lone_vote_kernel, 1, 96, 0, {}, out.data);
    std::vector<unsigned> const got = out.download();
    for (unsigned t = 0; t < 96; ++t) {
      unsigned const lane = t % 32U;
      EXPECT_EQ(got[t], lane % 3U == 0U ? 1U << lane : 0U) << "seed " << seed << ", thread " << t;
    }
  }
}

// An asynchronous copy into shared memory, read before and after its wait.
__global__ void async_copy_kernel(unsigned const* in, unsigned* before, unsigned* after)
{
  unsigned* const slot = device::dynamic_shared<unsigned>();
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  unsigned const i = threadIdx.x;
  pipe.producer_acquire();
  cuda::memcpy_async(slot + 4 * i, in + 4 * i, cuda::aligned_size_t<16>(16), pipe);
  pipe.producer_commit();
  before[i] = slot[4 * i];
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  after[i] = slot[4 * i];
}

TEST(Emulator, AnAsyncCopyLandsOnlyAtItsWait)
{
  std::vector<unsigned> host(4 * 32);
  std::iota(host.begin(), host.end(), 100U);
  device_array<unsigned> in(host.size());
  device_array<unsigned> before(32);
  device_array<unsigned> after(32);
  TAPEFLOW_CUDA_TRY(cudaMemcpy(in.data, host.data(), host.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
  device::launch(async_copy_kernel, 1, 32, host.size() * sizeof(unsigned), {}, in.data, before.data, after.data);
  std::vector<unsigned> const b = before.download();
  std::vector<unsigned> const a = after.download();
  for (unsigned t = 0; t < 32; ++t) {
    EXPECT_EQ(b[t], 0xFFFFFFFFU) << "read before the wait: the poisoned slot";
    EXPECT_EQ(a[t], 100U + 4U * t);
  }
}

// Thread 3's copy is committed but never waited for: nothing would tell a GPU's thread when it
// lands.
__global__ void unwaited_copy_kernel(unsigned const* in)
{
  unsigned* const slot = device::dynamic_shared<unsigned>();
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  pipe.producer_acquire();
  cuda::memcpy_async(slot + 4 * threadIdx.x, in + 4 * threadIdx.x, cuda::aligned_size_t<16>(16), pipe);
  pipe.producer_commit();
  if (threadIdx.x != 3) { cuda::pipeline_consumer_wait_prior<0>(pipe); }
}

TEST(Emulator, APipelineThatGoesAwayWithCopiesInFlightTraps)
{
  device_array<unsigned> in(4 * 32);
  TAPEFLOW_CUDA_TRY(cudaMemset(in.data, 0, 4 * 32 * sizeof(unsigned)));
  device::launch(unwaited_copy_kernel, 1, 32, 4 * 32 * sizeof(unsigned), {}, in.data);
  expect_trap("__trap() in block (0,0,0), thread (3,0,0)", "copies never waited for must fail the launch");
}

// The bulk-copy engine: thread 0 copies, everyone waits on the barrier's phase.
__global__ void bulk_copy_kernel(unsigned const* in, unsigned* out, unsigned count)
{
  using barrier = cuda::barrier<cuda::thread_scope_block>;
  __shared__ barrier full;
  unsigned* const slot = device::dynamic_shared<unsigned>();
  if (threadIdx.x == 0) { init(&full, 1); }
  __syncthreads();
  for (unsigned round = 0; round < 3; ++round) {
    if (threadIdx.x == 0) {
      cuda::device::memcpy_async_tx(slot, in + round * count, cuda::aligned_size_t<16>(count * sizeof(unsigned)), full);
      static_cast<void>(cuda::device::barrier_arrive_tx(full, 1, static_cast<std::ptrdiff_t>(count * sizeof(unsigned))));
    }
    full.wait_parity((round & 1U) != 0);
    out[round * blockDim.x + threadIdx.x] = slot[threadIdx.x];
    __syncthreads();
  }
}

TEST(Emulator, BulkCopiesCompleteTheirBarriersPhase)
{
  unsigned const count = 64;
  std::vector<unsigned> host(3 * count);
  std::iota(host.begin(), host.end(), 7U);
  device_array<unsigned> in(host.size());
  device_array<unsigned> out(host.size());
  TAPEFLOW_CUDA_TRY(cudaMemcpy(in.data, host.data(), host.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
  device::launch(bulk_copy_kernel, 1, count, count * sizeof(unsigned), {}, in.data, out.data, count);
  EXPECT_EQ(out.download(), host);
}

TEST(Emulator, LazyStreamsRunWorkOnlyWhenSomethingWaitsForIt)
{
  emu::settings s = emu::current_settings();
  s.lazy_streams = true;
  with_settings const scoped(s);
  device_array<int> dev(4);
  TAPEFLOW_CUDA_TRY(cudaMemset(dev.data, 0x11, 4 * sizeof(int)));
  void* pinned = nullptr;
  TAPEFLOW_CUDA_TRY(cudaMallocHost(&pinned, 4 * sizeof(int)));
  std::memset(pinned, 0, 4 * sizeof(int));
  cudaStream_t stream = nullptr;
  TAPEFLOW_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  TAPEFLOW_CUDA_TRY(cudaMemcpyAsync(pinned, dev.data, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream));
  EXPECT_EQ(static_cast<int*>(pinned)[0], 0) << "a host read before the wait sees the old bytes";
  cudaEvent_t done = nullptr;
  TAPEFLOW_CUDA_TRY(cudaEventCreate(&done));
  TAPEFLOW_CUDA_TRY(cudaEventRecord(done, stream));
  TAPEFLOW_CUDA_TRY(cudaEventSynchronize(done));
  EXPECT_EQ(static_cast<int*>(pinned)[0], 0x11111111);

  // Pageable memory: the copy completes before cudaMemcpyAsync returns, as in CUDA.
  std::vector<int> pageable(4, 0);
  TAPEFLOW_CUDA_TRY(cudaMemcpyAsync(pageable.data(), dev.data, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream));
  EXPECT_EQ(pageable[0], 0x11111111);

  TAPEFLOW_CUDA_TRY(cudaEventDestroy(done));
  TAPEFLOW_CUDA_TRY(cudaStreamDestroy(stream));
  TAPEFLOW_CUDA_TRY(cudaFreeHost(pinned));
}

TEST(Emulator, CopiesAreCheckedAgainstTheMemoryTheyName)
{
  device_array<int> dev(4);
  std::vector<int> host(8, 1);
  EXPECT_EQ(cudaMemcpy(dev.data, host.data(), 8 * sizeof(int), cudaMemcpyHostToDevice), cudaErrorInvalidValue)
    << "past the end of the allocation";
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 4, sizeof(int), cudaMemcpyDeviceToHost), cudaErrorInvalidValue)
    << "a host pointer named as device memory";
  EXPECT_EQ(cudaMemcpy(dev.data, host.data(), 4 * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  std::size_t free = 0;
  std::size_t total = 0;
  TAPEFLOW_CUDA_TRY(cudaMemGetInfo(&free, &total));
  void* huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, total + 1), cudaErrorMemoryAllocation);
}

__global__ void add_kernel(int* counter, int amount) { atomicAdd(counter, amount); }

TEST(Emulator, GraphsReplayWhatWasCaptured)
{
  device_array<int> counter(1);
  TAPEFLOW_CUDA_TRY(cudaMemset(counter.data, 0, sizeof(int)));
  cudaStream_t stream = nullptr;
  TAPEFLOW_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  TAPEFLOW_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  device::launch(add_kernel, 2, 32, 0, stream_view{stream}, counter.data, 1);
  cudaGraph_t graph = nullptr;
  TAPEFLOW_CUDA_TRY(cudaStreamEndCapture(stream, &graph));
  EXPECT_EQ(counter.download()[0], 0) << "capturing runs nothing";
  cudaGraphExec_t exec = nullptr;
  TAPEFLOW_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) { TAPEFLOW_CUDA_TRY(cudaGraphLaunch(exec, stream)); }
  TAPEFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  EXPECT_EQ(counter.download()[0], 3 * 64);
  TAPEFLOW_CUDA_TRY(cudaGraphExecDestroy(exec));
  TAPEFLOW_CUDA_TRY(cudaGraphDestroy(graph));
  TAPEFLOW_CUDA_TRY(cudaStreamDestroy(stream));
}

TEST(Emulator, BlocksRunOnSeveralHostThreads)
{
  emu::settings s = emu::current_settings();
  s.random_schedule = false;
  s.threads = 3;
  with_settings const scoped(s);
  device_array<int> counter(1);
  TAPEFLOW_CUDA_TRY(cudaMemset(counter.data, 0, sizeof(int)));
  emu::counters const before = emu::current_counters();
  device::launch(add_kernel, 200, 64, 0, {}, counter.data, 2);
  EXPECT_EQ(counter.download()[0], 200 * 64 * 2);
  EXPECT_EQ(emu::current_counters().blocks - before.blocks, 200U);
}

}  // namespace
}  // namespace tapeflow
