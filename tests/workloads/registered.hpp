// SPDX-License-Identifier: Apache-2.0
// The registered workloads as GoogleTest's typed-test types, named by their CLI names.
#pragma once

#include <tapeflow/workloads/registry.hpp>

#include <gtest/gtest.h>

#include <string>

namespace tapeflow::testing {

template <class List>
struct gtest_types;
template <class... D>
struct gtest_types<workloads::description_list<D...>> {
  using type = ::testing::Types<D...>;
};

/// "allen-cahn" -> "allen_cahn": a description's name as a test name.
struct description_name {
  template <class D>
  static std::string GetName(int)
  {
    std::string name = D::text.name;
    for (char& c : name) {
      if (c == '-') { c = '_'; }
    }
    return name;
  }
};

}  // namespace tapeflow::testing
