// A contiguous tensor seen around one of its dims as [outer, d, inner]: the view the row
// kernels of the ops layer (softmax, its backward) work on, on the CPU and on CUDA.
#pragma once

#include <cstdint>

#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

struct DimLayout {
  int64_t outer = 1;  // product of the dims before `dim`
  int64_t d = 1;      // size of `dim` (1 for a 0-d tensor)
  int64_t inner = 1;  // product of the dims after `dim`
};

// `dim` must be normalised (0 <= dim < sizes.size(), or 0 for a 0-d tensor).
inline DimLayout dim_layout(IntSpan sizes, int64_t dim) {
  DimLayout l;
  const int64_t nd = static_cast<int64_t>(sizes.size());
  for (int64_t i = 0; i < dim; ++i) l.outer *= sizes[i];
  for (int64_t i = dim + 1; i < nd; ++i) l.inner *= sizes[i];
  l.d = nd == 0 ? 1 : sizes[dim];
  return l;
}

}  // namespace dtensor::detail
