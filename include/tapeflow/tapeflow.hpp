// SPDX-License-Identifier: Apache-2.0
// tapeflow's host API in one include: everything a program needs to plan, run and inspect a
// gradient tape on any backend, and to write CPU steps. Plain C++17: it compiles without a CUDA
// or HIP toolkit.
//
// Device code (kernels) includes its own entry points: <tapeflow/device/tile_pipeline.cuh>,
// <tapeflow/device/launch.cuh>, <tapeflow/device/enzyme.cuh>, <tapeflow/device/platform.hpp>,
// <tapeflow/stencil/device.cuh> (a stencil's segments on a GPU).
// The shipped workloads have theirs (docs/guide.md).
#pragma once

#include <tapeflow/backend.hpp>       // backends, device limits
#include <tapeflow/bandwidth.hpp>     // bandwidths, measure_bandwidths
#include <tapeflow/chain.hpp>         // chain<Step>, plan_chain
#include <tapeflow/chain_options.hpp> // chain_options, chain_stats
#include <tapeflow/config.hpp>        // version, TAPEFLOW_HOST_DEVICE
#include <tapeflow/cpu/reverse.hpp>   // cpu::reverse_tiles, cpu::reverse_windows
#include <tapeflow/cpu/tape_store.hpp>   // cpu::store_to_tape (streaming stores)
#include <tapeflow/cpu/thread_pool.hpp>  // cpu::parallel_for, cpu::threads
#include <tapeflow/cpu/tile_ring.hpp>    // cpu::tile_ring, cpu::ring_stats
#include <tapeflow/dual.hpp>          // forward mode: dual<T>, differentiate
#include <tapeflow/enzyme.hpp>        // Enzyme split-mode slots (host side)
#include <tapeflow/error.hpp>         // typed exceptions
#include <tapeflow/fault.hpp>         // fault injection for tests
#include <tapeflow/halo.hpp>          // tile_window: a stencil's neighbouring records
#include <tapeflow/memory.hpp>        // device_buffer, pinned_buffer, buffer_pool, memory accounting
#include <tapeflow/nvtx.hpp>          // NVTX ranges in the tapeflow domain
#include <tapeflow/plan.hpp>          // plan_pipeline, pipeline_request, pipeline_plan
#include <tapeflow/policy.hpp>        // tape_policy
#include <tapeflow/program.hpp>       // captured_program (CUDA Graphs)
#include <tapeflow/record.hpp>        // records, value_record
#include <tapeflow/revolve.hpp>       // Revolve schedules
#include <tapeflow/schedule.hpp>      // the mixed schedule: device, host and recompute per step
#include <tapeflow/step.hpp>          // the Step contract, is_step_v, has_parameters_v
#include <tapeflow/stencil/cpu.hpp>   // stencils: segments of k steps (plan_segments, cpu_segments)
#include <tapeflow/stream.hpp>        // stream_view, stream, event
#include <tapeflow/tape.hpp>          // tape, layer, tape_writer, tape_reader
#include <tapeflow/thread_tape.hpp>   // the per-thread tape arena
#include <tapeflow/tiers.hpp>         // plan_tiers, tiers
#include <tapeflow/timing.hpp>        // median, median_ms and its timers, lap_timer
