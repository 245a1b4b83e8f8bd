// masked_select / nonzero on local tensors: the true positions of a bool tensor (flatnonzero,
// the one data-dependent step: a loop here, a count + scan + compaction on CUDA), then
// index_select of the flattened self (masked_select) or the positions unravelled into
// coordinates (nonzero). The gradient scatters into zeros at the same positions.
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/masked_select/detail/masked_select.h"
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

Tensor flatnonzero(const Tensor& flags) {
  DT_CHECK(flags.dtype() == kBool, "[flatnonzero] expected a bool tensor, got %s",
           dtype_name(flags.dtype()));
  const Tensor f = flags.contiguous();
  if (f.device().is_cuda()) return flatnonzero_cuda(f);
  const bool* p = f.data<bool>();
  const int64_t n = f.numel();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += p[i] ? 1 : 0;
  Tensor out = empty({count}, TensorOptions(kInt64));
  int64_t* o = out.data<int64_t>();
  for (int64_t i = 0, k = 0; i < n; ++i) {
    if (p[i]) o[k++] = i;
  }
  return out;
}

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
    return out;
  }
  const int64_t* lin = idx.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = lin[k];
    for (int64_t d = nd - 1; d >= 0; --d) {
      o[k * nd + d] = p % self.size(d);
      p /= self.size(d);
    }
  }
  return out;
}

}  // namespace dtensor
