// batch_norm_sums, batch_norm_affine and their gradients on local tensors (norm.h): argument
// checks, the kernels' dtype (float32 / float64; 16-bit widened to float32) and the CPU / CUDA
// switch.
#include "dtensor/ops/norm/detail/batch_norm_kernels.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// x [N, C, *] as [n, c, l].
struct Ncl {
  int64_t n, c, l;
};

Ncl ncl(const Tensor& x, const char* op) {
  DT_CHECK(x.defined() && x.dim() >= 2 && is_floating(x.dtype()),
           "[%s] input must be a floating tensor of at least 2 dims (N, C, ...), got %s", op,
           x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  Ncl d{x.size(0), x.size(1), 1};
  for (int64_t i = 2; i < x.dim(); ++i) d.l *= x.size(i);
  return d;
}

Tensor kernel_input(const Tensor& x) {
  const bool wide = x.dtype() == kFloat64 || x.dtype() == kFloat32;
  return (wide ? x : x.to(kFloat32)).contiguous();
}

// The factors [2, C] of batch_norm_affine on x: float64 for a float64 x, float32 otherwise, on
// x's device.
void check_factors(const Tensor& f, const Tensor& x, int64_t c, const char* op) {
  const DType want = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  DT_CHECK(f.defined() && f.dim() == 2 && f.size(0) == 2 && f.size(1) == c && f.dtype() == want &&
               f.device() == x.device(),
           "[%s] factors has shape %s and dtype %s, expected [2, %d] of %s on the input's device",
           op, f.defined() ? shape_str(f.shape()) : std::string("undefined"),
           f.defined() ? dtype_name(f.dtype()) : "none", c, dtype_name(want));
}

Tensor in_dtype(const Tensor& t, DType d) {
  return t.dtype() == d ? t : t.to(d);
}

}  // namespace

Tensor batch_norm_sums(const Tensor& input) {
  const Ncl d = ncl(input, "batch_norm_sums");
  Tensor out = zeros({2, d.c}, TensorOptions(kFloat64, input.device()));
  if (d.n * d.c * d.l == 0) return out;
  const Tensor x = kernel_input(input);
  if (x.device().is_cuda()) {
    detail::batch_norm_sums_cuda(x, d.n, d.c, d.l, out);
  } else {
    detail::batch_norm_sums_cpu(x, d.n, d.c, d.l, out);
  }
  return out;
}

Tensor batch_norm_sums_backward(const Tensor& grad_output, const Tensor& input) {
  const Ncl d = ncl(input, "batch_norm_sums_backward");
  DT_CHECK(grad_output.defined() && grad_output.dim() == 2 && grad_output.size(0) == 2 &&
               grad_output.size(1) == d.c && grad_output.device() == input.device(),
           "[batch_norm_sums_backward] grad_output has shape %s, expected [2, %d] on the input's "
           "device",
           grad_output.defined() ? shape_str(grad_output.shape()) : std::string("undefined"), d.c);
  const Tensor x = kernel_input(input);
  const Tensor g = grad_output.to(kFloat64).contiguous();
  Tensor gx = empty(input.shape(), TensorOptions(x.dtype(), input.device()));
  if (d.n * d.c * d.l > 0) {
    if (x.device().is_cuda()) {
      detail::batch_norm_sums_backward_cuda(g, x, d.n, d.c, d.l, gx);
    } else {
      detail::batch_norm_sums_backward_cpu(g, x, d.n, d.c, d.l, gx);
    }
  }
  return in_dtype(gx, input.dtype());
}

Tensor batch_norm_affine(const Tensor& input, const Tensor& factors) {
  const Ncl d = ncl(input, "batch_norm_affine");
  check_factors(factors, input, d.c, "batch_norm_affine");
  const Tensor x = kernel_input(input);
  Tensor y = empty(input.shape(), TensorOptions(x.dtype(), input.device()));
  if (d.n * d.c * d.l > 0) {
    const Tensor f = factors.contiguous();
    if (x.device().is_cuda()) {
      detail::batch_norm_affine_cuda(x, f, d.n, d.c, d.l, y);
    } else {
      detail::batch_norm_affine_cpu(x, f, d.n, d.c, d.l, y);
    }
  }
  return in_dtype(y, input.dtype());
}

BatchNormAffineGrads batch_norm_affine_backward(const Tensor& grad_output, const Tensor& input,
                                                const Tensor& factors) {
  const Ncl d = ncl(input, "batch_norm_affine_backward");
  check_factors(factors, input, d.c, "batch_norm_affine_backward");
  DT_CHECK(grad_output.defined() && grad_output.shape() == input.shape() &&
               grad_output.device() == input.device(),
           "[batch_norm_affine_backward] grad_output has shape %s, expected the input's %s on its "
           "device",
           grad_output.defined() ? shape_str(grad_output.shape()) : std::string("undefined"),
           shape_str(input.shape()));
  const Tensor x = kernel_input(input);
  const Tensor g = in_dtype(grad_output, x.dtype()).contiguous();
  Tensor gx = empty(input.shape(), TensorOptions(x.dtype(), input.device()));
  Tensor sums = zeros({2, d.c}, TensorOptions(kFloat64, input.device()));
  if (d.n * d.c * d.l > 0) {
    const Tensor f = factors.contiguous();
    if (x.device().is_cuda()) {
      detail::batch_norm_affine_backward_cuda(g, x, f, d.n, d.c, d.l, gx, sums);
    } else {
      detail::batch_norm_affine_backward_cpu(g, x, f, d.n, d.c, d.l, gx, sums);
    }
  }
  return {in_dtype(gx, input.dtype()), in_dtype(sums, factors.dtype())};
}

}  // namespace dtensor
