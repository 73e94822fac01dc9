// SPDX-License-Identifier: Apache-2.0
#include <tapeflow/error.hpp>
#include <tapeflow/nvtx.hpp>
#include <tapeflow/program.hpp>

#include "backend/backend_ops.hpp"

namespace tapeflow {

captured_program::captured_program(backend kind, std::function<void(stream_view)> body)
  : kind_(kind), body_(std::move(body)), private_(kind), ready_(kind), done_(kind)
{
  TAPEFLOW_EXPECTS(static_cast<bool>(body_), "a captured program needs a body");
}

captured_program::~captured_program()
{
  if (graph_ != nullptr) { detail::find_ops(kind_)->graph_destroy(graph_); }
}

void captured_program::launch(stream_view stream)
{
  TAPEFLOW_NVTX_RANGE("tapeflow::captured_program::launch");
  detail::backend_ops const& table = detail::ops(kind_);
  if (table.capture_begin == nullptr) {
    body_(stream);  // no graphs here: run the recorded work again, in the caller's order
    ++launches_;
    return;
  }
  ready_.record(stream);
  ready_.wait(private_.view());
  if (graph_ == nullptr) {
    table.capture_begin(private_.view());
    try {
      body_(private_.view());
    } catch (...) {
      try {
        if (void* partial = table.capture_end(private_.view())) { table.graph_destroy(partial); }
      } catch (...) {  // the body's failure is what the caller sees
      }
      throw;
    }
    graph_ = table.capture_end(private_.view());
  }
  table.graph_launch(graph_, private_.view());
  done_.record(private_.view());
  done_.wait(stream);
  ++launches_;
}

}  // namespace tapeflow
