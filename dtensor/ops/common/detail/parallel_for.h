// parallel_for: splits [begin, end) into contiguous chunks run on the intra-op threads
// (dtensor/ops/threads.h). Internal to the ops layer.
//
// f(lo, hi) is called on disjoint chunks covering the range, at most one chunk per thread, each
// at least `grain` indices long. It is called once on the whole range, on the calling thread,
// with one thread, a range under two grains, inside a chunk of another parallel_for, or while
// another thread's parallel_for holds the pool. f must not depend on which chunk runs first. An
// exception thrown by f on any thread is rethrown on the caller once every chunk has finished
// (the first one caught, if several).
#pragma once

#include <absl/functional/function_ref.h>

#include <cstdint>

#include "dtensor/ops/threads.h"

namespace dtensor::detail {

// Elements below which an op is not worth splitting across threads (PyTorch's grain size).
inline constexpr int64_t kGrainSize = 32768;

void parallel_for_threads(int64_t begin, int64_t end, int64_t grain,
                          absl::FunctionRef<void(int64_t, int64_t)> f);

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  if (end - begin < 2 * grain || get_num_threads() == 1) {
    f(begin, end);
    return;
  }
  parallel_for_threads(begin, end, grain, f);
}

// The grain, in rows, for a loop over rows of `row_elems` elements each: the fewest whole rows
// holding kGrainSize elements (rounded up, so a loop that splits has at least 2 * kGrainSize
// elements, as ElementwiseIter's overlap test assumes).
inline int64_t row_grain(int64_t row_elems) {
  const int64_t e = row_elems > 0 ? row_elems : 1;
  return (kGrainSize + e - 1) / e;
}

// How many times parallel_for_threads has started a team of two or more threads (for tests: an
// op that should split can be seen to have split).
int64_t parallel_regions_started();

}  // namespace dtensor::detail
