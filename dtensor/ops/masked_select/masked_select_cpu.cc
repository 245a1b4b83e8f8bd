// The CPU kernels of masked_select / nonzero: the true positions of a bool tensor (flatnonzero,
// the one data-dependent step: a loop here, a count + scan + compaction on CUDA) and their
// coordinates (unravel_cpu). The Tensor functions are in masked_select.cc.
#include "dtensor/ops/masked_select/detail/masked_select_cpu.h"

#include "dtensor/ops/masked_select/detail/masked_select.h"
#include "dtensor/ops/masked_select/detail/masked_select_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

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

void unravel_cpu(const Tensor& linear, IntSpan shape, const Tensor& out) {
  const int64_t n = linear.numel(), nd = static_cast<int64_t>(shape.size());
  const int64_t* lin = linear.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = lin[k];
    for (int64_t d = nd - 1; d >= 0; --d) {
      o[k * nd + d] = p % shape[d];
      p /= shape[d];
    }
  }
}

}  // namespace dtensor::detail
