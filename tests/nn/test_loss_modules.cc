// The loss modules (dtensor/nn/loss.h) on one process: each equals its function with the options it
// was built with, names itself like PyTorch's class, refuses a single-input call, and passes
// gradients to its input.
#include <catch2/catch.hpp>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::DTensor;
using dt::Reduction;
using dt::Tensor;

namespace {

// Element i = lo + step * ((i * 7 + salt) % 11), float64.
Tensor values(dt::IntSpan shape, int salt, double lo, double step) {
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = lo + step * static_cast<double>((i * 7 + salt) % 11);
  return dt::from_vector<double>(v, shape);
}

bool same(const DTensor& a, const DTensor& b) {
  return a.shape() == b.shape() && dt::allclose(a.to_local(), b.to_local(), 1e-12, 1e-12, true);
}

}  // namespace

TEST_CASE("loss modules equal their functions with the options they hold", "[nn]") {
  const DTensor x = nn::local_dtensor(values({4, 3}, 1, -2.0, 0.4));
  const DTensor y = nn::local_dtensor(values({4, 3}, 2, -1.0, 0.3));
  const DTensor p = nn::local_dtensor(values({4, 3}, 3, 0.05, 0.09));
  const DTensor t = nn::local_dtensor(values({4, 3}, 4, 0.0, 0.1));
  const DTensor w = nn::local_dtensor(values({3}, 5, 0.5, 0.25));
  const DTensor pw = nn::local_dtensor(values({3}, 6, 0.5, 0.3));
  const DTensor target = nn::local_dtensor(dt::from_vector<int64_t>({0, 2, 1, 1}, {4}));

  CHECK(same(nn::MSELoss()(x, y), dt::mse_loss(x, y)));
  CHECK(same(nn::MSELoss(Reduction::kSum)(x, y), dt::mse_loss(x, y, Reduction::kSum)));
  CHECK(same(nn::L1Loss(Reduction::kNone)(x, y), dt::l1_loss(x, y, Reduction::kNone)));
  CHECK(same(nn::SmoothL1Loss(Reduction::kMean, 0.5)(x, y),
             dt::smooth_l1_loss(x, y, Reduction::kMean, 0.5)));
  CHECK(
      same(nn::HuberLoss(Reduction::kSum, 2.0)(x, y), dt::huber_loss(x, y, Reduction::kSum, 2.0)));
  CHECK(same(nn::BCELoss(w)(p, t), dt::binary_cross_entropy(p, t, Reduction::kMean, w)));
  CHECK(same(nn::BCEWithLogitsLoss(w, Reduction::kSum, pw)(x, t),
             dt::binary_cross_entropy_with_logits(x, t, Reduction::kSum, w, pw)));
  CHECK(same(nn::KLDivLoss(Reduction::kBatchMean, true)(x, y),
             dt::kl_div(x, y, Reduction::kBatchMean, true)));
  CHECK(same(nn::NLLLoss(w, 1)(x, target), dt::nll_loss(x, target, Reduction::kMean, 1, w)));
  CHECK(same(nn::CrossEntropyLoss(2, Reduction::kSum, 0.1)(x, target),
             dt::cross_entropy(x, target, Reduction::kSum, 2, 0.1)));
  // Class weights (PyTorch's order: weight, ignore_index, reduction, label_smoothing) and
  // class-probability targets (the input's shape).
  CHECK(same(nn::CrossEntropyLoss(w, 1, Reduction::kMean, 0.2)(x, target),
             dt::cross_entropy(x, target, Reduction::kMean, 1, 0.2, w)));
  CHECK(same(nn::CrossEntropyLoss(w, -100, Reduction::kNone, 0.1)(x, p),
             dt::cross_entropy(x, p, Reduction::kNone, -100, 0.1, w)));
  CHECK(nn::CrossEntropyLoss(w).weight().defined());
  CHECK(!nn::CrossEntropyLoss().weight().defined());
  CHECK(!same(nn::CrossEntropyLoss(w)(x, target), nn::CrossEntropyLoss()(x, target)));

  nn::BCEWithLogitsLoss bce(w, Reduction::kMean, pw);
  CHECK(bce.type_name() == "BCEWithLogitsLoss");
  CHECK(bce.reduction() == Reduction::kMean);
  CHECK(bce.parameters().empty());  // the weights are held, not trained (PyTorch's buffers)
  CHECK(nn::KLDivLoss().type_name() == "KLDivLoss");
  REQUIRE_THROWS_WITH(nn::MSELoss()(x), Catch::Contains("no single-input forward"));
  REQUIRE_THROWS_WITH(nn::MSELoss(Reduction::kBatchMean)(x, y),
                      Catch::Contains("[mse_loss] reduction 'batchmean'"));

  // Gradients reach the input.
  DTensor leaf = nn::local_dtensor(values({4, 3}, 1, -2.0, 0.4));
  leaf.requires_grad_();
  nn::HuberLoss()(leaf, y).backward();
  REQUIRE(leaf.grad().defined());
  CHECK(leaf.grad().shape() == dt::Shape{4, 3});
}

TEST_CASE("margin, embedding and likelihood loss modules equal their functions", "[nn]") {
  const DTensor x = nn::local_dtensor(values({4, 3}, 1, -2.0, 0.4));
  const DTensor y = nn::local_dtensor(values({4, 3}, 2, -1.0, 0.3));
  const DTensor z = nn::local_dtensor(values({4, 3}, 7, -0.5, 0.2));
  const DTensor v = nn::local_dtensor(values({4, 3}, 4, 0.0, 0.1));  // 0 entries: clamped
  const DTensor sign = nn::local_dtensor(dt::from_vector<double>({1, -1, -1, 1}, {4}));
  const DTensor signs = nn::local_dtensor(values({4, 3}, 3, -1.0, 2.0));
  const DTensor w = nn::local_dtensor(values({3}, 5, 0.5, 0.25));
  const DTensor target = nn::local_dtensor(dt::from_vector<int64_t>({0, 2, 1, 1}, {4}));
  const DTensor labels =
      nn::local_dtensor(dt::from_vector<int64_t>({2, 0, -1, 1, -1, 0, 0, 1, 2, 1, -1, 2}, {4, 3}));
  const Reduction kSum = Reduction::kSum, kNone = Reduction::kNone;

  // Each module equals its function with the options it holds, and an option matters on these
  // inputs (the function with it changed differs), so a module dropping it fails.
  const auto check = [](const DTensor& got, const DTensor& want, const DTensor& changed) {
    CHECK(same(got, want));
    CHECK(!same(want, changed));
  };
  const DTensor x0 = x.select(1, 0);
  const DTensor near_y = y + 0.1;  // a negative close to the positive: swap matters
  check(nn::MarginRankingLoss(0.3, kSum)(x0, x0, sign),
        dt::margin_ranking_loss(x0, x0, sign, kSum, 0.3), dt::margin_ranking_loss(x0, x0, sign));
  check(nn::HingeEmbeddingLoss(0.5, kNone)(x, signs),
        dt::hinge_embedding_loss(x, signs, kNone, 0.5), dt::hinge_embedding_loss(x, signs, kNone));
  check(nn::CosineEmbeddingLoss(-0.5)(x, y, sign),
        dt::cosine_embedding_loss(x, y, sign, Reduction::kMean, -0.5),
        dt::cosine_embedding_loss(x, y, sign));
  check(nn::SoftMarginLoss(kSum)(x, signs), dt::soft_margin_loss(x, signs, kSum),
        dt::soft_margin_loss(x, signs));
  check(nn::MultiLabelSoftMarginLoss(w, kNone)(x, v),
        dt::multilabel_soft_margin_loss(x, v, kNone, w),
        dt::multilabel_soft_margin_loss(x, v, kNone));
  check(nn::MultiMarginLoss(2, 0.7, w, kSum)(x, target),
        dt::multi_margin_loss(x, target, kSum, 2, 0.7, w),
        dt::multi_margin_loss(x, target, kSum, 1, 0.7, w));
  check(nn::MultiLabelMarginLoss(kNone)(x, labels), dt::multilabel_margin_loss(x, labels, kNone),
        dt::multilabel_margin_loss(x, labels));
  check(nn::TripletMarginLoss(0.5, 1.0, 1e-3, true, kNone)(x, y, near_y),
        dt::triplet_margin_loss(x, y, near_y, kNone, 0.5, 1.0, 1e-3, true),
        dt::triplet_margin_loss(x, y, near_y, kNone, 0.5, 1.0, 1e-3, false));
  const dt::DTensorDistance l1 = [](const DTensor& a, const DTensor& b) {
    return dt::pairwise_distance(a, b, 1.0);
  };
  check(nn::TripletMarginWithDistanceLoss(l1, 2.0, true, kSum)(x, y, near_y),
        dt::triplet_margin_with_distance_loss(x, y, near_y, kSum, l1, 2.0, true),
        dt::triplet_margin_with_distance_loss(x, y, near_y, kSum, l1, 2.0, false));
  check(nn::TripletMarginWithDistanceLoss()(x, y, z), dt::triplet_margin_loss(x, y, z),
        dt::triplet_margin_with_distance_loss(x, y, z, Reduction::kMean, l1));
  check(nn::PoissonNLLLoss(false, true, 1e-3, kNone)(v, y),
        dt::poisson_nll_loss(v, y, kNone, false, true, 1e-3),
        dt::poisson_nll_loss(v, y, kNone, false, false, 1e-3));
  check(nn::GaussianNLLLoss(true, 1e-2, kSum)(x, y, v),
        dt::gaussian_nll_loss(x, y, v, kSum, true, 1e-2),
        dt::gaussian_nll_loss(x, y, v, kSum, false, 1e-2));

  nn::TripletMarginLoss triplet;
  CHECK(triplet.type_name() == "TripletMarginLoss");
  CHECK(triplet.input_names()[2] == "negative");
  CHECK(nn::GaussianNLLLoss().input_names()[2] == "var");
  CHECK(nn::MultiMarginLoss(1, 1.0, w).weight().defined());
  REQUIRE_THROWS_WITH(triplet(x), Catch::Contains("no single-input forward"));
  REQUIRE_THROWS_WITH(nn::TripletMarginLoss(0.0)(x, y, z),
                      Catch::Contains("[triplet_margin_loss] margin must be greater than 0"));

  // Gradients reach all three inputs.
  DTensor a = nn::local_dtensor(values({4, 3}, 1, -2.0, 0.4)), var = v.detach();
  a.requires_grad_();
  var.requires_grad_();
  nn::GaussianNLLLoss()(a, y, var).backward();
  CHECK(a.grad().shape() == dt::Shape{4, 3});
  CHECK(var.grad().shape() == dt::Shape{4, 3});
}
