// DTensor embedding (registered in embedding_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/detail/embedding_backward.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

// Static args, when any option is given: 0 padding_idx normalised to [0, rows) or -1, and 1
// scale_grad_by_freq when true; for the backward formula only (embedding_backward.cc).
DTensor embedding(const DTensor& indices, const DTensor& weight, std::optional<int64_t> padding_idx,
                  std::optional<double> max_norm, double norm_type, bool scale_grad_by_freq) {
  static const OpInfo& op = ops_op("embedding");
  if (!padding_idx && !max_norm && !scale_grad_by_freq) return dispatch(op, {&weight, &indices});
  DT_CHECK(weight.defined() && weight.dim() == 2,
           "[embedding] argument weight must be a defined 2-d table when padding_idx, max_norm or "
           "scale_grad_by_freq is given");
  const int64_t rows = weight.size(0);
  if (padding_idx) {
    DT_CHECK(*padding_idx >= -rows && *padding_idx < rows,
             "[embedding] padding_idx %d must be within num_embeddings (expected %d <= "
             "padding_idx < %d)",
             *padding_idx, -rows, rows);
  }
  if (max_norm) embedding_renorm_(weight, indices, *max_norm, norm_type);
  const int64_t pad = !padding_idx ? -1 : *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
  if (!padding_idx && !scale_grad_by_freq) return dispatch(op, {&weight, &indices});
  const ArgValue args[] = {pad, true};
  return dispatch(op, {&weight, &indices},
                  absl::Span<const ArgValue>(args, scale_grad_by_freq ? 2 : 1));
}

// The scale is computed in float64 from the norm, as PyTorch's (a double), then multiplied in.
const DTensor& embedding_renorm_(const DTensor& weight, const DTensor& indices, double max_norm,
                                 double norm_type) {
  DT_CHECK(weight.defined() && weight.dim() == 2 && is_floating(weight.dtype()),
           "[embedding_renorm_] argument weight must be a defined 2-d floating table");
  DT_CHECK(indices.defined() && (indices.dtype() == kInt32 || indices.dtype() == kInt64),
           "[embedding_renorm_] argument indices must be defined int32 or int64 indices");
  autograd::NoGradGuard no_grad;
  const int64_t dims[] = {1};
  const DTensor norm = cast(vector_norm(weight, norm_type, dims, /*keepdim=*/true), kFloat64);
  const DTensor one = ones_like(norm);
  DTensor scale = where(gt(norm, max_norm), div(full_like(norm, max_norm), add(norm, 1e-7)), one);
  const DTensor counts = detail::embedding_counts(indices, weight.size(0), kFloat64);
  scale = where(gt(counts, 0.0), scale, one);
  return mul_(weight, scale);
}

}  // namespace dtensor
