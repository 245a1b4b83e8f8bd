// Backward formulas of the scan family (registered in scan_strategy.cc).
#include "dtensor/ops/scan/detail/scan_backward.h"

#include <algorithm>

#include "dtensor/autograd/function.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/reduction_backward.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

namespace {

// sort / topk / kthvalue: the values' gradient goes back to the positions the indices name.
DTensorList selected_bw(const BackwardContext& c, Grads g, int64_t dim_arg, bool keepdim) {
  if (!g[0].defined()) return {DTensor()};
  const Shape& shape = c.input_spec(0).shape();
  const int64_t dim =
      normalize_dim(c.arg<int64_t>(dim_arg),
                    std::max<int64_t>(static_cast<int64_t>(shape.size()), 1), c.op().name.c_str());
  return {detail::value_selecting_backward(g[0], c.output(1), dim, keepdim, shape)};
}

}  // namespace

// cumsum: the gradient of x[i] is the sum of g[j] over j >= i, a reversed cumsum.
DTensorList cumsum_grad(const BackwardContext& c, Grads g) {
  const int64_t dim = c.arg<int64_t>(0);
  const int64_t dims[] = {dim};
  return {flip(cumsum(flip(g[0], dims), dim), dims)};
}

DTensorList cumprod_grad(const BackwardContext& c, Grads g) {
  return {detail::cumprod_backward(g[0], c.input(0), c.arg<int64_t>(0))};
}

DTensorList values_indices_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 0, true);
}

DTensorList topk_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 1, true);
}

DTensorList kthvalue_grad(const BackwardContext& c, Grads g) {
  return selected_bw(c, g, 1, c.arg<bool>(2));
}

}  // namespace dtensor::detail
