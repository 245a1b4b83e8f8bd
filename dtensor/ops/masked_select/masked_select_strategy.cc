// Registration of masked_select, nonzero and masked_select_backward (DTensor forms in
// masked_select_dtensor.cc).
//
// masked_select(self, mask) -> out [n] and nonzero(self) -> out [n, ndim]: n depends on the data,
// so both are registered with OpInfo::data_dependent_shape. Their one row is all-Replicate
// ([R | R, R] / [R | R]): sharded inputs are all-gathered and Partial ones all-reduced by
// propagation, then every rank selects the same elements and the output's global shape is the
// local result's (dispatch builds the spec per call; the propagation cache keeps placements only).
//
// masked_select_backward(grad, mask; shape) -> zeros of `shape` with grad at the mask's true
// positions. Rows [out | grad, mask]: [S(d) | R, R] for every dim d of `shape` (each rank scatters
// the whole gradient and keeps its block: no communication), and [P | P, R] (linear in grad).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/grad_util.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/masked_select/detail/masked_select.h"
#include "dtensor/ops/masked_select/detail/masked_select_backward.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor {
namespace {

using detail::masked_select_grad;

using Locals = absl::Span<const Tensor>;

void check_bool_mask(const OpSchema& s, int64_t i) {
  DT_CHECK(s.input(i).dtype() == kBool, "[%s] argument %s has dtype %s, expected bool", s.name(),
           s.op().input_name(i), dtype_name(s.input(i).dtype()));
}

void register_masked_select(Registry& reg) {
  OpInfo op = detail::make_op("masked_select", {"self", "mask"});
  op.data_dependent_shape = true;
  op.meta = [](const OpSchema& s) {
    check_bool_mask(s, 1);
    detail::broadcast_inputs(s);
    return OutputMetas{TensorMeta(Shape{0}, s.input(0).dtype())};  // [n]: n from the kernel
  };
  op.strategy = [](const OpSchema&) { return StrategyRows{detail::uniform_row(3, Replicate())}; };
  op.kernel =
      single_output([](const KernelContext&, Locals l) { return masked_select(l[0], l[1]); });
  op.backward = masked_select_grad;
  op.saved_inputs = 2u;  // the mask
  // Broadcasting both ways, uneven and empty shards, every dtype family, a mask selecting
  // nothing and one selecting everything.
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    return std::vector<OpSample>{
        {{sample({n, 5}), sample({n, 5}, kBool, 0, 1)}, {}},
        {{sample({n, 1}), sample({4}, kBool, 0, 1)}, {}},
        {{sample({2 * w, 3}, kInt64), sample({3}, kBool, 0, 1)}, {}},
        {{sample({2, w + 1, 3}), sample({2, w + 1, 3}, kBool, 0, 0)}, {}},
        {{sample({n}), sample({n}, kBool, 1, 1)}, {}},
        {{sample({0, 3}), sample({0, 3}, kBool, 0, 1)}, {}},
        {{sample({detail::short_size(w), 3}), sample({detail::short_size(w), 3}, kBool, 0, 1)}, {}},
    };
  };
  reg.add(std::move(op));
}

void register_nonzero(Registry& reg) {
  OpInfo op = detail::make_op("nonzero", {"self"});
  op.data_dependent_shape = true;
  op.differentiable = false;
  op.saved_inputs = 0;
  op.meta = [](const OpSchema& s) {
    return OutputMetas{TensorMeta(Shape{0, s.input(0).ndim()}, kInt64)};  // [n, ndim]
  };
  op.strategy = [](const OpSchema&) { return StrategyRows{detail::uniform_row(2, Replicate())}; };
  op.kernel = single_output([](const KernelContext&, Locals l) { return nonzero(l[0]); });
  op.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 5}, kFloat64, -1, 1)}, {}},
                                 {{sample({2, 2 * w + 1, 3}, kInt64, 0, 1)}, {}},
                                 {{sample({w + 1}, kBool, 0, 1)}, {}},
                                 {{sample({2 * w, 2}, kFloat64, 0, 0)}, {}},
                                 {{sample({detail::short_size(w), 3}, kFloat64, -1, 1)}, {}}};
  };
  reg.add(std::move(op));
}

void register_masked_select_backward(Registry& reg) {
  OpInfo op = detail::gradient_op("masked_select_backward", {"grad", "mask"});
  op.meta = [](const OpSchema& s) {
    const Shape& shape = s.arg<Shape>(0);
    check_bool_mask(s, 1);
    DT_CHECK(s.input(0).ndim() == 1,
             "[masked_select_backward] argument grad has shape %s, expected a 1-d tensor",
             shape_str(s.input(0).shape()));
    DT_CHECK(broadcast_shapes(s.input(1).shape(), shape, s.name()) == shape,
             "[masked_select_backward] argument mask with shape %s does not broadcast to %s",
             shape_str(s.input(1).shape()), shape_str(shape));
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    StrategyRows rows;
    const int64_t nd = static_cast<int64_t>(s.arg<Shape>(0).size());
    for (int64_t d = 0; d < nd; ++d) rows.push_back({Shard(d), Replicate(), Replicate()});
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    const Tensor full = detail::masked_select_backward(l[0], l[1], c.arg<Shape>(0));
    const LocalShard mine = c.output_shard(0);
    if (mine.shape == full.sizes()) return full;
    return box_view(full, Shape(mine.offset.size(), 0), mine.offset, mine.shape).contiguous();
  });
  // Linear in grad: its gradient is the masked_select of the incoming one (create_graph).
  op.differentiable = true;
  op.saved_inputs = 2u;  // mask
  op.backward = detail::masked_select_backward_grad;
  // The gradient's length is the mask's true count: masks of fixed counts (all, none, the
  // first column) so that the sample's grad has the right size.
  op.samples = [](int64_t w) {
    using detail::sample;
    const int64_t n = 3 * w + 1;
    return std::vector<OpSample>{
        {{sample({n * 5}), sample({n, 5}, kBool, 1, 1)}, {Shape{n, 5}}},
        {{sample({0}), sample({2, w + 1}, kBool, 0, 0)}, {Shape{3, 2, w + 1}}},
        {{sample({4 * n}), sample({4}, kBool, 1, 1)}, {Shape{n, 4}}},
        {{sample({detail::short_size(w) * 5}), sample({detail::short_size(w), 5}, kBool, 1, 1)},
         {Shape{detail::short_size(w), 5}}},
    };
  };
  reg.add(std::move(op));
}

}  // namespace

void register_masked_select_ops(Registry& reg) {
  register_masked_select(reg);
  register_nonzero(reg);
  register_masked_select_backward(reg);
}
}  // namespace dtensor
