// Softmax, log_softmax and softmin on local tensors: the argument checks and the CPU / CUDA
// switch. The kernels are in softmax_cpu.cc and softmax_cuda.cu (detail/softmax_cpu.h,
// detail/softmax_cuda.h).
#include "dtensor/ops/softmax/softmax.h"

#include <limits>

#include "dtensor/ops/common/detail/dim_layout.h"
#include "dtensor/ops/common/detail/softmax_stats.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/detail/softmax_cpu.h"
#include "dtensor/ops/softmax/detail/softmax_cuda.h"
#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace detail {

SoftmaxStats softmax_with_stats(const Tensor& x) {
  DT_CHECK(x.defined() && x.dim() >= 1, "[softmax] expected a defined input with a dim");
  const int64_t d = x.size(-1);
  Shape stat_shape(x.sizes().begin(), x.sizes().end());
  stat_shape.back() = 1;
  SoftmaxStats r;
  if (d == 0) {  // empty rows: no key, as a row of only -inf, on every device
    const TensorOptions opts(x.dtype(), x.device());
    r.out = empty(x.sizes(), opts);
    r.row_max = full(stat_shape, Scalar(-std::numeric_limits<double>::infinity()), opts);
    r.row_sum = zeros(stat_shape, opts);
    return r;
  }
  if (x.device().is_cuda() || (x.dtype() != kFloat32 && x.dtype() != kFloat64)) {
    // The composite form (CUDA, 16-bit floats): the max, the softmax, and the sum read back as
    // 1 / the row's largest probability, exp(0) / sum (NaN for a row of only -inf).
    const int64_t last[] = {-1};
    r.row_max = amax(x, last, /*keepdim=*/true);
    r.out = softmax(x, -1);
    r.row_sum = reciprocal(amax(r.out, last, /*keepdim=*/true));
    return r;
  }
  r.out = empty(x.sizes(), TensorOptions(x.dtype()));
  const Tensor xc = x.contiguous();
  const int64_t outer = x.numel() / d;
  Shape pair_shape = stat_shape;
  pair_shape.back() = 2;
  const Tensor stats = empty(pair_shape, TensorOptions(x.dtype()));
  softmax_forward_rows(xc, r.out, outer, d, 1, false, &stats);
  r.row_max = stats.narrow(-1, 0, 1);
  r.row_sum = stats.narrow(-1, 1, 1);
  return r;
}
}  // namespace detail

namespace {

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  DT_CHECK(x.defined(), "[%s] expected a defined input tensor", op);
  const int64_t dd = normalize_dim(dim, x.dim(), op);
  if (x.device().is_cuda()) return detail::softmax_cuda(x, dd, log, op);
  // Raises "[op] expected a floating dtype" for the others.
  dispatch_floating(x.dtype(), op, []<typename T>() {});
  const Tensor xc = x.contiguous();
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()));
  if (x.numel() == 0) return out;
  const detail::DimLayout l = detail::dim_layout(x.sizes(), dd);
  detail::softmax_forward_rows(xc, out, l.outer, l.d, l.inner, log, nullptr);
  return out;
}

Tensor softmax_backward_impl(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log,
                             const char* op) {
  DT_CHECK(grad_out.defined() && out.defined(), "[%s] expected defined grad_out and out tensors",
           op);
  DT_CHECK(grad_out.sizes() == out.sizes(),
           "[%s] grad_out of shape %s does not match out of shape %s", op,
           shape_str(grad_out.sizes()), shape_str(out.sizes()));
  DT_CHECK(grad_out.dtype() == out.dtype() && grad_out.device() == out.device(),
           "[%s] grad_out (%s on %s) must have out's dtype and device (%s on %s)", op,
           dtype_name(grad_out.dtype()), grad_out.device().str(), dtype_name(out.dtype()),
           out.device().str());
  const int64_t dd = normalize_dim(dim, out.dim(), op);
  if (out.device().is_cuda()) return detail::softmax_backward_cuda(grad_out, out, dd, log, op);
  dispatch_floating(out.dtype(), op, []<typename T>() {});
  const Tensor gc = grad_out.contiguous(), oc = out.contiguous();
  Tensor gx = empty(out.sizes(), TensorOptions(out.dtype()));
  if (out.numel() == 0) return gx;
  const detail::DimLayout l = detail::dim_layout(out.sizes(), dd);
  detail::softmax_backward_rows(gc, oc, gx, l.outer, l.d, l.inner, log);
  return gx;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, false, "softmax");
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, true, "log_softmax");
}

// The checks first, so that a bad input raises "[softmin] ..." rather than neg's error.
Tensor softmin(const Tensor& x, int64_t dim) {
  DT_CHECK(x.defined(), "[softmin] expected a defined input tensor");
  normalize_dim(dim, x.dim(), "softmin");
  dispatch_floating(x.dtype(), "softmin", []<typename T>() {});
  return softmax_impl(neg(x), dim, false, "softmin");
}

Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad_out, out, dim, false, "softmax_backward");
}

Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad_out, out, dim, true, "log_softmax_backward");
}

}  // namespace dtensor
