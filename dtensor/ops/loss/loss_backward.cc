// The backward formula of gather_target (registered in loss_strategy.cc).
#include "dtensor/ops/loss/detail/loss_backward.h"

#include <absl/strings/str_format.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

DTensorList gather_target_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  static const OpInfo& op = ops_op("gather_target_backward");
  const ArgValue args[] = {c.input_spec(0).shape(), c.arg<int64_t>(0)};
  const DTensor& target = c.input(1);
  return {dispatch(op, {&g[0], &target}, args), DTensor()};
}

}  // namespace dtensor::detail
