// DTensor forms of layer_norm and rms_norm (registered in norm_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {

DTensor layer_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight,
                   const DTensor& bias, double eps) {
  static const OpInfo& op = ops_op("layer_norm");
  const bool has_w = weight.defined(), has_b = bias.defined();
  absl::InlinedVector<const DTensor*, 3> in = {&x};
  if (has_w) in.push_back(&weight);
  if (has_b) in.push_back(&bias);
  const ArgValue args[] = {eps, Shape(normalized_shape.begin(), normalized_shape.end()), has_w,
                           has_b};
  return dispatch(op, in, args);
}

DTensor rms_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight,
                 std::optional<double> eps) {
  static const OpInfo& op = ops_op("rms_norm");
  const bool has_w = weight.defined();
  absl::InlinedVector<const DTensor*, 2> in = {&x};
  if (has_w) in.push_back(&weight);
  const ArgValue args[] = {eps ? ArgValue(*eps) : ArgValue(std::monostate()),
                           Shape(normalized_shape.begin(), normalized_shape.end()), has_w};
  return dispatch(op, in, args);
}

}  // namespace dtensor
