// masked_select / nonzero on local tensors: the true positions of a bool tensor (flatnonzero,
// masked_select_cpu.cc / masked_select_cuda.cu), then index_select of the flattened self
// (masked_select) or the positions unravelled into coordinates (nonzero). The gradient scatters
// into zeros at the same positions.
#include "dtensor/ops/masked_select/detail/masked_select.h"

#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/masked_select/detail/masked_select_cpu.h"
#include "dtensor/ops/masked_select/detail/masked_select_cuda.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace {

// The mask broadcast to `shape`, contiguous (a copy only when it was broadcast or strided).
Tensor flags_of(const Tensor& mask, IntSpan shape) {
  return mask.expand(shape).contiguous();
}

void check_mask(const Tensor& self, const Tensor& mask, const char* op) {
  DT_CHECK(self.defined() && mask.defined(), "[%s] arguments self and mask must be defined", op);
  DT_CHECK(mask.dtype() == kBool, "[%s] argument mask has dtype %s, expected bool", op,
           dtype_name(mask.dtype()));
  DT_CHECK(self.device() == mask.device(),
           "[%s] arguments self and mask are on different devices (%s, %s)", op,
           self.device().str(), mask.device().str());
}

}  // namespace

namespace detail {

Tensor masked_select_backward(const Tensor& grad, const Tensor& mask, IntSpan shape) {
  DT_CHECK(mask.dtype() == kBool,
           "[masked_select_backward] argument mask has dtype %s, expected bool",
           dtype_name(mask.dtype()));
  const Tensor idx = flatnonzero(flags_of(mask, shape));
  DT_CHECK(grad.dim() == 1 && grad.numel() == idx.numel(),
           "[masked_select_backward] argument grad has shape %s, expected [%d] (the mask's true "
           "count)",
           shape_str(grad.sizes()), idx.numel());
  const Tensor flat = zeros({shape_numel(shape)}, TensorOptions(grad.dtype(), grad.device()));
  if (idx.numel() == 0) return flat.reshape(shape);
  return scatter(flat, 0, idx, grad.contiguous()).reshape(shape);
}

}  // namespace detail

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  check_mask(self, mask, "masked_select");
  const Shape shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  const Tensor idx = detail::flatnonzero(flags_of(mask, shape));
  const Tensor flat = self.expand(shape).reshape({-1});
  if (idx.numel() == 0) return empty({0}, TensorOptions(self.dtype(), self.device()));
  return index_select(flat, 0, idx);
}

Tensor nonzero(const Tensor& self) {
  DT_CHECK(self.defined(), "[nonzero] argument self must be defined");
  const Tensor flags = self.dtype() == kBool ? self : ne(self, Scalar(0));
  const Tensor idx = detail::flatnonzero(flags);
  const int64_t n = idx.numel(), nd = self.dim();
  Tensor out = empty({n, nd}, TensorOptions(kInt64, self.device()));
  if (n == 0 || nd == 0) return out;
  if (self.device().is_cuda()) {
    detail::unravel_cuda(idx, self.sizes(), out);
  } else {
    detail::unravel_cpu(idx, self.sizes(), out);
  }
  return out;
}

}  // namespace dtensor
