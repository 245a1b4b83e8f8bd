// Backward formulas of the pool family (registered in pool_strategy.cc).
#include "dtensor/ops/pool/detail/pool_backward.h"

#include <string>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/pool.h"

namespace dtensor::detail {

using autograd::BackwardContext;
using Grads = absl::Span<const DTensor>;

DTensorList window_grad(const BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor()};
  const absl::Span<const ArgValue> args = c.args();
  if (c.op().name == "pad" && std::get<std::string_view>(args[1]) == "constant") {
    Shape crop = std::get<Shape>(args[0]);
    for (int64_t& p : crop) p = -p;
    return {pad(g[0], crop, "constant", 0.0)};
  }
  const OpInfo& op = ops_op(c.op().name + "_backward");
  ArgList bw(args.begin(), args.end());
  bw.push_back(c.input_spec(0).shape());
  return {dispatch(op, {&g[0]}, bw)};
}

DTensorList max_window_grad(int64_t nd, const BackwardContext& c, Grads g) {
  if (!g[0].defined()) return {DTensor()};
  static const OpInfo& op = ops_op("max_pool_backward");
  const DTensor indices = c.output(1);
  const ArgValue args[] = {c.input_spec(0).shape(), nd};
  return {dispatch(op, {&g[0], &indices}, args)};
}

}  // namespace dtensor::detail
