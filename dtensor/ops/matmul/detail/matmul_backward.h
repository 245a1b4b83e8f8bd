// Backward formulas of the matmul family (matmul_backward.cc).
#pragma once

#include "dtensor/autograd/function.h"

namespace dtensor::detail {

DTensorList mm_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList bmm_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList matmul_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList addmm_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList baddbmm_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList linear_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList dot_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);
DTensorList outer_backward(const autograd::BackwardContext& c, absl::Span<const DTensor> g);

}  // namespace dtensor::detail
