// The backward formula of embedding (registered in embedding_strategy.cc): the table's gradient
// is the registered op embedding_backward.
#include "dtensor/ops/embedding/detail/embedding_backward.h"

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/view/view.h"

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

DTensor embedding_counts(const DTensor& indices, int64_t rows, DType dtype) {
  return embedding_backward(cast(ones_like(unsqueeze(indices, -1)), dtype), indices, rows, -1);
}

// The forward's args, when given (embedding_dtensor.cc): 0 padding_idx (normalised, -1 for
// none), 1 scale_grad_by_freq: each row of the gradient divided by its count in the batch (rows
// not looked up are zero either way).
DTensorList embedding_grad(const autograd::BackwardContext& c, absl::Span<const DTensor> g) {
  const int64_t padding_idx = c.has_arg(0) ? c.arg<int64_t>(0) : -1;
  const int64_t rows = c.input_spec(0).shape()[0];
  DTensor grad = embedding_backward(g[0], c.input(1), rows, padding_idx);
  if (c.has_arg(1) && c.arg<bool>(1)) {
    grad = div(grad, clamp_min(embedding_counts(c.input(1), rows, grad.dtype()), 1.0));
  }
  return {grad, DTensor()};
}

// Args (num_weights[, padding_idx]).
DTensorList embedding_backward_grad(const autograd::BackwardContext& c,
                                    absl::Span<const DTensor> g) {
  const DTensor& indices = c.input(1);
  DTensor out = embedding(indices, g[0]);
  const int64_t padding_idx = c.has_arg(1) ? c.arg<int64_t>(1) : -1;
  if (padding_idx >= 0) {
    out = out * unsqueeze(cast(ne(indices, Scalar(padding_idx)), out.dtype()), -1);
  }
  return {out, DTensor()};
}

}  // namespace dtensor::detail
