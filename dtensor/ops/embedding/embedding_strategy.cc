// Registration of embedding. Inputs are ordered (weight, indices) so that Linearity
// kLinearInFirst expresses "linear in the table". Rows for one mesh dim:
//   [P(sum) | S(0), R]      vocab-parallel: each rank looks up its row block, masking other
//                           rows to zero (embedding_masked); the sum over ranks is the lookup
//   [S(-1) | S(1), R]       column-sharded table: the output's embedding dim is sharded
//   [S(d)  | R, S(d)]       sharded indices with a replicated table: output sharded alike
#include <absl/strings/str_format.h>

#include <string>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/advanced_index/detail/advanced_index.h"
#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/embedding/detail/embedding_backward.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using detail::embedding_grad;

// The first index outside [0, rows) as an error message (empty when there is none). Checked
// against the global table size before the lookup: embedding_masked would silently turn an
// out-of-range index into a zero row.
std::string index_range_error(const Tensor& indices, int64_t rows) {
  const std::optional<int64_t> bad = detail::first_out_of_range(indices, rows);
  if (!bad) return "";
  return absl::StrFormat("[embedding] index %d out of range for a table of %d rows", *bad, rows);
}

// Inputs (weight, indices). A table sharded by rows (S(0) on some mesh dim) is looked up with
// this shard's row offset, rows of other shards masked to zero: the sum over ranks is the
// lookup (the P(sum) row). A bad index is raised on every rank that may hold different indices
// (one small all-reduce per mesh dim the indices are sharded on; none when replicated).
Tensor embedding_kernel(const KernelContext& c, absl::Span<const Tensor> l) {
  const DTensorSpec& weight = c.input_spec(0);
  check_on_all_ranks(c.input_spec(1), index_range_error(l[1], weight.shape()[0]));
  bool row_sharded = false;
  for (const Placement& p : weight.placements()) row_sharded |= p.is_shard(0);
  if (!row_sharded) return embedding(l[1], l[0]);
  return embedding_masked(l[1], l[0], c.input_shard(0).offset[0]);
}

// embedding_backward(grad[..., D], indices[...]; num_weights) -> [num_weights, D]: the
// gradient of the table, each row the sum of the gradient rows that looked it up. Rows:
//   [S(0) | R, R]        vocab-sharded table: each rank adds the rows of its block
//   [S(1) | S(-1), R]    column-sharded table
//   [P(sum) | S(d), S(d)] indices sharded along d: each rank adds its part of the batch
// Linear in the gradient. Accumulates 16-bit gradients in float. Arg 1 (when given and >= 0)
// is padding_idx: that global row of the gradient is zero, on whichever rank holds it (every
// rank in the Partial row, so the sum stays zero).
Tensor embedding_backward_kernel(const KernelContext& c, absl::Span<const Tensor> l) {
  const LocalShard out = c.output_shard(0);
  const int64_t width = out.shape[1];
  // The gradient's rows (every dim but the last), counted: a -1 could not be inferred when
  // this rank's block of columns is empty (width 0, e.g. 5 columns over 4 ranks: 2, 2, 1, 0).
  int64_t n = 1;
  for (int64_t d = 0; d + 1 < l[0].dim(); ++d) n *= l[0].size(d);
  const int64_t flat[] = {n, width};
  const Tensor g = l[0].reshape(flat);
  const int64_t col[] = {n, 1}, wide[] = {n, width};
  const Tensor idx = l[1].to(kInt64).reshape(col).expand(wide);
  Tensor table = scatter_add_shard(out.shape, 0, idx, g, out.offset[0]);
  const int64_t pad = c.has_arg(1) ? c.arg<int64_t>(1) : -1;
  if (pad >= out.offset[0] && pad < out.offset[0] + out.shape[0]) {
    table.narrow(0, pad - out.offset[0], 1).zero_();
  }
  return table;
}

void register_embedding_backward(Registry& registry) {
  OpInfo op = detail::gradient_op("embedding_backward", {"grad", "indices"});
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& g = s.input(0);
    DT_CHECK(g.ndim() == s.input(1).ndim() + 1,
             "[embedding_backward] grad %s does not match indices %s", shape_str(g.shape()),
             shape_str(s.input(1).shape()));
    return OutputMetas{TensorMeta({s.arg<int64_t>(0), g.shape().back()}, g.dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t idx_ndim = s.input(1).ndim();
    StrategyRows rows = {{Shard(0), Replicate(), Replicate()},
                         {Shard(1), Shard(idx_ndim), Replicate()}};
    for (int64_t d = 0; d < idx_ndim; ++d) rows.push_back({Partial(), Shard(d), Shard(d)});
    return rows;
  };
  op.kernel = single_output(embedding_backward_kernel);
  // Linear in grad: its gradient is the lookup of the incoming one (create_graph).
  op.differentiable = true;
  op.saved_inputs = 2u;  // indices
  op.backward = detail::embedding_backward_grad;
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t rows = 3 * w + 1;
    const int64_t s = detail::short_size(w);  // the last rank's block of columns is empty
    return std::vector<OpSample>{
        {{sample({2, w + 1, 4}), sample({2, w + 1}, kInt64, 0, rows - 1)}, {rows}},
        {{sample({5, 2 * w}), sample({5}, kInt64, 0, rows - 1)}, {rows}},
        {{sample({s, s}), sample({s}, kInt64, 0, rows - 1)}, {rows}},
        // padding_idx 1 (indices 0..2: row 1 is looked up and its gradient zeroed)
        {{sample({2, w + 1, 4}), sample({2, w + 1}, kInt64, 0, 2)}, {rows, int64_t{1}}}};
  };
  registry.add(std::move(op));
}

}  // namespace

void register_embedding_ops(Registry& registry) {
  OpInfo op = detail::make_op("embedding", {"weight", "indices"}, Linearity::kLinearInFirst);
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& w = s.input(0);
    const DTensorSpec& idx = s.input(1);
    DT_CHECK(w.ndim() == 2, "[embedding] argument weight has shape %s, expected a 2-d table",
             shape_str(w.shape()));
    DT_CHECK(idx.dtype() == kInt32 || idx.dtype() == kInt64,
             "[embedding] argument indices has dtype %s, expected int32 or int64",
             dtype_name(idx.dtype()));
    Shape shape = idx.shape();
    shape.push_back(w.shape()[1]);
    return OutputMetas{TensorMeta(shape, w.dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t idx_ndim = s.input(1).ndim();
    StrategyRows rows = {{Partial(), Shard(0), Replicate()},
                         {Shard(idx_ndim), Shard(1), Replicate()}};
    for (int64_t d = 0; d < idx_ndim; ++d) rows.push_back({Shard(d), Replicate(), Shard(d)});
    return rows;
  };
  op.kernel = single_output(embedding_kernel);
  op.backward = embedding_grad;
  op.saved_inputs = 2u;  // indices
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t rows = 3 * w + 1;
    const int64_t s = detail::short_size(w);  // the last rank's block of columns is empty
    return std::vector<OpSample>{{{sample({rows, 4}), sample({2, w + 1}, kInt64, 0, rows - 1)}, {}},
                                 {{sample({rows, 2 * w}), sample({5}, kInt64, 0, rows - 1)}, {}},
                                 {{sample({rows, s}), sample({s}, kInt64, 0, rows - 1)}, {}}};
  };
  registry.add(std::move(op));
  register_embedding_backward(registry);
}

}  // namespace dtensor
