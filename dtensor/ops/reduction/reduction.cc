// Public reduction functions: argument checks, output dtype and shape, device dispatch. The
// kernels are in reduction_cpu.cc.
#include "dtensor/ops/reduction/reduction.h"

#include <string_view>

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/reduction/detail/reduction_cuda.h"
#include "dtensor/ops/reduction/detail/reduction_kernels.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

namespace {

using detail::ReduceOp;
using detail::ReducePlan;

void check_nonempty(std::string_view op, const Tensor& x, const ReducePlan& plan) {
  DT_CHECK(plan.red_numel > 0,
           "[%s] cannot reduce over zero elements (input of shape %s, dim %d has size 0); the "
           "reduction has no identity",
           op, shape_str(x.sizes()), plan.empty_dim);
}

Tensor reduce(std::string_view op, ReduceOp kind, const Tensor& x, IntSpan dims, bool keepdim,
              int64_t correction = 0) {
  detail::check_defined(op, x, "self");
  const ReducePlan plan = detail::make_reduce_plan(x, dims, keepdim, op);
  if (kind == ReduceOp::kMean || kind == ReduceOp::kVar || kind == ReduceOp::kStd) {
    detail::check_floating_input(op, x);
  }
  if (kind == ReduceOp::kMax || kind == ReduceOp::kMin) check_nonempty(op, x, plan);
  DType out_dtype = x.dtype();
  if (kind == ReduceOp::kSum && !is_floating(out_dtype)) out_dtype = DType::kInt64;
  Tensor out = empty(plan.out_shape, TensorOptions(out_dtype, x.device()));
  (x.device().is_cuda() ? detail::reduce_cuda : detail::reduce_cpu)(kind, out, x, plan, correction);
  return out;
}

ValuesIndices arg_reduce(std::string_view op, bool is_max, const Tensor& x,
                         std::optional<int64_t> dim, bool keepdim, bool want_values) {
  detail::check_defined(op, x, "self");
  ReducePlan plan;
  if (dim.has_value()) {
    const int64_t d = *dim;
    plan = detail::make_reduce_plan(x, IntSpan(&d, 1), keepdim, op);
  } else {
    plan = detail::make_reduce_plan(x, {}, keepdim, op);
  }
  check_nonempty(op, x, plan);
  ValuesIndices r;
  r.indices = empty(plan.out_shape, TensorOptions(DType::kInt64, x.device()));
  if (want_values) r.values = empty(plan.out_shape, TensorOptions(x.dtype(), x.device()));
  (x.device().is_cuda() ? detail::arg_reduce_cuda : detail::arg_reduce_cpu)(is_max, r.values,
                                                                            r.indices, x, plan);
  return r;
}

}  // namespace

Tensor sum(const Tensor& x, IntSpan dims, bool keepdim) {
  return reduce("sum", detail::ReduceOp::kSum, x, dims, keepdim);
}
Tensor mean(const Tensor& x, IntSpan dims, bool keepdim) {
  return reduce("mean", detail::ReduceOp::kMean, x, dims, keepdim);
}
Tensor var(const Tensor& x, IntSpan dims, int64_t correction, bool keepdim) {
  return reduce("var", detail::ReduceOp::kVar, x, dims, keepdim, correction);
}
// The root of var's double-precision value, rounded once: a float32 variance may overflow where
// the std does not (|x| around 2e19; PyTorch's kernel keeps it in double too).
Tensor std(const Tensor& x, IntSpan dims, int64_t correction, bool keepdim) {
  detail::check_defined("std", x, "self");
  DT_CHECK(is_floating(x.dtype()),
           "[std] expected a floating dtype (float32, float64, float16, bfloat16), got %s "
           "(argument self)",
           dtype_name(x.dtype()));
  return reduce("std", detail::ReduceOp::kStd, x, dims, keepdim, correction);
}
Tensor amax(const Tensor& x, IntSpan dims, bool keepdim) {
  return reduce("amax", detail::ReduceOp::kMax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, IntSpan dims, bool keepdim) {
  return reduce("amin", detail::ReduceOp::kMin, x, dims, keepdim);
}
Tensor max(const Tensor& x) {
  return reduce("max", detail::ReduceOp::kMax, x, {}, false);
}
Tensor min(const Tensor& x) {
  return reduce("min", detail::ReduceOp::kMin, x, {}, false);
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_reduce("max", true, x, dim, keepdim, true);
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_reduce("min", false, x, dim, keepdim, true);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmax", true, x, dim, keepdim, false).indices;
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmin", false, x, dim, keepdim, false).indices;
}

}  // namespace dtensor
