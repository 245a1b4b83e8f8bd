// DTensor embedding (registered in embedding_strategy.cc).
#include <algorithm>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/detail/embedding_backward.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
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

namespace {

// The rows of a `rows`-row table the indices look up (the global batch: sharded indices are
// gathered), ascending and once each; out-of-range indices skipped.
std::vector<int64_t> looked_up_rows(const DTensor& indices, int64_t rows) {
  const bool whole = std::all_of(indices.placements().begin(), indices.placements().end(),
                                 [](const Placement& p) { return p.is_replicate(); });
  const Tensor all = whole ? indices.to_local() : indices.full_tensor();
  std::vector<int64_t> v = cast(all, kInt64).to(Device()).contiguous().to_vector<int64_t>();
  v.erase(std::remove_if(v.begin(), v.end(), [&](int64_t r) { return r < 0 || r >= rows; }),
          v.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

// The scale is computed in float64 from the norm, as PyTorch's (a double), then multiplied in.
// A table whose rows are whole on every rank (replicated or row-sharded on every mesh dim)
// renorms its local looked-up rows alone (the per-row norm, scale and product of the whole-table
// form, bit for bit); other layouts (column-sharded, Partial), meta tensors and captured steps
// take the whole-table form.
const DTensor& embedding_renorm_(const DTensor& weight, const DTensor& indices, double max_norm,
                                 double norm_type) {
  DT_CHECK(weight.defined() && weight.dim() == 2 && is_floating(weight.dtype()),
           "[embedding_renorm_] argument weight must be a defined 2-d floating table");
  DT_CHECK(indices.defined() && (indices.dtype() == kInt32 || indices.dtype() == kInt64),
           "[embedding_renorm_] argument indices must be defined int32 or int64 indices");
  autograd::NoGradGuard no_grad;
  const int64_t dims[] = {1};
  const Placements& pw = weight.placements();
  // The rows looked up are read on the host: not on meta tensors (no data), nor in a captured
  // step (dtensor::compile), whose replays must follow their own indices.
  const bool on_host_rows = detail::capture_recorder() == nullptr &&
                            !weight.to_local().device().is_meta() &&
                            !indices.to_local().device().is_meta();
  if (on_host_rows && std::all_of(pw.begin(), pw.end(), [](const Placement& p) {
        return p.is_replicate() || p.is_shard(0);
      })) {
    const std::vector<int64_t> wanted = looked_up_rows(indices, weight.size(0));
    const DeviceMesh& mesh = weight.device_mesh();
    if (!mesh.contains_me()) return weight;
    const LocalShard shard =
        compute_local_shape_and_offset(weight.shape(), mesh.shape(), mesh.get_coordinate(), pw);
    const int64_t first = shard.offset[0], count = shard.shape[0];
    std::vector<int64_t> mine;  // local row numbers of the looked-up rows this rank holds
    for (int64_t r : wanted) {
      if (r >= first && r < first + count) mine.push_back(r - first);
    }
    const Tensor& local = weight.to_local();
    local.storage().bump_version();  // an in-place write on every rank, as the whole-table mul_
    if (mine.empty()) return weight;
    const int64_t k = static_cast<int64_t>(mine.size());
    const Tensor rows = index_select(local, 0, from_vector<int64_t>(mine, {k}, local.device()));
    const Tensor norm = cast(vector_norm(rows, norm_type, dims, /*keepdim=*/true), kFloat64);
    const Tensor scale =
        where(gt(norm, max_norm),
              div(full(norm.shape(), max_norm, {kFloat64, norm.device()}), add(norm, 1e-7)),
              full(norm.shape(), 1.0, {kFloat64, norm.device()}));
    const Tensor scaled = mul_(rows, scale);
    const std::vector<double> s = scale.to(Device()).contiguous().to_vector<double>();
    for (int64_t i = 0; i < k; ++i) {
      if (s[i] != 1.0) local.narrow(0, mine[i], 1).copy_(scaled.narrow(0, i, 1));
    }
    return weight;
  }
  const DTensor norm = cast(vector_norm(weight, norm_type, dims, /*keepdim=*/true), kFloat64);
  const DTensor one = ones_like(norm);
  DTensor scale = where(gt(norm, max_norm), div(full_like(norm, max_norm), add(norm, 1e-7)), one);
  const DTensor counts = detail::embedding_counts(indices, weight.size(0), kFloat64);
  scale = where(gt(counts, 0.0), scale, one);
  return mul_(weight, scale);
}

}  // namespace dtensor
