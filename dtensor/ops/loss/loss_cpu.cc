// CPU kernels of the loss family (nll_loss / cross_entropy, gather_target_log_probs,
// reduce_loss): the checks and the CPU / CUDA switch are in loss.cc.
#include "dtensor/ops/loss/detail/loss_cpu.h"

#include <cstring>
#include <limits>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::detail {
namespace {

// A [shape] tensor of dtype `dtype` holding `values` (row-major).
Tensor tensor_from(const std::vector<double>& values, IntSpan shape, DType dtype) {
  Tensor t = empty(shape, TensorOptions(kFloat64));
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(double));
  return t.to(dtype);
}

// `count`: the number of counted elements, or the sum of their class weights (the weighted
// mean's divisor). A mean over a count of 0 is NaN, as in PyTorch, also where the sum is not 0:
// with label smoothing and every counted target of weight 0, PyTorch's mean is the NLL's 0 / 0
// plus the smoothing term's s / 0, NaN, not inf.
Tensor finish(const std::vector<double>& losses, double count, Reduction reduction, IntSpan shape,
              DType dtype) {
  if (reduction == Reduction::kNone) return tensor_from(losses, shape, dtype);
  double sum = 0;
  for (double v : losses) sum += v;
  if (reduction == Reduction::kMean)
    sum = count == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / count;
  return tensor_from({sum}, {}, dtype);
}

// sum of n elements `stride` apart, in double, each times w[i] when `w` is given (n values).
// Eight independent partial sums: the sequential sum is one dependent addition per element
// (latency-bound), and with a contiguous class dim (stride 1) the compiler keeps the partial
// sums in vector registers.
template <bool kWeighted, typename T>
double sum_classes(const T* p, int64_t n, int64_t stride, const double* w = nullptr) {
  constexpr int kLanes = 8;
  const auto term = [&](int64_t i) {
    const double v = static_cast<double>(static_cast<compute_t<T>>(p[i * stride]));
    if constexpr (kWeighted) return w[i] * v;
    return v;
  };
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += term(i + k);
  }
  for (; i < n; ++i) lanes[0] += term(i);
  double s = 0;
  for (double v : lanes) s += v;
  return s;
}

// Per-element smoothed, weighted NLL (PyTorch's cross_entropy with class weights):
// (1 - s) * -w[t] * lp[t] + s / C * sum_c -w[c] * lp[c], w all ones without `weight` (C
// values); 0 for ignored targets. `count` receives the sum of w[t] (1 each without weights)
// over the counted elements: the mean divides both terms by it. (The exponentials and
// logarithms of cross_entropy are in its log_softmax, which is vectorised; this pass reads the
// log-probabilities once more, for the smoothing sum only.)
std::vector<double> nll_elements(const Tensor& log_probs, const Tensor& target, LossLayout l,
                                 int64_t ignore_index, double smoothing, const double* weight,
                                 double& count, const char* op) {
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  const int64_t* t = tg.data<int64_t>();
  std::vector<double> out(static_cast<size_t>(tg.numel()), 0.0);
  count = 0;
  dispatch_floating(lp.dtype(), op, [&]<typename T>() {
    const T* x = lp.data<T>();
    const auto ld = [&](int64_t o, int64_t c, int64_t j) {
      return static_cast<double>(static_cast<compute_t<T>>(x[(o * l.classes + c) * l.inner + j]));
    };
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < l.inner; ++j) {
        const int64_t ti = t[o * l.inner + j];
        if (ti == ignore_index) continue;
        DT_CHECK(ti >= 0 && ti < l.classes, "[%s] target %d out of range for %d classes", op, ti,
                 l.classes);
        const double w = weight != nullptr ? weight[ti] : 1.0;
        double v = -w * ld(o, ti, j);
        if (smoothing != 0.0) {
          const T* row = x + o * l.classes * l.inner + j;
          const double s = weight != nullptr ? -sum_classes<true>(row, l.classes, l.inner, weight)
                                             : -sum_classes<false>(row, l.classes, l.inner);
          v = (1.0 - smoothing) * v + smoothing / static_cast<double>(l.classes) * s;
        }
        out[o * l.inner + j] = v;
        count += w;
      }
    }
  });
  return out;
}

}  // namespace

// The weights read once into doubles; smoothing 0 for nll_loss. Range errors name nll_loss,
// the step that checks targets (as in PyTorch), for cross_entropy too.
Tensor nll_loss_cpu(const Tensor& log_probs, const Tensor& target, int64_t outer, int64_t classes,
                    int64_t inner, Reduction reduction, int64_t ignore_index, double smoothing,
                    const Tensor& weight) {
  const LossLayout l{outer, classes, inner};
  std::vector<double> w;
  if (weight.defined()) w = weight.to(kFloat64).contiguous().to_vector<double>();
  double count = 0;
  const auto losses = nll_elements(log_probs, target, l, ignore_index, smoothing,
                                   weight.defined() ? w.data() : nullptr, count, "nll_loss");
  return finish(losses, count, reduction, target.sizes(), log_probs.dtype());
}

Tensor cross_entropy_probs_cpu(const Tensor& log_probs, const Tensor& probs, LossLayout l,
                               Reduction reduction, double smoothing, const Tensor& weight) {
  const Tensor lp = log_probs.contiguous();
  const Tensor pr = probs.contiguous();
  std::vector<double> w;
  if (weight.defined()) w = weight.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> out(static_cast<size_t>(l.outer * l.inner), 0.0);
  const double keep = 1.0 - smoothing;
  const double spread = smoothing / static_cast<double>(l.classes);
  dispatch_floating(lp.dtype(), "cross_entropy", [&]<typename T>() {
    if (out.empty() || l.classes == 0) return;
    const T* x = lp.data<T>();
    const T* p = pr.data<T>();
    const auto ld = [](const T* a, int64_t i) {
      return static_cast<double>(static_cast<compute_t<T>>(a[i]));
    };
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < l.inner; ++j) {
        double v = 0;
        for (int64_t c = 0; c < l.classes; ++c) {
          const int64_t i = (o * l.classes + c) * l.inner + j;
          const double q = ld(p, i) * keep + spread;
          v -= (w.empty() ? q : w[c] * q) * ld(x, i);
        }
        out[o * l.inner + j] = v;
      }
    }
  });
  Shape shape = probs.sizes();
  shape.erase(shape.begin() + (probs.dim() == 1 ? 0 : 1));
  // The mean divides by the number of rows (PyTorch: input.numel() / classes, so NaN when
  // there are no rows or no classes).
  return finish(out, l.classes == 0 ? 0.0 : static_cast<double>(l.outer * l.inner), reduction,
                shape, log_probs.dtype());
}

namespace {

// Calls f(e, o, j, c, w) for every target element e = o * inner + j whose class t is in the
// block (c = t - class_offset, its column there) and not ignored; w = weight[t] (1 without
// weights). A target in the block but outside the weight block cannot occur: rows shard the
// weights like the classes, or not at all.
template <typename F>
void for_each_pick(const int64_t* t, LossLayout l, const NllBlock& b, F&& f) {
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t j = 0; j < l.inner; ++j) {
      const int64_t e = o * l.inner + j;
      const int64_t c = t[e] - b.class_offset;
      if (t[e] == b.ignore_index || c < 0 || c >= l.classes) continue;
      f(e, o, j, c, b.weight != nullptr ? b.weight[t[e] - b.weight_offset] : 1.0);
    }
  }
}

// The picked log-probability as double (its compute type first, as the other kernels read it).
template <typename T>
double picked(const T* x, LossLayout l, int64_t o, int64_t j, int64_t c) {
  return static_cast<double>(static_cast<compute_t<T>>(x[(o * l.classes + c) * l.inner + j]));
}

}  // namespace

Tensor nll_loss_block_cpu(const Tensor& log_probs, const Tensor& target, LossLayout l,
                          const NllBlock& b) {
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  Tensor out = zeros(target.sizes(), TensorOptions(log_probs.dtype()));
  if (out.numel() == 0) return out;
  dispatch_floating(lp.dtype(), "nll_loss", [&]<typename T>() {
    const T* x = lp.numel() > 0 ? lp.data<T>() : nullptr;
    T* y = out.data<T>();
    for_each_pick(tg.data<int64_t>(), l, b,
                  [&](int64_t e, int64_t o, int64_t j, int64_t c, double w) {
                    y[e] = static_cast<T>(-w * picked(x, l, o, j, c));
                  });
  });
  return out;
}

NllSums nll_loss_block_sums_cpu(const Tensor& log_probs, const Tensor& target, LossLayout l,
                                const NllBlock& b, int64_t classes) {
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  NllSums s;
  if (tg.numel() == 0) return s;
  const int64_t* t = tg.data<int64_t>();
  dispatch_floating(lp.dtype(), "nll_loss", [&]<typename T>() {
    const T* x = lp.numel() > 0 ? lp.data<T>() : nullptr;
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < l.inner; ++j) {
        const int64_t ti = t[o * l.inner + j];
        if (ti == b.ignore_index) continue;
        if ((ti < 0 || ti >= classes) && !s.has_bad) {
          s.has_bad = true;
          s.bad = ti;
        }
        const int64_t c = ti - b.class_offset;
        if (c < 0 || c >= l.classes) continue;
        const double w = b.weight != nullptr ? b.weight[ti - b.weight_offset] : 1.0;
        s.loss -= w * picked(x, l, o, j, c);
        s.weight += w;
      }
    }
  });
  return s;
}

Tensor nll_loss_block_grad_cpu(const Tensor& grad, const Tensor& target, const Shape& shape,
                               LossLayout l, const NllBlock& b, double divisor) {
  const Tensor g = grad.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  Tensor out = zeros(shape, TensorOptions(grad.dtype()));
  if (out.numel() == 0 || tg.numel() == 0) return out;
  const bool per_element = g.dim() > 0 || tg.dim() == 0;
  dispatch_floating(out.dtype(), "nll_loss_backward", [&]<typename T>() {
    const T* gp = g.data<T>();
    T* y = out.data<T>();
    const double g0 = static_cast<double>(static_cast<compute_t<T>>(gp[0]));
    for_each_pick(tg.data<int64_t>(), l, b,
                  [&](int64_t e, int64_t o, int64_t j, int64_t c, double w) {
                    const double ge =
                        per_element ? static_cast<double>(static_cast<compute_t<T>>(gp[e])) : g0;
                    y[(o * l.classes + c) * l.inner + j] = static_cast<T>(-w * ge / divisor);
                  });
  });
  return out;
}

Tensor gather_target_log_probs_cpu(const Tensor& log_probs, const Tensor& target, int64_t outer,
                                   int64_t classes, int64_t inner, int64_t class_offset,
                                   int64_t ignore_index) {
  const char* op = "gather_target_log_probs";
  const LossLayout l{outer, classes, inner};
  const Tensor lp = log_probs.contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  Tensor out = zeros(target.sizes(), TensorOptions(log_probs.dtype()));
  if (out.numel() == 0) return out;
  const int64_t* t = tg.data<int64_t>();
  dispatch_floating(lp.dtype(), op, [&]<typename T>() {
    const T* x = lp.data<T>();
    T* y = out.data<T>();
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t j = 0; j < l.inner; ++j) {
        const int64_t ti = t[o * l.inner + j];
        const int64_t c = ti - class_offset;
        if (ti == ignore_index || c < 0 || c >= l.classes) continue;
        y[o * l.inner + j] = x[(o * l.classes + c) * l.inner + j];
      }
    }
  });
  return out;
}

Tensor reduce_loss_cpu(const Tensor& losses, const Tensor& target, Reduction reduction,
                       int64_t ignore_index) {
  const Tensor lv = losses.to(kFloat64).contiguous();
  const Tensor tg = target.to(kInt64).contiguous();
  std::vector<double> vals(static_cast<size_t>(lv.numel()), 0.0);
  double count = 0;
  if (lv.numel() > 0) {
    const double* x = lv.data<double>();
    const int64_t* t = tg.data<int64_t>();
    for (int64_t i = 0; i < lv.numel(); ++i) {
      if (t[i] == ignore_index) continue;
      vals[i] = x[i];
      ++count;
    }
  }
  return finish(vals, count, reduction, target.sizes(), losses.dtype());
}

}  // namespace dtensor::detail
