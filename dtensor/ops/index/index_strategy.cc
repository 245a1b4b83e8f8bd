// Registration of the indexing family's DTensor ops: gather, its gradient gather_backward, the
// scatters (scatter_add, scatter, scatter.value, scatter_reduce), index_add and one_hot
// (strategies for ONE mesh dim, meta, kernels, samples); the backward formulas are in
// index_backward.cc, the DTensor forms of index.h in index_dtensor.cc.
//
// gather(self, index; dim) -> out (index's shape). Rows [out | self, index]:
//   [S(d) | S(d), S(d)]    d != dim where self and index have the same size at d
//   [S(dim) | R, S(dim)]   the index sharded along dim: each rank gathers its positions
//   [P(sum) | S(dim), R]   self sharded along dim: each rank picks the indices in its block,
//                          zeros elsewhere; the sum over ranks is the gather
// Linear in self ([P | P, R]).
#include <absl/strings/str_format.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/detail/index_backward.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

// "" or "[op] index 7 out of range for dim 1 of size 5" (the Tensor gather's message).
std::string range_error(std::string_view op, const Tensor& index, int64_t dim, int64_t size) {
  const std::optional<int64_t> bad = detail::first_out_of_range(index, size);
  if (!bad) return "";
  return absl::StrFormat("[%s] index %d out of range for dim %d of size %d", op, *bad, dim, size);
}

bool sharded_along(const DTensorSpec& spec, int64_t dim) {
  for (const Placement& p : spec.placements()) {
    if (p.is_shard(dim)) return true;
  }
  return false;
}

// Rows of gather ([out | self, index]) and gather_backward ([self grad | grad, index]):
// `self_shape` is self's (gather's input / the gradient op's output), `index_shape` the
// index's.
StrategyRows gather_rows(const Shape& self_shape, const Shape& index_shape, int64_t dim,
                         bool backward) {
  StrategyRows rows;
  for (int64_t d = 0; d < static_cast<int64_t>(self_shape.size()); ++d) {
    if (d != dim && self_shape[d] == index_shape[d]) rows.push_back({Shard(d), Shard(d), Shard(d)});
  }
  if (backward) {
    // [self grad | grad, index]: each rank scatters into its block of dim, or scatters its part
    // of grad into the whole (Partial).
    rows.push_back({Shard(dim), Replicate(), Replicate()});
    rows.push_back({Partial(), Shard(dim), Shard(dim)});
  } else {
    rows.push_back({Shard(dim), Replicate(), Shard(dim)});
    rows.push_back({Partial(), Shard(dim), Replicate()});
  }
  return rows;
}

void check_gather_args(const OpSchema& s, const Shape& self_shape, const DTensorSpec& index,
                       int64_t dim) {
  detail::check_index_dtype(s.name(), index.dtype(), "index");
  DT_CHECK(index.ndim() == static_cast<int64_t>(self_shape.size()),
           "[%s] index (shape %s) must have as many dims as self (shape %s)", s.name(),
           shape_str(index.shape()), shape_str(self_shape));
  for (int64_t d = 0; d < index.ndim(); ++d) {
    DT_CHECK(d == dim || index.shape()[d] <= self_shape[d],
             "[%s] index (shape %s) is larger than self (shape %s) at dim %d", s.name(),
             shape_str(index.shape()), shape_str(self_shape), d);
  }
}

// The masked pick of a self shard along dim (the Partial row), or the plain gather.
Tensor gather_kernel(const KernelContext& c, Locals l) {
  const DTensorSpec& self = c.input_spec(0);
  const int64_t dim = normalize_dim(c.arg<int64_t>(0), self.ndim(), "gather");
  const int64_t size = self.shape()[dim];
  check_on_all_ranks(c.input_spec(1), range_error("gather", l[1], dim, size));
  if (!sharded_along(self, dim)) return gather(l[0], dim, l[1]);
  const int64_t offset = c.input_shard(0).offset[dim], local = l[0].size(dim);
  const TensorOptions out_opts(l[0].dtype(), l[0].device());
  if (local == 0) return zeros(l[1].sizes(), out_opts);
  const Tensor shifted = l[1].to(kInt64) - Scalar(offset);
  const Tensor inside = logical_and(ge(shifted, Scalar(int64_t{0})), lt(shifted, Scalar(local)));
  const Tensor safe = where(inside, shifted, zeros({}, TensorOptions(kInt64, l[1].device())));
  return where(inside, gather(l[0], dim, safe), zeros({}, out_opts));
}

// gather_backward(grad, index; dim, self_shape): zeros of self_shape with grad added at the
// indices (each rank its block of dim, skipping indices outside it).
Tensor gather_backward_kernel(const KernelContext& c, Locals l) {
  const LocalShard out = c.output_shard(0);
  const int64_t dim = c.arg<int64_t>(0);
  return scatter_add_shard(out.shape, dim, l[1], l[0], out.offset[dim]);
}

std::vector<OpSample> gather_samples(int64_t w) {
  using detail::sample;
  const int64_t n = 3 * w + 1;
  return {{{sample({n, 5}), sample({n, 3}, kInt64, 0, 4)}, {int64_t{1}}},
          {{sample({n, 5}), sample({2 * w, 5}, kInt64, 0, n - 1)}, {int64_t{0}}},
          {{sample({4, n}), sample({4, 2}, kInt64, 0, n - 1)}, {int64_t{-1}}},
          {{sample({detail::short_size(w), 5}), sample({detail::short_size(w), 3}, kInt64, 0, 4)},
           {int64_t{1}}}};
}

void register_gather(Registry& reg) {
  OpInfo op = detail::make_op("gather", {"self", "index"}, Linearity::kLinearInFirst);
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& self = s.input(0);
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), self.ndim(), "gather");
    check_gather_args(s, self.shape(), s.input(1), dim);
    return OutputMetas{TensorMeta(s.input(1).shape(), self.dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), "gather");
    return gather_rows(s.input(0).shape(), s.input(1).shape(), dim, /*backward=*/false);
  };
  op.kernel = single_output(gather_kernel);
  op.samples = gather_samples;
  op.backward = detail::gather_grad;
  op.saved_inputs = 2u;  // the index
  reg.add(std::move(op));

  OpInfo bw = detail::gradient_op("gather_backward", {"grad", "index"});
  bw.meta = [](const OpSchema& s) {
    const Shape& shape = s.arg<Shape>(1);
    check_gather_args(s, shape, s.input(1), s.arg<int64_t>(0));
    DT_CHECK(s.input(0).shape() == s.input(1).shape(),
             "[gather_backward] grad (shape %s) and index (shape %s) must have one shape",
             shape_str(s.input(0).shape()), shape_str(s.input(1).shape()));
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  bw.strategy = [](const OpSchema& s) {
    return gather_rows(s.arg<Shape>(1), s.input(1).shape(), s.arg<int64_t>(0), /*backward=*/true);
  };
  bw.kernel = single_output(gather_backward_kernel);
  // Linear in grad: its gradient is the gather of the incoming one (create_graph).
  bw.differentiable = true;
  bw.saved_inputs = 2u;  // index
  bw.backward = detail::gather_backward_grad;
  bw.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    return std::vector<OpSample>{
        {{sample({n, 3}), sample({n, 3}, kInt64, 0, 4)}, {int64_t{1}, Shape{n, 5}}},
        {{sample({2 * w, 5}), sample({2 * w, 5}, kInt64, 0, n - 1)}, {int64_t{0}, Shape{n, 5}}},
        {{sample({detail::short_size(w), 3}), sample({detail::short_size(w), 3}, kInt64, 0, 4)},
         {int64_t{1}, Shape{detail::short_size(w), 5}}}};
  };
  reg.add(std::move(bw));
}

// The rows every scatter into self has, [out | self, index, src]: self sharded along dim with
// index and src whole (each rank adds the entries whose index falls in its block, no
// communication); and, linear in self and src together, [P | P, R, P] for sum and avg.
void add_scatter_rows(StrategyRows& rows, int64_t dim) {
  rows.push_back({Shard(dim), Shard(dim), Replicate(), Replicate()});
  for (ReduceOp r : {ReduceOp::kSum, ReduceOp::kAvg}) {
    rows.push_back({Partial(r), Partial(r), Replicate(), Partial(r)});
  }
}

// self + src scattered at index (src's shape) along dim; with self sharded along dim, only the
// entries whose index falls in this rank's block. Index range errors raised on every rank
// that may hold different indices.
Tensor add_scattered(const KernelContext& c, const Tensor& self, int64_t dim, const Tensor& index,
                     const Tensor& src, std::string_view op) {
  const DTensorSpec& spec = c.input_spec(0);
  check_on_all_ranks(c.input_spec(1), range_error(op, index, dim, spec.shape()[dim]));
  if (!sharded_along(spec, dim)) return scatter_add(self, dim, index, src);
  return self + scatter_add_shard(self.sizes(), dim, index, src, c.input_shard(0).offset[dim])
                    .to(self.dtype());
}

// The meta of scatter_add and scatter ([self, index, src; dim]): the index as gather's, src of
// the index's shape and self's dtype; the output has self's meta.
OutputMetas scatter_src_meta(const OpSchema& s) {
  const DTensorSpec& self = s.input(0);
  const int64_t dim = normalize_dim(s.arg<int64_t>(0), self.ndim(), s.name());
  check_gather_args(s, self.shape(), s.input(1), dim);
  DT_CHECK(s.input(2).shape() == s.input(1).shape() && s.input(2).dtype() == self.dtype(),
           "[%s] src (shape %s, %s) must have the index's shape %s and self's dtype %s", s.name(),
           shape_str(s.input(2).shape()), dtype_name(s.input(2).dtype()),
           shape_str(s.input(1).shape()), dtype_name(self.dtype()));
  return OutputMetas{self.meta()};
}

// scatter_add(self, index, src; dim) -> a copy of self with src added at the indices. Rows
// ([out | self, index, src]): every dim but `dim` sharded alike where index and self have the
// same size; self sharded along dim with index and src whole (each rank adds the entries whose
// index falls in its block, no communication); and, linear in self and src together,
// [P | P, R, P] for sum and avg.
void register_scatter_add(Registry& reg) {
  OpInfo op = detail::make_op("scatter_add", {"self", "index", "src"});
  op.meta = scatter_src_meta;
  op.strategy = [](const OpSchema& s) {
    const Shape& self = s.input(0).shape();
    const Shape& index = s.input(1).shape();
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), "scatter_add");
    StrategyRows rows;
    for (int64_t d = 0; d < static_cast<int64_t>(self.size()); ++d) {
      if (d != dim && self[d] == index[d]) rows.push_back(detail::uniform_row(4, Shard(d)));
    }
    add_scatter_rows(rows, dim);
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "scatter_add");
    return add_scattered(c, l[0], dim, l[1], l[2], "scatter_add");
  });
  op.backward = detail::scatter_add_grad;
  op.saved_inputs = 2u;  // the index
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    return std::vector<OpSample>{
        {{sample({n, 5}), sample({n, 3}, kInt64, 0, 4), sample({n, 3})}, {int64_t{1}}},
        {{sample({n, 5}), sample({2 * w, 5}, kInt64, 0, n - 1), sample({2 * w, 5})}, {int64_t{0}}},
        {{sample({4, n}), sample({4, 2}, kInt64, 0, n - 1), sample({4, 2})}, {int64_t{-1}}},
        {{sample({detail::short_size(w), 5}), sample({detail::short_size(w), 3}, kInt64, 0, 4),
          sample({detail::short_size(w), 3})},
         {int64_t{1}}}};
  };
  reg.add(std::move(op));
}

// self with src written at index along dim; with self sharded along dim, only the entries whose
// index falls in this rank's block. Index range errors raised on every rank that may hold
// different indices.
Tensor write_scattered(const KernelContext& c, const Tensor& self, int64_t dim, const Tensor& index,
                       const Tensor& src) {
  const DTensorSpec& spec = c.input_spec(0);
  check_on_all_ranks(c.input_spec(1), range_error("scatter", index, dim, spec.shape()[dim]));
  return scatter(self, dim, index, src,
                 sharded_along(spec, dim) ? c.input_shard(0).offset[dim] : kNoOffset);
}

// The rows of the scatters that overwrite ([out | self, index(, src)]): every dim but `dim`
// sharded alike where index and self have the same size; self sharded along dim with the
// index (and src) whole. No Partial rows: an overwrite is not linear.
StrategyRows overwrite_rows(const Shape& self, const Shape& index, int64_t dim, int64_t width) {
  StrategyRows rows;
  for (int64_t d = 0; d < static_cast<int64_t>(self.size()); ++d) {
    if (d != dim && self[d] == index[d]) rows.push_back(detail::uniform_row(width, Shard(d)));
  }
  Placements along(static_cast<size_t>(width), Replicate());
  along[0] = along[1] = Shard(dim);
  rows.push_back(std::move(along));
  return rows;
}

// Samples whose index has one entry per line along dim (no position written twice, so the
// finite-difference check sees PyTorch's gradient rule exactly).
std::vector<OpSample> overwrite_samples(int64_t w, bool with_src) {
  using detail::sample;
  const int64_t n = 3 * w + 1;
  auto call = [&](Shape self, Shape index, int64_t high, int64_t dim) {
    OpSample c{{sample(self), sample(index, kInt64, 0, static_cast<double>(high))}, {}};
    if (with_src) {
      c.inputs.push_back(sample(index));
      c.args = {dim};
    } else {
      c.args = {2.5, dim};
    }
    return c;
  };
  return {call({n, 5}, {n, 1}, 4, 1), call({n, 4}, {1, 4}, n - 1, 0),
          call({4, n}, {3, 1}, n - 1, -1),
          call({detail::short_size(w), 5}, {detail::short_size(w), 1}, 4, 1)};
}

// scatter(self, index, src; dim) -> a copy of self with src written at the indices (the last
// entry wins where a position repeats). Rows: overwrite_rows.
void register_scatter(Registry& reg) {
  OpInfo op = detail::make_op("scatter", {"self", "index", "src"});
  op.meta = scatter_src_meta;
  op.strategy = [](const OpSchema& s) {
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), "scatter");
    return overwrite_rows(s.input(0).shape(), s.input(1).shape(), dim, 4);
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const int64_t dim = normalize_dim(c.arg<int64_t>(0), c.input_spec(0).ndim(), "scatter");
    return write_scattered(c, l[0], dim, l[1], l[2]);
  });
  op.backward = detail::scatter_grad;
  op.saved_inputs = 2u;  // the index
  op.samples = [](int64_t w) { return overwrite_samples(w, /*with_src=*/true); };
  reg.add(std::move(op));
}

// scatter.value(self, index; value [runtime], dim): scatter of a scalar. Rows: overwrite_rows.
void register_scatter_value(Registry& reg) {
  OpInfo op = detail::make_op("scatter.value", {"self", "index"});
  op.schema_info.static_argnum = 1;
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& self = s.input(0);
    check_gather_args(s, self.shape(), s.input(1),
                      normalize_dim(s.arg<int64_t>(1), self.ndim(), "scatter"));
    return OutputMetas{self.meta()};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t dim = normalize_dim(s.arg<int64_t>(1), s.input(0).ndim(), "scatter");
    return overwrite_rows(s.input(0).shape(), s.input(1).shape(), dim, 3);
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const int64_t dim = normalize_dim(c.arg<int64_t>(1), c.input_spec(0).ndim(), "scatter");
    const Tensor src = full(l[1].sizes(), c.scalar(0), TensorOptions(l[0].dtype(), l[0].device()));
    return write_scattered(c, l[0], dim, l[1], src);
  });
  op.backward = detail::scatter_value_grad;
  op.saved_inputs = 2u;  // the index
  op.samples = [](int64_t w) { return overwrite_samples(w, /*with_src=*/false); };
  reg.add(std::move(op));
}

// scatter_reduce(self, index, src; dim, reduce, include_self) -> a copy of self with the src
// entries reduced into the positions they name. Rows ([out | self, index, src]): every dim but
// `dim` sharded alike where index and self have the same size; self sharded along dim with index
// and src whole (each rank reduces the entries whose index falls in its block: a position's
// whole reduction lives on one rank); and [P | P, R, P] where the reduction commutes with the
// Partial one: sum and mean are linear in self and src together for a fixed index (mean divides
// by counts that depend on the index alone), amax commutes with Partial(max), amin with
// Partial(min). Integer dtypes keep only P(sum) for sum (wrapping sums are linear; integer
// averages and mean's floor division are not); prod has no Partial row.
StrategyRows scatter_reduce_rows(const OpSchema& s) {
  const Shape& self = s.input(0).shape();
  const Shape& index = s.input(1).shape();
  const int64_t dim = normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), "scatter_reduce");
  const detail::ScatterReduceOp reduce =
      detail::parse_scatter_reduce(s.arg<std::string_view>(1), "scatter_reduce");
  const bool floating = is_floating(s.input(0).dtype());
  StrategyRows rows;
  for (int64_t d = 0; d < static_cast<int64_t>(self.size()); ++d) {
    if (d != dim && self[d] == index[d]) rows.push_back(detail::uniform_row(4, Shard(d)));
  }
  rows.push_back({Shard(dim), Shard(dim), Replicate(), Replicate()});
  auto partial = [&](ReduceOp r) {
    rows.push_back({Partial(r), Partial(r), Replicate(), Partial(r)});
  };
  switch (reduce) {
    case detail::ScatterReduceOp::kSum:
      partial(ReduceOp::kSum);
      if (floating) partial(ReduceOp::kAvg);
      break;
    case detail::ScatterReduceOp::kMean:
      if (floating) {
        partial(ReduceOp::kSum);
        partial(ReduceOp::kAvg);
      }
      break;
    case detail::ScatterReduceOp::kAmax:
      partial(ReduceOp::kMax);
      break;
    case detail::ScatterReduceOp::kAmin:
      partial(ReduceOp::kMin);
      break;
    case detail::ScatterReduceOp::kProd:
      break;
  }
  return rows;
}

void register_scatter_reduce(Registry& reg) {
  OpInfo op = detail::make_op("scatter_reduce", {"self", "index", "src"});
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& self = s.input(0);
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), self.ndim(), "scatter_reduce");
    detail::parse_scatter_reduce(s.arg<std::string_view>(1), "scatter_reduce");
    s.arg<bool>(2);
    check_gather_args(s, self.shape(), s.input(1), dim);
    DT_CHECK(s.input(2).shape() == s.input(1).shape() && s.input(2).dtype() == self.dtype(),
             "[scatter_reduce] src (shape %s, %s) must have the index's shape %s and self's dtype "
             "%s",
             shape_str(s.input(2).shape()), dtype_name(s.input(2).dtype()),
             shape_str(s.input(1).shape()), dtype_name(self.dtype()));
    DT_CHECK(self.dtype() != kBool,
             "[scatter_reduce] argument self has dtype bool, expected a floating or integer dtype");
    return OutputMetas{self.meta()};
  };
  op.strategy = scatter_reduce_rows;
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const DTensorSpec& spec = c.input_spec(0);
    const int64_t dim = normalize_dim(c.arg<int64_t>(0), spec.ndim(), "scatter_reduce");
    check_on_all_ranks(c.input_spec(1),
                       range_error("scatter_reduce", l[1], dim, spec.shape()[dim]));
    return scatter_reduce(l[0], dim, l[1], l[2], c.arg<std::string_view>(1), c.arg<bool>(2),
                          sharded_along(spec, dim) ? c.input_shard(0).offset[dim] : kNoOffset);
  });
  op.backward = detail::scatter_reduce_grad;
  op.saved_inputs = 7u;   // self, index and src (prod and amax / amin read them)
  op.saved_outputs = 1u;  // the result (prod, amax / amin)
  // Every reduction both ways; repeated positions and positions no index names in each.
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    std::vector<OpSample> out;
    for (std::string_view reduce : {"sum", "prod", "mean", "amax", "amin"}) {
      for (bool include_self : {true, false}) {
        out.push_back({{sample({n, 5}), sample({n, 3}, kInt64, 0, 4), sample({n, 3})},
                       {int64_t{1}, reduce, include_self}});
        out.push_back({{sample({n, 4}), sample({2 * w, 4}, kInt64, 0, n - 1), sample({2 * w, 4})},
                       {int64_t{0}, reduce, include_self}});
      }
    }
    out.push_back({{sample({4, n}), sample({4, 2}, kInt64, 0, n - 1), sample({4, 2})},
                   {int64_t{-1}, std::string_view("amax"), false}});
    const int64_t s = detail::short_size(w);
    out.push_back({{sample({s, 5}), sample({s, 3}, kInt64, 0, 4), sample({s, 3})},
                   {int64_t{1}, std::string_view("sum"), true}});
    return out;
  };
  reg.add(std::move(op));
}

// index_add(self, index, source; alpha [runtime], dim): scatter_add of alpha * source with the
// 1-d index expanded along dim. Rows: every dim but `dim` sharded alike on self and source (the
// index whole), and the scatter rows.
void register_index_add(Registry& reg) {
  OpInfo op = detail::make_op("index_add", {"self", "index", "source"});
  op.schema_info.static_argnum = 1;
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& self = s.input(0);
    detail::check_index_dtype("index_add", s.input(1).dtype(), "index");
    DT_CHECK(s.input(2).dtype() == self.dtype(),
             "[index_add] source has dtype %s, expected self's %s", dtype_name(s.input(2).dtype()),
             dtype_name(self.dtype()));
    detail::index_add_shapes(self.shape(), s.arg<int64_t>(1), s.input(1).shape(),
                             s.input(2).shape());
    return OutputMetas{self.meta()};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(1), n, "index_add");
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      if (d != dim) rows.push_back({Shard(d), Shard(d), Replicate(), Shard(d)});
    }
    add_scatter_rows(rows, dim);
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const detail::SelectShapes s = detail::index_add_shapes(
        c.input_spec(0).shape(), c.arg<int64_t>(1), l[1].sizes(), c.input_spec(2).shape());
    const Tensor index = l[1].reshape(s.along).expand(l[2].sizes()).contiguous();
    const Scalar alpha = c.scalar(0);
    const Tensor src = alpha.to<double>() == 1.0 ? l[2] : l[2] * alpha;
    return add_scattered(c, l[0], s.dim, index, src, "index_add");
  });
  op.backward = detail::index_add_grad;
  op.saved_inputs = 2u;  // the index
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    return std::vector<OpSample>{
        {{sample({n, 5}), sample({3}, kInt64, 0, 4), sample({n, 3})}, {1.0, int64_t{1}}},
        {{sample({n, 4}), sample({2 * w}, kInt64, 0, n - 1), sample({2 * w, 4})},
         {0.5, int64_t{0}}},
        {{sample({2, n}), sample({w + 1}, kInt64, 0, n - 1), sample({2, w + 1})},
         {2.0, int64_t{-1}}},
        {{sample({detail::short_size(w), 5}), sample({3}, kInt64, 0, 4),
          sample({detail::short_size(w), 3})},
         {1.0, int64_t{1}}}};
  };
  reg.add(std::move(op));
}

// one_hot(index; num_classes) -> int64 [..., num_classes]: every index dim may be sharded.
void register_one_hot(Registry& reg) {
  OpInfo op = detail::make_op("one_hot", {"self"});
  op.differentiable = false;
  op.meta = [](const OpSchema& s) {
    DT_CHECK(s.input(0).dtype() == kInt64, "[one_hot] argument self has dtype %s, expected int64",
             dtype_name(s.input(0).dtype()));
    const int64_t classes = s.arg<int64_t>(0);
    DT_CHECK(classes >= 0, "[one_hot] num_classes must be >= 0 here, got %d", classes);
    Shape shape = s.input(0).shape();
    shape.push_back(classes);
    return OutputMetas{TensorMeta(shape, kInt64)};
  };
  op.strategy = [](const OpSchema& s) {
    StrategyRows rows;
    for (int64_t d = 0; d < s.input(0).ndim(); ++d) rows.push_back({Shard(d), Shard(d)});
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const int64_t classes = c.arg<int64_t>(0);
    const std::optional<int64_t> bad = detail::first_out_of_range(l[0], classes);
    check_on_all_ranks(
        c.input_spec(0),
        bad ? absl::StrFormat("[one_hot] class %d out of range for %d classes", *bad, classes)
            : std::string());
    return one_hot(l[0], classes);
  });
  op.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 2}, kInt64, 0, 3)}, {int64_t{4}}},
                                 {{sample({2 * w}, kInt64, 0, 2)}, {int64_t{3}}},
                                 {{sample({detail::short_size(w)}, kInt64, 0, 2)}, {int64_t{3}}}};
  };
  reg.add(std::move(op));
}

}  // namespace

void register_index_ops(Registry& reg) {
  register_gather(reg);
  register_scatter_add(reg);
  register_scatter(reg);
  register_scatter_value(reg);
  register_scatter_reduce(reg);
  register_index_add(reg);
  register_one_hot(reg);
}

}  // namespace dtensor
