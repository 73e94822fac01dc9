// SPDX-License-Identifier: Apache-2.0
// What the device pipeline tests (test_gpu_pipeline.cu, test_gpu_halo.cu) stage: a committed layer
// of random records on the GPU, and a digest of a record that a kernel and the host both compute.
#pragma once

#include <tapeflow/config.hpp>
#include <tapeflow/device/platform.hpp>
#include <tapeflow/record.hpp>
#include <tapeflow/tape.hpp>

#include <cstddef>
#include <random>
#include <vector>

namespace tapeflow::testing {

using digest_record = value_record<unsigned, 4>;

/// A value of the record's four words that changes with any of them.
TAPEFLOW_HOST_DEVICE inline unsigned digest(digest_record const& v) noexcept
{
  return v.values[0] ^ (v.values[1] * 3u) ^ (v.values[2] * 7u) ^ (v.values[3] * 11u);
}

/// A layer of `t` holding `records` fresh random records in tiles of `tile_records`, committed,
/// and the host's copy of them.
struct random_layer {
  layer& on_device;
  std::vector<digest_record> host;

  random_layer(tape& t, std::size_t records, std::size_t tile_records)
    : on_device(t.push<digest_record>(records, tile_records)), host(records)
  {
    std::mt19937 rng(std::random_device{}());
    for (digest_record& r : host) {
      for (unsigned& v : r.values) { v = static_cast<unsigned>(rng()); }
    }
    TAPEFLOW_CUDA_TRY(cudaMemcpy(on_device.writer<digest_record>().data(), host.data(),
                                 records * sizeof(digest_record), cudaMemcpyHostToDevice));
    on_device.commit();
  }
};

}  // namespace tapeflow::testing
