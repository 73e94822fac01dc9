// SPDX-License-Identifier: Apache-2.0
// Graph management: a graph is the work a stream capture recorded (stream.cpp); launching its
// instance queues that work again.
#include "state.hpp"

#include <new>

using namespace tapeflow::emu::detail;

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (exec == nullptr || graph == nullptr) { return cudaErrorInvalidValue; }
  auto* x = new (std::nothrow) CUgraphExec_st{graph->graph->ops};
  if (x == nullptr) { return cudaErrorMemoryAllocation; }
  *exec = x;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (graph == nullptr) { return cudaErrorInvalidResourceHandle; }
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) noexcept
{
  std::lock_guard<std::recursive_mutex> lock(dev().mutex);
  if (exec == nullptr) { return cudaErrorInvalidResourceHandle; }
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) noexcept
{
  TAPEFLOW_EMU_GUARD();
  if (exec == nullptr) { return cudaErrorInvalidResourceHandle; }
  for (work const& w : exec->ops) { enqueue(stream, w); }
  return cudaSuccess;
}
