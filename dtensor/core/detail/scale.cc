#include "dtensor/core/detail/scale.h"

#include "dtensor/tensor/creation.h"

namespace dtensor::detail {

Tensor scaled_by_mesh_size(const Tensor& t, int64_t n, bool divide) {
  // CUDA tensors take a round trip through the host: this runs once per P(sum) <-> P(avg)
  // step, which no hot path issues.
  const Tensor src = t.device().is_cpu() ? t.contiguous() : t.to(Device()).contiguous();
  Tensor out = empty(src.shape(), TensorOptions(src.dtype()));
  dispatch_dtype(src.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    const T* in = static_cast<const T*>(src.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    const C factor = static_cast<C>(n);
    const int64_t count = src.numel();
    for (int64_t i = 0; i < count; ++i) {
      const C v = static_cast<C>(in[i]);
      o[i] = static_cast<T>(divide ? v / factor : v * factor);
    }
  });
  return t.device().is_cpu() ? out : out.to(t.device());
}

}  // namespace dtensor::detail
