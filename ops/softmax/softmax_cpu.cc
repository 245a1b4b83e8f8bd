#include <cmath>
#include <limits>
#include <vector>

#include "ops/softmax/softmax.h"
#include "ops/softmax/softmax_cuda.h"
#include "tensor/creation.h"
#include "tensor/shape.h"

namespace dtensor {
namespace {

// float for the 16-bit types, double otherwise.
template <typename T>
using softmax_acc_t = std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>;

// The input viewed as [outer, d, inner] (contiguous): each of the outer * inner slices along d
// is normalised; the inner slices of one outer index are processed together so that memory is
// read in order.
template <typename T>
void softmax_kernel(const T* in, T* out, int64_t outer, int64_t d, int64_t inner, bool log) {
  using Acc = softmax_acc_t<T>;
  std::vector<Acc> mx(static_cast<size_t>(inner)), sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T* x = in + o * d * inner;
    T* y = out + o * d * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<Acc>::infinity());
    std::fill(sum.begin(), sum.end(), Acc(0));
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const Acc v = static_cast<Acc>(static_cast<compute_t<T>>(x[i * inner + j]));
        // NaN must win so that it propagates; std::max would drop it depending on the order.
        if (!(v <= mx[j])) mx[j] = v;
      }
    }
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        sum[j] += std::exp(static_cast<Acc>(static_cast<compute_t<T>>(x[i * inner + j])) - mx[j]);
      }
    }
    if (log) {
      for (int64_t j = 0; j < inner; ++j) sum[j] = std::log(sum[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) sum[j] = Acc(1) / sum[j];
    }
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const Acc v = static_cast<Acc>(static_cast<compute_t<T>>(x[i * inner + j])) - mx[j];
        const Acc r = log ? v - sum[j] : std::exp(v) * sum[j];
        y[i * inner + j] = static_cast<T>(static_cast<compute_t<T>>(r));
      }
    }
  }
}

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  DT_CHECK(x.defined(), "[%s] expected a defined input tensor", op);
  const int64_t nd = x.dim();
  const int64_t dd = normalize_dim(dim, nd, op);
  if (x.device().is_cuda()) return detail::softmax_cuda(x, dd, log, op);
  return dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const Tensor xc = x.contiguous();
    Tensor out = empty(x.sizes(), TensorOptions(x.dtype()));
    if (x.numel() == 0) return out;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dd; ++i) outer *= x.size(i);
    for (int64_t i = dd + 1; i < nd; ++i) inner *= x.size(i);
    const int64_t d = nd == 0 ? 1 : x.size(dd);
    softmax_kernel<T>(xc.data<T>(), out.data<T>(), outer, d, inner, log);
    return out;
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, false, "softmax");
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, true, "log_softmax");
}

}  // namespace dtensor
