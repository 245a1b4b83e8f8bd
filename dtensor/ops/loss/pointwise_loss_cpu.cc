// The per-element terms of the pointwise losses on the CPU (pointwise_loss.h's LossTerm over an
// ElementwiseIter, so pos_weight broadcasts and the loop runs on the intra-op threads), and the
// device dispatch to the CUDA kernels.
#include "dtensor/ops/common/detail/cpu_loops.h"
#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::detail {

namespace {

template <typename T>
void terms_cpu(const LossTerm& term, const Tensor& out, const Tensor& x, const Tensor& y,
               const Tensor& pw) {
  using C = compute_t<T>;
  if (pw.defined()) {
    const ElementwiseIter it(out, {&x, &y, &pw});
    cpu_kernel<T, T, T, T>(it, [term](C a, C b, C p) { return term(a, b, p); });
  } else {
    const ElementwiseIter it(out, {&x, &y});
    cpu_kernel<T, T, T>(it, [term](C a, C b) { return term(a, b); });
  }
}

}  // namespace

Tensor loss_terms(const LossTerm& term, const Tensor& x, const Tensor& y, const Tensor& pw) {
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype(), x.device()));
  if (x.device().is_cuda()) {
    loss_terms_cuda(term, out, x, y, pw);
    return out;
  }
  dispatch_floating(x.dtype(), loss_name(term.kind),
                    [&]<typename T>() { terms_cpu<T>(term, out, x, y, pw); });
  return out;
}

}  // namespace dtensor::detail
