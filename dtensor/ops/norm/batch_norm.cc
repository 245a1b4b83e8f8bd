// batch_norm_sums and its gradient on local tensors (norm.h): argument checks, the kernels'
// dtype (float32 / float64; 16-bit widened to float32) and the CPU / CUDA switch.
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
  return gx.dtype() == input.dtype() ? gx : gx.to(input.dtype());
}

}  // namespace dtensor
