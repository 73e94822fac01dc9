// SPDX-License-Identifier: Apache-2.0
// The emulated device's subset of Thrust: the two fancy iterators tapeflow's reductions take
// (<tapeflow/device/reduce.cuh>), random access only.
#pragma once

#include <cstddef>

namespace thrust {

/// The values start, start + 1, ...
template <class Incrementable>
class counting_iterator {
 public:
  using value_type = Incrementable;
  using difference_type = std::ptrdiff_t;
  explicit counting_iterator(Incrementable start) noexcept : value_(start) {}
  Incrementable operator[](difference_type n) const noexcept
  {
    return static_cast<Incrementable>(value_ + static_cast<Incrementable>(n));
  }
  Incrementable operator*() const noexcept { return value_; }
  counting_iterator operator+(difference_type n) const noexcept { return counting_iterator((*this)[n]); }

 private:
  Incrementable value_;
};

/// f(it[0]), f(it[1]), ...
template <class F, class Iterator>
class transform_iterator {
 public:
  using difference_type = std::ptrdiff_t;
  transform_iterator(Iterator it, F f) : it_(it), f_(f) {}
  auto operator[](difference_type n) const { return f_(it_[n]); }
  auto operator*() const { return f_(*it_); }
  transform_iterator operator+(difference_type n) const { return transform_iterator(it_ + n, f_); }

 private:
  Iterator it_;
  F f_;
};

template <class Iterator, class F>
transform_iterator<F, Iterator> make_transform_iterator(Iterator it, F f)
{
  return {it, f};
}

}  // namespace thrust
