// The backward formula of embedding (registered in embedding_strategy.cc): the table's gradient
// is the registered op embedding_backward.
#include "dtensor/ops/embedding/detail/embedding_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor::detail {
namespace {

DTensor embedding_backward(const DTensor& grad, const DTensor& indices, int64_t num_weights) {
  static const OpInfo& op = ops_op("embedding_backward");
  const ArgValue args[] = {num_weights};
  return dispatch(op, {&grad, &indices}, args);
}

}  // namespace

DTensorList embedding_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  return {embedding_backward(g[0], c.input(1), c.input_spec(0).shape()[0]), DTensor()};
}

}  // namespace dtensor::detail
