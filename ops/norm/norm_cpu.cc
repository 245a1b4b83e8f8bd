#include <cmath>
#include <limits>

#include "ops/norm/norm.h"
#include "ops/norm/norm_cuda.h"
#include "tensor/creation.h"
#include "tensor/shape.h"

namespace dtensor {
namespace {

template <typename T>
using norm_acc_t = std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>;

// Checks the arguments and returns the size of one normalised slice.
int64_t check_norm_args(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                        const Tensor& bias, const char* op) {
  DT_CHECK(x.defined(), "[%s] expected a defined input tensor", op);
  const int64_t nd = x.dim(), nn = static_cast<int64_t>(normalized_shape.size());
  bool match = nn <= nd;
  for (int64_t i = 0; match && i < nn; ++i) {
    match = normalized_shape[i] == x.size(nd - nn + i);
  }
  DT_CHECK(match, "[%s] normalized_shape %s does not match the trailing dims of input %s", op,
           shape_str(normalized_shape), shape_str(x.sizes()));
  for (const auto* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    DT_CHECK(p->sizes() == Shape(normalized_shape.begin(), normalized_shape.end()),
             "[%s] %s of shape %s does not match normalized_shape %s", op, what,
             shape_str(p->sizes()), shape_str(normalized_shape));
    DT_CHECK(p->dtype() == x.dtype() && p->device() == x.device(),
             "[%s] %s must have the input's dtype and device, got %s on %s (expected %s on %s)", op,
             what, dtype_name(p->dtype()), p->device().str(), dtype_name(x.dtype()),
             x.device().str());
  }
  return shape_numel(normalized_shape);
}

template <typename T>
void norm_kernel(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t n, double eps,
                 bool rms) {
  using Acc = norm_acc_t<T>;
  const auto ld = [](T v) { return static_cast<Acc>(static_cast<compute_t<T>>(v)); };
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    Acc mean = 0;
    if (!rms) {
      for (int64_t i = 0; i < n; ++i) mean += ld(xr[i]);
      mean /= static_cast<Acc>(n);
    }
    Acc sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const Acc c = ld(xr[i]) - mean;
      sq += c * c;
    }
    const Acc inv = Acc(1) / std::sqrt(sq / static_cast<Acc>(n) + static_cast<Acc>(eps));
    for (int64_t i = 0; i < n; ++i) {
      Acc v = (ld(xr[i]) - mean) * inv;
      if (w != nullptr) v *= ld(w[i]);
      if (b != nullptr) v += ld(b[i]);
      yr[i] = static_cast<T>(static_cast<compute_t<T>>(v));
    }
  }
}

Tensor norm_impl(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                 const Tensor& bias, std::optional<double> eps, bool rms, const char* op) {
  const int64_t n = check_norm_args(x, normalized_shape, weight, bias, op);
  if (x.device().is_cuda()) return detail::norm_cuda(x, n, weight, bias, eps, rms, op);
  return dispatch_floating(x.dtype(), op, [&]<typename T>() {
    Tensor out = empty(x.sizes(), TensorOptions(x.dtype()));
    if (x.numel() == 0) return out;
    const double e = eps.has_value() ? *eps : std::numeric_limits<compute_t<T>>::epsilon();
    const Tensor xc = x.contiguous();
    const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
    const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
    norm_kernel<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                   bc.defined() ? bc.data<T>() : nullptr, out.data<T>(), x.numel() / n, n, e, rms);
    return out;
  });
}

}  // namespace

Tensor layer_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return norm_impl(x, normalized_shape, weight, bias, eps, false, "layer_norm");
}

Tensor rms_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  return norm_impl(x, normalized_shape, weight, Tensor(), eps, true, "rms_norm");
}

}  // namespace dtensor
