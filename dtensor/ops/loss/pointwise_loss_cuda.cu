// The per-element terms of the pointwise losses on CUDA: pointwise_loss.h's LossTerm (the
// formulas the CPU kernel uses, in double) through gpu_kernel, pos_weight broadcast.
#include "dtensor/ops/common/detail/loops_cuda.cuh"
#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"

namespace dtensor::detail {

namespace {

template <typename T>
void terms_typed(const LossTerm& term, const Tensor& out, const Tensor& x, const Tensor& y,
                 const Tensor& pw) {
  using C = compute_t<T>;
  if (pw.defined()) {
    gpu_kernel<T, T, T, T>(out, {&x, &y, &pw},
                           [term] __device__(C a, C b, C p) { return term(a, b, p); });
  } else {
    gpu_kernel<T, T, T>(out, {&x, &y}, [term] __device__(C a, C b) { return term(a, b); });
  }
}

}  // namespace

void loss_terms_cuda(const LossTerm& term, const Tensor& out, const Tensor& x, const Tensor& y,
                     const Tensor& pw) {
  dispatch_floating(out.dtype(), loss_name(term.kind),
                    [&]<typename T>() { terms_typed<T>(term, out, x, y, pw); });
}

}  // namespace dtensor::detail
