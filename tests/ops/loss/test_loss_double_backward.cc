// Double backward (create_graph) of the losses against PyTorch 2.15
// (torch_loss_double_backward_references.py), float64 on one process: a gradient penalty
// through a Linear layer and each loss, z = x W^T + b, L = loss(f(z), target), g = dL/d(x, W, b
// [, target]) with create_graph, P = sum of g^2; g and dP/d(x, W, b[, target]) at 1e-12
// (relative), binary_cross_entropy's second derivative at 1e-10 (PyTorch's double backward
// divides by (x + 1e-12)^2 (1 - x + 1e-12)^2, ours is the exact derivative of its gradient).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "tests/autograd/leaf.h"
#include "tests/ops/loss/loss_double_backward_refs.inc"

namespace dt = dtensor;
namespace refs = dtensor::test::loss_dbl_refs;
using dt::DTensor;
using dt::Reduction;
using dt::test::leaf;

namespace {

std::vector<double> vals(int n, const std::function<double(int)>& f) {
  std::vector<double> v;
  for (int k = 0; k < n; ++k) v.push_back(f(k));
  return v;
}

// The inputs of the reference script.
const std::vector<double> kX = vals(12, [](int k) { return std::sin(0.37 * k + 0.2); });
const std::vector<double> kW = vals(15, [](int k) { return 0.8 * std::cos(0.23 * k - 0.4); });
const std::vector<double> kB = vals(5, [](int k) { return 0.1 * k - 0.2; });
const std::vector<double> kY = vals(20, [](int k) { return 0.9 * std::cos(0.51 * k); });
const std::vector<double> kP = vals(20, [](int k) { return 0.5 + 0.45 * std::sin(0.73 * k); });
const std::vector<double> kCw = vals(5, [](int c) { return 0.5 + 0.3 * c; });
const std::vector<double> kPw = vals(5, [](int c) { return 1.5 - 0.2 * c; });

// The rows of kP normalised (kl_div's target distribution).
std::vector<double> norm_probs() {
  std::vector<double> q = kP;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int c = 0; c < 5; ++c) s += kP[5 * i + c];
    for (int c = 0; c < 5; ++c) q[5 * i + c] = kP[5 * i + c] / s;
  }
  return q;
}

DTensor constant(const std::vector<double>& v, dt::Shape shape) {
  return leaf(v, std::move(shape)).detach();
}

DTensor classes() {
  return dt::local_dtensor(dt::from_vector<int64_t>({1, 4, 2, 0}, {4}));
}

using LossFn = std::function<DTensor(const DTensor& z, const DTensor& y)>;

struct Case {
  const char* name;
  LossFn loss;
  const std::vector<double>* target;  // nullptr: class targets inside `loss`
  const std::vector<double>*g, *h;
  double tol = 1e-12;
};

std::vector<double> flat(const std::vector<DTensor>& ts) {
  std::vector<double> out;
  for (const DTensor& t : ts) {
    REQUIRE(t.defined());
    const std::vector<double> v = t.to_local().to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

}  // namespace

TEST_CASE("create_graph: a gradient penalty through Linear and each loss as PyTorch") {
  const std::vector<double> q = norm_probs();
  const DTensor cw = constant(kCw, {5}), pw = constant(kPw, {5});
  const Case cases[] = {
      {"l1 mean", [](const DTensor& z, const DTensor& y) { return dt::l1_loss(z, y); }, &kY,
       &refs::kL1MeanG, &refs::kL1MeanH},
      {"smooth_l1 mean",
       [](const DTensor& z, const DTensor& y) {
         return dt::smooth_l1_loss(z, y, Reduction::kMean, 0.7);
       },
       &kY, &refs::kSmoothL1MeanG, &refs::kSmoothL1MeanH},
      {"smooth_l1 beta 0 sum",
       [](const DTensor& z, const DTensor& y) {
         return dt::smooth_l1_loss(z, y, Reduction::kSum, 0.0);
       },
       &kY, &refs::kSmoothL1Beta0SumG, &refs::kSmoothL1Beta0SumH},
      {"huber mean",
       [](const DTensor& z, const DTensor& y) {
         return dt::huber_loss(z, y, Reduction::kMean, 0.8);
       },
       &kY, &refs::kHuberMeanG, &refs::kHuberMeanH},
      {"huber none",
       [](const DTensor& z, const DTensor& y) {
         return dt::sum(dt::huber_loss(z, y, Reduction::kNone, 0.5) * constant(kP, {4, 5}));
       },
       &kY, &refs::kHuberNoneG, &refs::kHuberNoneH},
      {"binary_cross_entropy weight mean",
       [&](const DTensor& z, const DTensor& y) {
         return dt::binary_cross_entropy(dt::sigmoid(z), y, Reduction::kMean, cw);
       },
       &kP, &refs::kBceWeightMeanG, &refs::kBceWeightMeanH, 1e-10},
      {"binary_cross_entropy sum",
       [](const DTensor& z, const DTensor& y) {
         return dt::binary_cross_entropy(dt::sigmoid(z), y, Reduction::kSum);
       },
       &kP, &refs::kBceSumG, &refs::kBceSumH, 1e-10},
      {"binary_cross_entropy_with_logits weight pos_weight mean",
       [&](const DTensor& z, const DTensor& y) {
         return dt::binary_cross_entropy_with_logits(z, y, Reduction::kMean, cw, pw);
       },
       &kP, &refs::kBceLogitsWeightPosMeanG, &refs::kBceLogitsWeightPosMeanH},
      {"binary_cross_entropy_with_logits sum",
       [](const DTensor& z, const DTensor& y) {
         return dt::binary_cross_entropy_with_logits(z, y, Reduction::kSum);
       },
       &kP, &refs::kBceLogitsSumG, &refs::kBceLogitsSumH},
      {"kl_div batchmean",
       [](const DTensor& z, const DTensor& y) {
         return dt::kl_div(dt::log_softmax(z, 1), y, Reduction::kBatchMean);
       },
       &q, &refs::kKlDivBatchmeanG, &refs::kKlDivBatchmeanH},
      {"kl_div log_target sum",
       [](const DTensor& z, const DTensor& y) {
         return dt::kl_div(dt::log_softmax(z, 1), dt::log(y), Reduction::kSum, true);
       },
       &q, &refs::kKlDivLogTargetSumG, &refs::kKlDivLogTargetSumH},
      {"nll_loss weight mean",
       [&](const DTensor& z, const DTensor&) {
         return dt::nll_loss(dt::log_softmax(z, 1), classes(), Reduction::kMean, 2, cw);
       },
       nullptr, &refs::kNllWeightMeanG, &refs::kNllWeightMeanH},
      {"nll_loss weight none",
       [&](const DTensor& z, const DTensor&) {
         const DTensor l = dt::nll_loss(dt::log_softmax(z, 1), classes(), Reduction::kNone, 2, cw);
         return dt::sum(l * constant({kB[0], kB[1], kB[2], kB[3]}, {4}));
       },
       nullptr, &refs::kNllWeightNoneG, &refs::kNllWeightNoneH},
      {"cross_entropy weight mean",
       [&](const DTensor& z, const DTensor&) {
         return dt::cross_entropy(z, classes(), Reduction::kMean, 2, 0.0, cw);
       },
       nullptr, &refs::kCrossEntropyWeightMeanG, &refs::kCrossEntropyWeightMeanH},
      {"cross_entropy weight label_smoothing sum",
       [&](const DTensor& z, const DTensor&) {
         return dt::cross_entropy(z, classes(), Reduction::kSum, 2, 0.1, cw);
       },
       nullptr, &refs::kCrossEntropyWeightSmoothSumG, &refs::kCrossEntropyWeightSmoothSumH},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    const DTensor x = leaf(kX, {4, 3}), w = leaf(kW, {5, 3}), b = leaf(kB, {5});
    std::vector<DTensor> ins = {x, w, b};
    DTensor y;
    if (k.target) {
      y = leaf(*k.target, {4, 5});
      ins.push_back(y);
    }
    const DTensor z = dt::linear(x, w, b);
    const DTensor loss[] = {k.loss(z, y)};
    const std::vector<DTensor> g = dt::autograd::grad(
        loss, ins, {}, std::nullopt, /*create_graph=*/true, /*allow_unused=*/false);
    check_close(flat(g), *k.g, 1e-12);
    DTensor penalty;
    for (const DTensor& gi : g) {
      const DTensor s = dt::sum(gi * gi);
      penalty = penalty.defined() ? penalty + s : s;
    }
    const DTensor outs[] = {penalty};
    std::vector<DTensor> h = dt::autograd::grad(outs, ins, {}, false, false, /*allow_unused=*/true);
    for (size_t i = 0; i < h.size(); ++i) {
      if (!h[i].defined()) h[i] = dt::zeros_like(ins[i]).detach();
    }
    check_close(flat(h), *k.h, k.tol);
  }
}
