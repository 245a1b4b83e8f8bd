// Local rescaling used by the redistribute executor for P(sum) <-> P(avg). The op library
// (dtensor/ops/) is a higher layer, so this small kernel lives here.
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// A new contiguous tensor on t's device holding t * n (divide = false) or t / n (divide =
// true), computed in compute_t (float for 16-bit floats; integer division truncates).
Tensor scaled_by_mesh_size(const Tensor& t, int64_t n, bool divide);

}  // namespace dtensor::detail
