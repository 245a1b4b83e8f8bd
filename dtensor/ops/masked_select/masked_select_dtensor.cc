// The DTensor forms of masked_select and nonzero (registered in masked_select_strategy.cc).
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

namespace dtensor {

DTensor masked_select(const DTensor& self, const DTensor& mask) {
  static const OpInfo& op = ops_op("masked_select");
  return dispatch(op, {&self, &mask}, {});
}

DTensor nonzero(const DTensor& self) {
  static const OpInfo& op = ops_op("nonzero");
  return dispatch(op, {&self}, {});
}

DTensor detail::masked_select_backward(const DTensor& grad, const DTensor& mask, IntSpan shape) {
  static const OpInfo& op = ops_op("masked_select_backward");
  const ArgValue args[] = {Shape(shape.begin(), shape.end())};
  return dispatch(op, {&grad, &mask}, args);
}

}  // namespace dtensor
