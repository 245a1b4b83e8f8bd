// DTensor forms of layer_norm and rms_norm (registered in norm_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/norm/detail/norm_inputs.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {

DTensor layer_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight,
                   const DTensor& bias, double eps) {
  static const OpInfo& op = ops_op("layer_norm");
  const ArgValue args[] = {eps, Shape(normalized_shape.begin(), normalized_shape.end()),
                           weight.defined(), bias.defined()};
  return dispatch(op, detail::norm_inputs(x, weight, bias), args);
}

DTensor rms_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight,
                 std::optional<double> eps) {
  static const OpInfo& op = ops_op("rms_norm");
  const ArgValue args[] = {eps ? ArgValue(*eps) : ArgValue(std::monostate()),
                           Shape(normalized_shape.begin(), normalized_shape.end()),
                           weight.defined()};
  return dispatch(op, detail::norm_inputs(x, weight, DTensor()), args);
}

}  // namespace dtensor
