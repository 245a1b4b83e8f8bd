// The backward formula of embedding (registered in embedding_strategy.cc): the table's gradient
// is the registered op embedding_backward.
#include "dtensor/ops/embedding/detail/embedding_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {
namespace {

// padding_idx: the row whose gradient is zero, -1 for none (aten's embedding_backward).
DTensor embedding_backward(const DTensor& grad, const DTensor& indices, int64_t num_weights,
                           int64_t padding_idx) {
  static const OpInfo& op = ops_op("embedding_backward");
  const ArgValue args[] = {num_weights, padding_idx};
  return dispatch(op, {&grad, &indices}, args);
}

}  // namespace

// The forward's arg 0, when given, is its padding_idx (normalised, embedding_dtensor.cc).
DTensorList embedding_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  const int64_t padding_idx = c.has_arg(0) ? c.arg<int64_t>(0) : -1;
  return {embedding_backward(g[0], c.input(1), c.input_spec(0).shape()[0], padding_idx), DTensor()};
}

}  // namespace dtensor::detail
