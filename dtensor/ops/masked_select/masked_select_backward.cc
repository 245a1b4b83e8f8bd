// The backward formula of masked_select (registered in masked_select_strategy.cc).
#include "dtensor/ops/masked_select/detail/masked_select_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/masked_select/detail/masked_select.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor::detail {

// grad's gradient: scattered into zeros of the broadcast shape, then summed over the dims self
// was broadcast along (reduce_to) to self's shape.
DTensorList masked_select_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  if (!g[0].defined() || !c.needs_input_grad(0)) return {DTensor(), DTensor()};
  const Shape shape =
      broadcast_shapes(c.input_spec(0).shape(), c.input_spec(1).shape(), "masked_select");
  const DTensor full = detail::masked_select_backward(g[0], c.input(1), shape);
  return {detail::reduce_to(full, c.input_spec(0)), DTensor()};
}

DTensorList masked_select_backward_grad(const autograd::BackwardContext& c,
                                        absl::Span<const DTensor> g) {
  return {masked_select(g[0], c.input(1)), DTensor()};
}

}  // namespace dtensor::detail
