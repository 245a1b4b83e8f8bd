#include "dtensor/propagation/dispatch.h"
#include "ops/norm/norm.h"
#include "ops/view/dtensor_op_util.h"

namespace dtensor {

DTensor layer_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight,
                   const DTensor& bias, double eps) {
  static const OpInfo& op = detail::family_op("layer_norm");
  const bool has_w = weight.defined(), has_b = bias.defined();
  absl::InlinedVector<const DTensor*, 3> in = {&x};
  if (has_w) in.push_back(&weight);
  if (has_b) in.push_back(&bias);
  const ArgValue args[] = {eps, Shape(normalized_shape.begin(), normalized_shape.end()), has_w,
                           has_b};
  return dispatch(op, in, args, [&](absl::Span<const Tensor> l) {
    return layer_norm(l[0], normalized_shape, has_w ? l[1] : Tensor(),
                      has_b ? l[has_w ? 2 : 1] : Tensor(), eps);
  });
}

DTensor rms_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight,
                 std::optional<double> eps) {
  static const OpInfo& op = detail::family_op("rms_norm");
  const bool has_w = weight.defined();
  absl::InlinedVector<const DTensor*, 2> in = {&x};
  if (has_w) in.push_back(&weight);
  const ArgValue args[] = {eps ? ArgValue(*eps) : ArgValue(std::monostate()),
                           Shape(normalized_shape.begin(), normalized_shape.end()), has_w};
  return dispatch(op, in, args, [&](absl::Span<const Tensor> l) {
    return rms_norm(l[0], normalized_shape, has_w ? l[1] : Tensor(), eps);
  });
}

}  // namespace dtensor
