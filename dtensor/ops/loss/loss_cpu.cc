#include <cstring>
#include <vector>

#include "dtensor/ops/loss/detail/loss_cuda.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace {

// The input seen as [outer, classes, inner] and the target as [outer, inner].
struct LossLayout {
  int64_t outer = 1;
  int64_t classes = 1;
  int64_t inner = 1;
};

void check_target(const Tensor& target, const char* op) {
  DT_CHECK(target.defined(), "[%s] expected a defined target tensor", op);
  DT_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32,
           "[%s] expected an int64 (or int32) target, got %s", op, dtype_name(target.dtype()));
}

LossLayout check_loss_args(const Tensor& input, const Tensor& target, const char* op) {
  DT_CHECK(input.defined(), "[%s] expected a defined input tensor", op);
  check_target(target, op);
  DT_CHECK(input.device() == target.device(),
           "[%s] expected input and target on the same device, got %s and %s", op,
           input.device().str(), target.device().str());
  DT_CHECK(is_floating(input.dtype()), "[%s] expected a floating input, got %s", op,
           dtype_name(input.dtype()));
  DT_CHECK(input.dim() >= 1,
           "[%s] expected an input of shape [C], [N, C] or [N, C, d1, ...], "
           "got a 0-d tensor",
           op);
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  Shape expected;
  LossLayout l;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != class_dim) expected.push_back(input.size(d));
    if (d < class_dim) l.outer *= input.size(d);
    if (d > class_dim) l.inner *= input.size(d);
  }
  l.classes = input.size(class_dim);
  DT_CHECK(target.sizes() == expected,
           "[%s] target of shape %s does not match input of shape %s (expected target shape %s)",
           op, shape_str(target.sizes()), shape_str(input.sizes()), shape_str(expected));
  return l;
}

// A [shape] tensor of dtype `dtype` holding `values` (row-major).
Tensor tensor_from(const std::vector<double>& values, IntSpan shape, DType dtype) {
  Tensor t = empty(shape, TensorOptions(kFloat64));
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(double));
  return t.to(dtype);
}

// `count`: the number of counted elements, or the sum of their class weights (the weighted
// mean's divisor; 0 / 0 is NaN, as in PyTorch).
Tensor finish(const std::vector<double>& losses, double count, Reduction reduction, IntSpan shape,
              DType dtype) {
  if (reduction == Reduction::kNone) return tensor_from(losses, shape, dtype);
  double sum = 0;
  for (double v : losses) sum += v;
  if (reduction == Reduction::kMean) sum /= count;
  return tensor_from({sum}, {}, dtype);
}

// nll_loss's class weights: a [classes] floating tensor on the input's device (undefined: none).
void check_class_weight(const Tensor& weight, const Tensor& input, int64_t classes,
                        const char* op) {
  if (!weight.defined()) return;
  DT_CHECK(weight.dim() == 1 && weight.size(0) == classes,
           "[%s] weight of shape %s, expected [%d] (one weight per class)", op,
           shape_str(weight.sizes()), classes);
  DT_CHECK(is_floating(weight.dtype()), "[%s] weight has dtype %s, expected a floating dtype", op,
           dtype_name(weight.dtype()));
  DT_CHECK(weight.device() == input.device(),
           "[%s] weight is on %s, expected the input's device %s", op, weight.device().str(),
           input.device().str());
}

// sum of n elements `stride` apart, in double. Eight independent partial sums: the sequential
// sum is one dependent addition per element (latency-bound), and with a contiguous class dim
// (stride 1) the compiler keeps the partial sums in vector registers.
template <typename T>
double sum_classes(const T* p, int64_t n, int64_t stride) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      lanes[k] += static_cast<double>(static_cast<compute_t<T>>(p[(i + k) * stride]));
    }
  }
  for (; i < n; ++i) lanes[0] += static_cast<double>(static_cast<compute_t<T>>(p[i * stride]));
  double s = 0;
  for (double v : lanes) s += v;
  return s;
}

// Per-element smoothed NLL: (1 - s) * -lp[t] + s / C * sum_c -lp[c], times weight[t] when
// `weight` (C values) is given; 0 for ignored targets. `count` receives the sum of weight[t]
// (1 each without weights) over the counted elements. (The exponentials and logarithms of
// cross_entropy are in its log_softmax, which is vectorised; this pass reads the
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
        double v = -ld(o, ti, j);
        if (smoothing != 0.0) {
          const double s = -sum_classes(x + o * l.classes * l.inner + j, l.classes, l.inner);
          v = (1.0 - smoothing) * v + smoothing / static_cast<double>(l.classes) * s;
        }
        const double w = weight != nullptr ? weight[ti] : 1.0;
        out[o * l.inner + j] = w * v;
        count += w;
      }
    }
  });
  return out;
}

}  // namespace

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::kNone:
      return "none";
    case Reduction::kMean:
      return "mean";
    case Reduction::kSum:
      return "sum";
    case Reduction::kBatchMean:
      return "batchmean";
  }
  return "?";
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                int64_t ignore_index, const Tensor& weight) {
  const LossLayout l = check_loss_args(log_probs, target, "nll_loss");
  detail::check_reduction("nll_loss", reduction, false);
  check_class_weight(weight, log_probs, l.classes, "nll_loss");
  if (log_probs.device().is_cuda()) {
    return detail::nll_loss_cuda(log_probs, target, l.outer, l.classes, l.inner, reduction,
                                 ignore_index, 0.0, weight);
  }
  std::vector<double> w;
  if (weight.defined()) w = weight.to(kFloat64).contiguous().to_vector<double>();
  double count = 0;
  const auto losses = nll_elements(log_probs, target, l, ignore_index, 0.0,
                                   weight.defined() ? w.data() : nullptr, count, "nll_loss");
  return finish(losses, count, reduction, target.sizes(), log_probs.dtype());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  const LossLayout l = check_loss_args(logits, target, "cross_entropy");
  DT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "[cross_entropy] label_smoothing must be in [0, 1], got %g", label_smoothing);
  detail::check_reduction("cross_entropy", reduction, false);
  const Tensor lp = log_softmax(logits, logits.dim() == 1 ? 0 : 1);
  if (lp.device().is_cuda()) {
    return detail::nll_loss_cuda(lp, target, l.outer, l.classes, l.inner, reduction, ignore_index,
                                 label_smoothing, Tensor());
  }
  double count = 0;
  // Range errors name nll_loss, the step that checks targets (as in PyTorch).
  const auto losses =
      nll_elements(lp, target, l, ignore_index, label_smoothing, nullptr, count, "nll_loss");
  return finish(losses, count, reduction, target.sizes(), logits.dtype());
}

Tensor gather_target_log_probs(const Tensor& log_probs, const Tensor& target, int64_t class_offset,
                               int64_t ignore_index) {
  const char* op = "gather_target_log_probs";
  const LossLayout l = check_loss_args(log_probs, target, op);
  if (log_probs.device().is_cuda()) {
    return detail::gather_target_log_probs_cuda(log_probs, target, l.outer, l.classes, l.inner,
                                                class_offset, ignore_index);
  }
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

Tensor reduce_loss(const Tensor& losses, const Tensor& target, Reduction reduction,
                   int64_t ignore_index) {
  const char* op = "reduce_loss";
  DT_CHECK(losses.defined(), "[%s] expected a defined losses tensor", op);
  check_target(target, op);
  DT_CHECK(losses.sizes() == target.sizes(),
           "[%s] losses of shape %s do not match target of shape %s", op, shape_str(losses.sizes()),
           shape_str(target.sizes()));
  DT_CHECK(losses.device() == target.device(),
           "[%s] expected losses and target on the same device, got %s and %s", op,
           losses.device().str(), target.device().str());
  detail::check_reduction(op, reduction, false);
  if (losses.device().is_cuda()) {
    return detail::reduce_loss_cuda(losses, target, reduction, ignore_index);
  }
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

}  // namespace dtensor
