#include "dtensor/propagation/dispatch.h"
#include "ops/softmax/softmax.h"
#include "ops/view/dtensor_op_util.h"

namespace dtensor {

DTensor softmax(const DTensor& x, int64_t dim) {
  static const OpInfo& op = detail::family_op("softmax");
  const DTensor* in[] = {&x};
  const ArgValue args[] = {dim};
  return dispatch(op, in, args, [&](absl::Span<const Tensor> l) { return softmax(l[0], dim); });
}

DTensor log_softmax(const DTensor& x, int64_t dim) {
  static const OpInfo& op = detail::family_op("log_softmax");
  const DTensor* in[] = {&x};
  const ArgValue args[] = {dim};
  return dispatch(op, in, args, [&](absl::Span<const Tensor> l) { return log_softmax(l[0], dim); });
}

}  // namespace dtensor
