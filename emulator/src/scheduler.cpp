// SPDX-License-Identifier: Apache-2.0
// The emulated device's blocks: each block runs on one host thread as blockDim fibers, one per
// CUDA thread, switched cooperatively. A fiber runs until it must wait (__syncthreads, a warp vote,
// a barrier phase, a pipeline) or, under the random schedule, until a yield point chooses to switch;
// the scheduler then picks the next fiber that can run: the next in thread order (sequential
// schedule) or a seeded random one. A block in which no live fiber can run is a deadlock.
//
// One file of a little under 500 lines: the fibers' switching, the block pool that runs blocks on
// host threads, and the waits a kernel calls (__syncthreads, votes, yield points, __trap) all read
// and write the same per-thread slots of the running block, which stay private to this file.
#include "emulator.hpp"
#include "fiber.hpp"

#include <tapeflow/emulated/device.hpp>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

namespace tapeflow::emu {
namespace detail {
namespace {

struct trap_signal {};  // thrown by __trap() inside a fiber, caught at its entry

enum class fiber_state { ready, waiting, done };

struct thread_slot {
  context ctx;
  std::unique_ptr<fiber_stack> stack;
  uint3 idx{};
  unsigned linear{0};
  fiber_state state{fiber_state::done};
  // What a waiting fiber waits for.
  bool (*ready)(void const*){nullptr};
  void const* ready_context{nullptr};
  char const* waits_on{nullptr};
};

/// A warp's vote in progress: who has arrived, how they voted; each lane's result once it is done.
struct warp_vote {
  unsigned arrived{0};
  unsigned votes{0};
  unsigned mask{0};
  unsigned result[32]{};
  bool done[32]{};

  /// Hands every arrived lane the votes, and starts afresh.
  void complete() noexcept
  {
    for (unsigned lane = 0; lane < 32; ++lane) {
      if ((arrived & (1U << lane)) != 0) {
        result[lane] = votes;
        done[lane] = true;
      }
    }
    arrived = 0;
    votes = 0;
  }
};

struct block_run {
  kernel_launch const* launch{nullptr};
  uint3 block_idx{};
  dim3 block_dim;
  dim3 grid_dim;
  unsigned threads{0};
  unsigned live{0};
  unsigned at_barrier{0};
  std::uint64_t barrier_generation{0};
  std::vector<warp_vote> warps;
  std::vector<unsigned> live_lanes;  // per warp: lanes not done
  unsigned char* smem{nullptr};
  bool random{false};
  std::mt19937_64 rng;
  bool failed{false};
  std::string failure;
  unsigned current{0};
};

/// Everything one host thread needs to run blocks: its fibers, its stacks, the scheduler's own
/// context and the block's dynamic shared memory.
struct host_thread_state {
  std::vector<std::unique_ptr<thread_slot>> slots;
  context scheduler;
  std::unique_ptr<unsigned char[]> smem;
  std::size_t smem_capacity{0};
  block_run* block{nullptr};
  thread_slot* running{nullptr};
  std::size_t stack_bytes{0};
};

thread_local host_thread_state host;

std::string describe(uint3 v) { return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")"; }

void switch_to_scheduler(bool exiting)
{
  thread_slot* const me = host.running;
  fiber_switches.fetch_add(1, std::memory_order_relaxed);
  switch_context(me->ctx, host.scheduler, exiting);
}

void fiber_entry(void* arg)
{
  auto* const slot = static_cast<thread_slot*>(arg);
  enter_fiber(host.scheduler);
  block_run& b = *host.block;
  try {
    b.launch->body();
  } catch (trap_signal const&) {
    if (!b.failed) {
      b.failed = true;
      b.failure = "__trap() in block " + describe(b.block_idx) + ", thread " + describe(slot->idx);
    }
  } catch (std::exception const& e) {
    if (!b.failed) {
      b.failed = true;
      b.failure = std::string{"exception in block "} + describe(b.block_idx) + ", thread " + describe(slot->idx) +
                  ": " + e.what();
    }
  } catch (...) {
    if (!b.failed) {
      b.failed = true;
      b.failure = "unknown exception in block " + describe(b.block_idx) + ", thread " + describe(slot->idx);
    }
  }
  slot->state = fiber_state::done;
  switch_to_scheduler(true);
}

/// A thread that has returned counts as arrived at every later barrier and vote.
void retire(block_run& b, thread_slot& t)
{
  --b.live;
  unsigned const warp = t.linear / static_cast<unsigned>(warp_size);
  unsigned const lane = t.linear % static_cast<unsigned>(warp_size);
  b.live_lanes[warp] &= ~(1U << lane);
  if (b.at_barrier > 0 && b.at_barrier == b.live) {
    ++b.barrier_generation;
    b.at_barrier = 0;
  }
  warp_vote& v = b.warps[warp];
  unsigned const needed = v.mask & b.live_lanes[warp];
  if (v.arrived != 0 && (v.arrived & needed) == needed) { v.complete(); }
}

bool can_run(thread_slot const& t)
{
  if (t.state == fiber_state::ready) { return true; }
  return t.state == fiber_state::waiting && t.ready(t.ready_context);
}

/// Runs one block to completion (or failure) on this host thread.
void run_block(block_run& b)
{
  std::vector<std::unique_ptr<thread_slot>>& slots = host.slots;
  while (slots.size() < b.threads) {
    auto slot = std::make_unique<thread_slot>();
    slot->stack = std::make_unique<fiber_stack>(host.stack_bytes);
    slots.push_back(std::move(slot));
  }
  for (unsigned i = 0; i < b.threads; ++i) {
    thread_slot& t = *slots[i];
    t.linear = i;
    t.idx = {i % b.block_dim.x, (i / b.block_dim.x) % b.block_dim.y, i / (b.block_dim.x * b.block_dim.y)};
    t.state = fiber_state::ready;
    t.ready = nullptr;
    make_context(t.ctx, *t.stack, fiber_entry, &t);
  }
  host.block = &b;
  unsigned next = 0;
  while (b.live > 0 && !b.failed) {
    thread_slot* pick = nullptr;
    if (b.random) {
      std::vector<unsigned> candidates;
      for (unsigned i = 0; i < b.threads; ++i) {
        if (can_run(*slots[i])) { candidates.push_back(i); }
      }
      if (!candidates.empty()) {
        pick = slots[candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(b.rng)]].get();
      }
    } else {
      for (unsigned k = 0; k < b.threads; ++k) {
        thread_slot& t = *slots[(next + k) % b.threads];
        if (can_run(t)) {
          pick = &t;
          next = (t.linear + 1) % b.threads;
          break;
        }
      }
    }
    if (pick == nullptr) {
      std::ostringstream why;
      why << "deadlock in block " << describe(b.block_idx) << ": no live thread can go on;";
      unsigned shown = 0;
      for (unsigned i = 0; i < b.threads && shown < 8; ++i) {
        thread_slot const& t = *slots[i];
        if (t.state != fiber_state::waiting) { continue; }
        why << " thread " << describe(t.idx) << " waits at " << t.waits_on << ";";
        ++shown;
      }
      b.failed = true;
      b.failure = why.str();
      break;
    }
    pick->state = fiber_state::ready;
    pick->ready = nullptr;
    host.running = pick;
    b.current = pick->linear;
    fiber_switches.fetch_add(1, std::memory_order_relaxed);
    switch_context(host.scheduler, pick->ctx);
    host.running = nullptr;
    if (pick->state == fiber_state::done) { retire(b, *pick); }
  }
  host.block = nullptr;
}

/// Host threads that run blocks beside the launching thread; they persist, so their fibers and
/// stacks are made once.
class block_pool {
 public:
  static block_pool& instance()
  {
    static block_pool pool;
    return pool;
  }
  ~block_pool()
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) { t.join(); }
  }

  /// Runs `job` on the calling thread and on `helpers` pool threads; returns when all are done.
  void run(unsigned helpers, std::function<void()> const& job)
  {
    if (helpers == 0) {
      job();
      return;
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (workers_.size() < helpers) {
        unsigned const index = static_cast<unsigned>(workers_.size());
        workers_.emplace_back([this, index] { loop(index); });
      }
      job_ = &job;
      wanted_ = helpers;
      busy_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    job();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop(unsigned index)
  {
    std::uint64_t seen = 0;
    for (;;) {
      std::function<void()> const* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) { return; }
        seen = generation_;
        if (index >= wanted_) { continue; }
        job = job_;
      }
      (*job)();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --busy_;
      }
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  std::function<void()> const* job_{nullptr};
  unsigned wanted_{0};
  unsigned busy_{0};
  std::uint64_t generation_{0};
  bool quit_{false};
};

}  // namespace

std::string run_kernel(kernel_launch const& launch, settings const& config)
{
  std::size_t const blocks = static_cast<std::size_t>(launch.grid.x) * launch.grid.y * launch.grid.z;
  unsigned const threads_per_block = launch.block.x * launch.block.y * launch.block.z;
  std::atomic<std::size_t> next_block{0};
  std::mutex failure_mutex;
  std::string failure;
  std::atomic<bool> stop{false};

  std::function<void()> const worker = [&] {
    host.stack_bytes = config.stack_bytes;
    if (host.smem_capacity < launch.dynamic_smem) {
      host.smem = std::make_unique<unsigned char[]>(launch.dynamic_smem);
      host.smem_capacity = launch.dynamic_smem;
    }
    for (std::size_t index = next_block.fetch_add(1); index < blocks && !stop.load(); index = next_block.fetch_add(1)) {
      block_run b;
      b.launch = &launch;
      b.block_dim = launch.block;
      b.grid_dim = launch.grid;
      b.block_idx = {static_cast<unsigned>(index % launch.grid.x),
                     static_cast<unsigned>((index / launch.grid.x) % launch.grid.y),
                     static_cast<unsigned>(index / (static_cast<std::size_t>(launch.grid.x) * launch.grid.y))};
      b.threads = threads_per_block;
      b.live = threads_per_block;
      unsigned const warps = (threads_per_block + warp_size - 1) / warp_size;
      b.warps.assign(warps, warp_vote{});
      b.live_lanes.assign(warps, 0);
      for (unsigned i = 0; i < threads_per_block; ++i) { b.live_lanes[i / warp_size] |= 1U << (i % warp_size); }
      b.smem = host.smem.get();
      if (launch.dynamic_smem > 0) { std::memset(b.smem, 0xFF, launch.dynamic_smem); }
      b.random = config.random_schedule;
      b.rng.seed(config.seed ^ (launch.id * 0x9E3779B97F4A7C15ULL) ^ (index * 0xBF58476D1CE4E5B9ULL));
      run_block(b);
      blocks_run.fetch_add(1, std::memory_order_relaxed);
      if (b.failed) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure.empty()) { failure = "kernel launch #" + std::to_string(launch.id) + ": " + b.failure; }
        stop.store(true);
      }
    }
  };

  unsigned helpers = config.random_schedule || blocks < 2 ? 0U : (config.threads > 0 ? config.threads - 1 : 0U);
  helpers = static_cast<unsigned>(std::min<std::size_t>(helpers, blocks - 1));
  block_pool::instance().run(helpers, worker);
  return failure;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Builtins.
namespace {
detail::block_run* block() noexcept { return detail::host.block; }
detail::thread_slot* me() noexcept { return detail::host.running; }
uint3 const lone_index{0, 0, 0};
dim3 const lone_dim{1, 1, 1};
}  // namespace

bool in_kernel() noexcept { return me() != nullptr; }
uint3 const& thread_idx() noexcept { return in_kernel() ? me()->idx : lone_index; }
uint3 const& block_idx() noexcept { return in_kernel() ? block()->block_idx : lone_index; }
dim3 const& block_dim() noexcept { return in_kernel() ? block()->block_dim : lone_dim; }
dim3 const& grid_dim() noexcept { return in_kernel() ? block()->grid_dim : lone_dim; }
unsigned char* dynamic_shared() noexcept { return in_kernel() ? block()->smem : nullptr; }

void wait_until(bool (*ready)(void const*), void const* context, char const* what)
{
  if (!in_kernel()) {
    if (!ready(context)) {
      std::fprintf(stderr, "tapeflow emulator: %s outside a kernel would wait forever\n", what);
      std::abort();
    }
    return;
  }
  if (ready(context) && !block()->random) { return; }
  detail::thread_slot* const t = me();
  t->state = detail::fiber_state::waiting;
  t->ready = ready;
  t->ready_context = context;
  t->waits_on = what;
  detail::switch_to_scheduler(false);
  if (block()->failed) { throw detail::trap_signal{}; }
}

void yield_point()
{
  if (!in_kernel()) { return; }
  detail::block_run& b = *block();
  if (!b.random || (b.rng() & 1U) == 0) { return; }
  me()->state = detail::fiber_state::ready;
  detail::switch_to_scheduler(false);
}

void syncthreads()
{
  if (!in_kernel()) { return; }
  detail::block_run& b = *block();
  std::uint64_t const generation = b.barrier_generation;
  if (++b.at_barrier == b.live) {
    ++b.barrier_generation;
    b.at_barrier = 0;
    yield_point();
    return;
  }
  struct ctx {
    detail::block_run const* b;
    std::uint64_t generation;
  } const c{&b, generation};
  wait_until([](void const* p) {
    auto const* x = static_cast<ctx const*>(p);
    return x->b->barrier_generation != x->generation;
  },
             &c, "__syncthreads");
}

unsigned active_mask() noexcept
{
  // Which lanes run together at this instant is the hardware's choice under independent thread
  // scheduling (sm_70+); the emulator's warps are always fully diverged: the caller alone.
  if (!in_kernel()) { return 1U; }
  return 1U << (me()->linear % static_cast<unsigned>(detail::warp_size));
}

unsigned lane_mask_lt() noexcept
{
  if (!in_kernel()) { return 0U; }
  return (1U << (me()->linear % static_cast<unsigned>(detail::warp_size))) - 1U;
}

unsigned ballot(unsigned mask, bool predicate)
{
  if (!in_kernel()) { return predicate ? 1U : 0U; }
  detail::block_run& b = *block();
  unsigned const warp = me()->linear / static_cast<unsigned>(detail::warp_size);
  unsigned const lane = me()->linear % static_cast<unsigned>(detail::warp_size);
  if ((mask & (1U << lane)) == 0) { trap(); }  // a lane may only vote in a mask that names it
  detail::warp_vote& v = b.warps[warp];
  if (v.arrived == 0) { v.mask = mask; }
  if (v.mask != mask) { trap(); }  // lanes of one vote disagree on its mask
  v.arrived |= 1U << lane;
  v.done[lane] = false;
  if (predicate) { v.votes |= 1U << lane; }
  unsigned const needed = mask & b.live_lanes[warp];
  if ((v.arrived & needed) == needed) {
    v.complete();
  } else {
    struct ctx {
      detail::warp_vote const* v;
      unsigned lane;
    } const c{&v, lane};
    wait_until([](void const* p) {
      auto const* x = static_cast<ctx const*>(p);
      return x->v->done[x->lane];
    },
               &c, "__ballot_sync");
  }
  unsigned const result = v.result[lane];  // this lane's, whatever votes complete while it yields
  yield_point();
  return result;
}

void trap()
{
  if (!in_kernel()) {
    std::fprintf(stderr, "tapeflow emulator: __trap() outside a kernel\n");
    std::abort();
  }
  throw detail::trap_signal{};
}

}  // namespace tapeflow::emu
