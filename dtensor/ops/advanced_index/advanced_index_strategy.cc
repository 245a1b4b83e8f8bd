// Registration of advanced indexing: index (aten::index.Tensor) and index_put (with accumulate),
// their meta, strategies for ONE mesh dim, kernels and samples (the backward formulas are in
// advanced_index_backward.cc, the DTensor forms of advanced_index.h in
// advanced_index_dtensor.cc).
//
// The present index tensors are inputs after self (index: [self, indices...]; index_put:
// [self, values, indices...]); the dims they index are the static arg `dims` (a Shape, e.g.
// {0, 2} for x[i, :, j]), so a missing entry (a full slice) costs nothing.
//
// index(self, indices...; dims) -> out. Rows [out | self, indices...]:
//   [S(o) | S(d), R..]          d not indexed, o its dim in the result
//   [S(o) | R, S(a_j) or R..]   o a broadcast dim of the result: each index that has it at full
//                               size sharded along it (dim a_j of index j), the others whole
//   [P(sum) | S(d_j), R..]      self sharded along an indexed dim: each rank picks the indices
//                               in its block, zeros elsewhere (not for bool)
// Linear in self ([P | P, R..]).
// index_put(self, values, indices...; dims, accumulate) -> self's shape. Rows
// [out | self, values, indices...]:
//   [S(d) | S(d), S(v) or R, R..]   d not indexed; values sharded along its matching dim when it
//                                   has it at full size, else whole (broadcast)
//   [S(d_j) | S(d_j), R, R..]       self sharded along an indexed dim: each rank writes (adds)
//                                   the entries that fall in its block; the same entry wins
//   accumulate only (not bool): [P | P, P, R..] for sum (and avg on floats), and for each
//   broadcast dim [P(sum) | P(sum), S(v) or R, S(a_j) or R..]: each rank adds its part of the
//   values at its part of the indices into its share of self.
#include <absl/container/inlined_vector.h>
#include <absl/strings/str_format.h>

#include <algorithm>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/advanced_index/detail/advanced_index.h"
#include "dtensor/ops/advanced_index/detail/advanced_index_backward.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;
using detail::AdvancedIndexPlan;

// The plan of a call from its specs: self, and the index tensors from input `first` on.
AdvancedIndexPlan spec_plan(const OpSchema& s, const char* op, int64_t first) {
  const DTensorSpec& self = s.input(0);
  const Shape& dims = s.arg<Shape>(0);
  DT_CHECK(s.num_inputs() == first + static_cast<int64_t>(dims.size()),
           "[%s] expected %d index tensors (indexed dims %s), got %d", op, dims.size(),
           shape_str(dims), s.num_inputs() - first);
  std::vector<Shape> shapes;
  for (size_t j = 0; j < dims.size(); ++j) {
    const DTensorSpec& t = s.input(first + static_cast<int64_t>(j));
    const std::string err = detail::index_dtype_error(op, t.dtype(), dims[j]);
    DT_CHECK(err.empty(), "%s", err);
    shapes.push_back(t.shape());
  }
  return detail::advanced_index_plan(op, self.shape(), dims, shapes);
}

// Rows sharding the index tensors (inputs from `first`) along broadcast dim b of the plan: the
// output's dim out_first + b; `row` holds the other placements already.
bool shard_indices_along(const OpSchema& s, const AdvancedIndexPlan& plan, int64_t first, int64_t b,
                         Placements& row) {
  const int64_t nb = static_cast<int64_t>(plan.broadcast.size());
  bool any = false;
  for (size_t j = 0; j < plan.dims.size(); ++j) {
    const DTensorSpec& t = s.input(first + static_cast<int64_t>(j));
    const int64_t a = b - (nb - t.ndim());
    if (a >= 0 && t.shape()[a] == plan.broadcast[b]) {
      row[1 + first + j] = Shard(a);  // 1 output first
      any = true;
    }
  }
  return any;
}

// The values' dim that lines up with the result's dim `o` when it has the result's size there.
Placement values_placement(const DTensorSpec& values, const AdvancedIndexPlan& plan, int64_t o) {
  const int64_t a = o - (static_cast<int64_t>(plan.out.size()) - values.ndim());
  if (a >= 0 && values.shape()[a] == plan.out[o]) return Shard(a);
  return Replicate();
}

// Range errors of the index tensors (inputs from `first`), raised on every rank that may hold
// different indices (the union of the mesh dims where some index is not Replicate); then the
// global sizes and this rank's offsets of self's indexed dims.
void check_and_locate(const KernelContext& c, Locals l, const char* op, int64_t first, Shape* sizes,
                      Shape* offsets) {
  const DTensorSpec& self = c.input_spec(0);
  const Shape& dims = c.arg<Shape>(0);
  std::string err;
  absl::InlinedVector<int64_t, 4> mesh_dims;
  for (size_t j = 0; j < dims.size(); ++j) {
    const int64_t i = first + static_cast<int64_t>(j);
    if (err.empty()) err = detail::index_range_error(op, l[i], dims[j], self.shape()[dims[j]]);
    const Placements& p = c.input_spec(i).placements();
    for (int64_t m = 0; m < static_cast<int64_t>(p.size()); ++m) {
      if (!p[m].is_replicate() &&
          std::find(mesh_dims.begin(), mesh_dims.end(), m) == mesh_dims.end()) {
        mesh_dims.push_back(m);
      }
    }
  }
  check_on_all_ranks(c.mesh(), mesh_dims, err);
  const LocalShard shard = c.input_shard(0);
  for (int64_t d : dims) {
    sizes->push_back(self.shape()[d]);
    offsets->push_back(shard.offset[d]);
  }
}

void register_index(Registry& reg) {
  OpInfo op = detail::make_op("index", {"self"}, Linearity::kLinearInFirst);
  op.meta = [](const OpSchema& s) {
    const AdvancedIndexPlan plan = spec_plan(s, "index", 1);
    return OutputMetas{TensorMeta(plan.out, s.input(0).dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    const AdvancedIndexPlan plan = spec_plan(s, "index", 1);
    const int64_t width = 1 + s.num_inputs();
    const int64_t ndim = s.input(0).ndim();
    StrategyRows rows;
    for (int64_t d = 0; d < ndim; ++d) {
      if (plan.out_dim_of_self[d] < 0) continue;
      Placements row(static_cast<size_t>(width), Replicate());
      row[0] = Shard(plan.out_dim_of_self[d]);
      row[1] = Shard(d);
      rows.push_back(std::move(row));
    }
    for (int64_t b = 0; b < static_cast<int64_t>(plan.broadcast.size()); ++b) {
      Placements row(static_cast<size_t>(width), Replicate());
      row[0] = Shard(plan.out_first + b);
      if (shard_indices_along(s, plan, 1, b, row)) rows.push_back(std::move(row));
    }
    if (s.input(0).dtype() != kBool) {
      for (int64_t d : plan.dims) {
        Placements row(static_cast<size_t>(width), Replicate());
        row[0] = Partial();
        row[1] = Shard(d);
        rows.push_back(std::move(row));
      }
    }
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    Shape sizes, offsets;
    check_and_locate(c, l, "index", 1, &sizes, &offsets);
    return detail::index_block(l[0], c.arg<Shape>(0), l.subspan(1), sizes, offsets);
  });
  op.backward = detail::index_grad;
  op.saved_inputs = ~uint32_t{1};  // the indices
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    const double hi = static_cast<double>(n - 1), lo = -static_cast<double>(n);
    return std::vector<OpSample>{
        // x[:, i] (one index, repeats and negatives)
        {{sample({n, 5}), sample({2 * w}, kInt64, -5, 4)}, {Shape{1}}},
        // x[i, :, j]: separated, the broadcast dims first
        {{sample({n, 4, 3}), sample({3 * w}, kInt64, lo, hi), sample({1}, kInt64, 0, 2)},
         {Shape{0, 2}}},
        // x[:, i, j]: adjacent, broadcast [2, 1] with [w + 1]
        {{sample({4, n, 5}), sample({2, 1}, kInt64, lo, hi), sample({w + 1}, kInt64, -5, 4)},
         {Shape{1, 2}}},
        // x[i] with a 2-d index
        {{sample({n, 3}), sample({2, w + 1}, kInt64, 0, hi)}, {Shape{0}}},
        // x[:, i] with w - 1 rows: the last rank's block of rows is empty
        {{sample({detail::short_size(w), 5}), sample({2}, kInt64, -5, 4)}, {Shape{1}}}};
  };
  reg.add(std::move(op));
}

void register_index_put(Registry& reg) {
  OpInfo op = detail::make_op("index_put", {"self", "values"});
  op.meta = [](const OpSchema& s) {
    const AdvancedIndexPlan plan = spec_plan(s, "index_put", 2);
    s.arg<bool>(1);
    const DTensorSpec& self = s.input(0);
    const DTensorSpec& values = s.input(1);
    DT_CHECK(values.dtype() == self.dtype(),
             "[index_put] argument values has dtype %s, expected self's dtype %s",
             dtype_name(values.dtype()), dtype_name(self.dtype()));
    bool fits = values.ndim() <= static_cast<int64_t>(plan.out.size());
    for (int64_t a = 0; fits && a < values.ndim(); ++a) {
      const int64_t v = values.shape()[values.ndim() - 1 - a];
      fits = v == 1 || v == plan.out[plan.out.size() - 1 - a];
    }
    DT_CHECK(fits,
             "[index_put] argument values has shape %s, expected a shape that broadcasts to the "
             "indexed shape %s",
             shape_str(values.shape()), shape_str(plan.out));
    return OutputMetas{self.meta()};
  };
  op.strategy = [](const OpSchema& s) {
    const AdvancedIndexPlan plan = spec_plan(s, "index_put", 2);
    const bool accumulate = s.arg<bool>(1);
    const DTensorSpec& self = s.input(0);
    const DTensorSpec& values = s.input(1);
    const size_t width = static_cast<size_t>(1 + s.num_inputs());
    StrategyRows rows;
    for (int64_t d = 0; d < self.ndim(); ++d) {
      Placements row(width, Replicate());
      row[0] = row[1] = Shard(d);
      if (plan.out_dim_of_self[d] >= 0) {
        row[2] = values_placement(values, plan, plan.out_dim_of_self[d]);
      }
      rows.push_back(std::move(row));
    }
    if (accumulate && self.dtype() != kBool) {
      for (ReduceOp r : {ReduceOp::kSum, ReduceOp::kAvg}) {
        if (r == ReduceOp::kAvg && !is_floating(self.dtype())) continue;
        Placements row(width, Replicate());
        row[0] = row[1] = row[2] = Partial(r);
        rows.push_back(std::move(row));
      }
      for (int64_t b = 0; b < static_cast<int64_t>(plan.broadcast.size()); ++b) {
        Placements row(width, Replicate());
        row[0] = row[1] = Partial();
        row[2] = values_placement(values, plan, plan.out_first + b);
        if (shard_indices_along(s, plan, 2, b, row)) rows.push_back(std::move(row));
      }
    }
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    Shape sizes, offsets;
    check_and_locate(c, l, "index_put", 2, &sizes, &offsets);
    return detail::index_put_block(l[0], c.arg<Shape>(0), l.subspan(2), l[1], c.arg<bool>(1), sizes,
                                   offsets);
  });
  op.backward = detail::index_put_grad;
  op.saved_inputs = ~uint32_t{3};  // the indices
  // Without accumulate the positions are distinct (size-1 indices), so the finite-difference
  // check sees PyTorch's gradient rule exactly; with it, repeats and negatives.
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    const double hi = static_cast<double>(n - 1), lo = -static_cast<double>(n);
    std::vector<OpSample> out;
    out.push_back(
        {{sample({n, 5}), sample({n, 2 * w}), sample({2 * w}, kInt64, -5, 4)}, {Shape{1}, true}});
    out.push_back(
        {{sample({n, 5}), sample({2 * w}), sample({2 * w}, kInt64, -5, 4)}, {Shape{1}, true}});
    out.push_back({{sample({n, 4, 3}), sample({3 * w, 1}), sample({3 * w}, kInt64, lo, hi),
                    sample({1}, kInt64, 0, 2)},
                   {Shape{0, 2}, true}});
    out.push_back({{sample({4, n, 5}), sample({2, w + 1}), sample({2, 1}, kInt64, lo, hi),
                    sample({w + 1}, kInt64, -5, 4)},
                   {Shape{1, 2}, true}});
    out.push_back(
        {{sample({n, 5}), sample({n, 1}), sample({1}, kInt64, -5, 4)}, {Shape{1}, false}});
    out.push_back(
        {{sample({n, 4, 3}), sample({4}), sample({1}, kInt64, lo, hi), sample({1}, kInt64, 0, 2)},
         {Shape{0, 2}, false}});
    out.push_back(
        {{sample({3, n}), sample({1}), sample({1}, kInt64, 0, 2), sample({1}, kInt64, lo, hi)},
         {Shape{0, 1}, false}});
    const int64_t s = detail::short_size(w);  // the last rank's block of rows is empty
    out.push_back({{sample({s, 5}), sample({s, 2}), sample({2}, kInt64, -5, 4)}, {Shape{1}, true}});
    return out;
  };
  reg.add(std::move(op));
}

}  // namespace

void register_advanced_index_ops(Registry& reg) {
  register_index(reg);
  register_index_put(reg);
}
}  // namespace dtensor
