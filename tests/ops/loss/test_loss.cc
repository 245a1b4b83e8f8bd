#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/loss/detail/pointwise_loss.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"
#include "tests/ops/loss/torch_margin_loss_refs.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::DType;
using dt::Reduction;
using dt::Tensor;
using dt::test::check_close;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// x's log-probabilities along the class dim, in double, as [outer][C][inner] (row-major).
std::vector<double> ref_log_softmax(const Tensor& x, int64_t outer, int64_t C, int64_t inner) {
  const auto v = x.contiguous().to_vector<double>();
  std::vector<double> lp(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, v[(o * C + c) * inner + j]);
      for (int64_t c = 0; c < C; ++c) sum += std::exp(v[(o * C + c) * inner + j] - mx);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (o * C + c) * inner + j;
        lp[i] = v[i] - mx - std::log(sum);
      }
    }
  }
  return lp;
}

// Reference cross entropy in double for input [outer, C, inner] (given as x with its layout) and
// target [outer, inner]. from_logits = false treats x as log-probabilities (nll_loss). With
// class weights w (PyTorch's formula): (1 - s) * -w[t] lp[t] + s / C * sum_c -w[c] lp[c], and
// `count` is the sum of w[t] over the counted elements.
std::vector<double> ref_losses(const Tensor& x, const Tensor& target, int64_t ignore,
                               double smoothing, bool from_logits, double* count,
                               const std::vector<double>& w = {}) {
  const int64_t cd = x.dim() == 1 ? 0 : 1;
  const int64_t C = x.size(cd);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < cd; ++d) outer *= x.size(d);
  for (int64_t d = cd + 1; d < x.dim(); ++d) inner *= x.size(d);
  const auto v =
      from_logits ? ref_log_softmax(x, outer, C, inner) : x.contiguous().to_vector<double>();
  const auto t = target.to_vector<int64_t>();
  std::vector<double> out(t.size(), 0.0);
  *count = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t ti = t[o * inner + j];
      if (ti == ignore) continue;
      std::vector<double> lp(C);
      for (int64_t c = 0; c < C; ++c) lp[c] = v[(o * C + c) * inner + j];
      const auto wc = [&](int64_t c) { return w.empty() ? 1.0 : w[c]; };
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth -= wc(c) * lp[c];
      out[o * inner + j] = (1 - smoothing) * -wc(ti) * lp[ti] + smoothing / C * smooth;
      *count += wc(ti);
    }
  }
  return out;
}

// Reference cross entropy with class probabilities p (x's shape): per element
// -sum_c w[c] (p[c] (1 - s) + s / C) lp[c].
std::vector<double> ref_prob_losses(const Tensor& x, const Tensor& p, double smoothing,
                                    const std::vector<double>& w = {}) {
  const int64_t cd = x.dim() == 1 ? 0 : 1;
  const int64_t C = x.size(cd);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < cd; ++d) outer *= x.size(d);
  for (int64_t d = cd + 1; d < x.dim(); ++d) inner *= x.size(d);
  const auto lp = ref_log_softmax(x, outer, C, inner);
  const auto pv = p.contiguous().to_vector<double>();
  std::vector<double> out(static_cast<size_t>(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (o * C + c) * inner + j;
        const double q = pv[i] * (1 - smoothing) + smoothing / C;
        out[o * inner + j] -= (w.empty() ? 1.0 : w[c]) * q * lp[i];
      }
    }
  }
  return out;
}

std::vector<double> reduce(const std::vector<double>& l, double count, Reduction r) {
  if (r == Reduction::kNone) return l;
  double s = 0;
  for (double v : l) s += v;
  if (r == Reduction::kMean) s = count > 0 ? s / count : kNaN;
  return {s};
}

dt::Shape out_shape(const Tensor& target, Reduction r) {
  return r == Reduction::kNone ? target.sizes() : dt::Shape{};
}

}  // namespace

TEST_CASE("cross_entropy matches a reference for every reduction, ignore_index and smoothing") {
  using S = std::vector<int64_t>;
  const auto [xs, ts] = GENERATE(std::make_pair(S{6, 5}, S{6}), std::make_pair(S{5}, S{}),
                                 std::make_pair(S{3, 4, 2}, S{3, 2}), std::make_pair(S{0, 5}, S{0}),
                                 std::make_pair(S{2, 1}, S{2}));
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16}) {
    for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      for (double smoothing : {0.0, 0.2}) {
        INFO(dt::dtype_name(d) << " logits " << dt::shape_str(xs) << " reduction "
                               << static_cast<int>(r) << " smoothing " << smoothing);
        const int64_t C = xs.size() == 1 ? xs[0] : xs[1];
        const Tensor x = rand_tensor(xs, d, 1, -4, 4);
        Tensor t = rand_tensor(ts, dt::kInt64, 2, 0, C - 0.51);
        if (t.numel() > 1) t.narrow(0, 0, 1).fill_(-100);  // some ignored elements
        double count = 0;
        // 16-bit logits: PyTorch (and this library) round the log-probabilities to the input
        // dtype before the loss, so compare with the loose 16-bit tolerance.
        const auto l = ref_losses(x, t, -100, smoothing, true, &count);
        const Tensor y = dt::cross_entropy(x, t, r, -100, smoothing);
        CHECK(y.dtype() == d);
        check_close(y, out_shape(t, r), reduce(l, count, r), 2 * rtol_for(d), 2 * rtol_for(d));
      }
    }
  }
}

TEST_CASE("cross_entropy on a non-contiguous input, custom ignore_index and int32 targets") {
  const Tensor x = rand_tensor({5, 4}, dt::kFloat64, 3).transpose(0, 1);  // [4, 5]
  const Tensor t = dt::from_vector<int32_t>({4, 7, 0, 2}, {4});
  double count = 0;
  const auto l = ref_losses(x, t, 7, 0.0, true, &count);
  REQUIRE(count == 3);
  check_close(dt::cross_entropy(x, t, Reduction::kMean, 7), {}, reduce(l, count, Reduction::kMean),
              1e-12);
  // Every element ignored: mean is NaN (0 / 0), sum is 0.
  const Tensor all_ignored = dt::full({4}, -100, dt::kInt64);
  check_close(dt::cross_entropy(x, all_ignored), {}, {kNaN}, 0.0);
  check_close(dt::cross_entropy(x, all_ignored, Reduction::kSum), {}, {0.0}, 0.0);
}

TEST_CASE("cross_entropy with class weights and probability targets matches a reference") {
  using S = std::vector<int64_t>;
  const auto [xs, ts] =
      GENERATE(std::make_pair(S{6, 5}, S{6}), std::make_pair(S{5}, S{}),
               std::make_pair(S{3, 4, 2}, S{3, 2}), std::make_pair(S{0, 5}, S{0}));
  const int64_t C = xs.size() == 1 ? xs[0] : xs[1];
  const Tensor weight = rand_tensor({C}, dt::kFloat64, 7, 0.1, 2.0);
  const std::vector<double> w = weight.to_vector<double>();
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16}) {
    for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      for (double smoothing : {0.0, 0.2}) {
        INFO(dt::dtype_name(d) << " logits " << dt::shape_str(xs) << " reduction "
                               << dt::reduction_name(r) << " smoothing " << smoothing);
        const Tensor x = rand_tensor(xs, d, 1, -4, 4);
        const double tol = 2 * rtol_for(d);
        // Class indices with weights (some ignored): the mean divides by sum w[t].
        Tensor t = rand_tensor(ts, dt::kInt64, 2, 0, C - 0.51);
        if (t.numel() > 1) t.narrow(0, 0, 1).fill_(-100);
        double wsum = 0;
        const auto l = ref_losses(x, t, -100, smoothing, true, &wsum, w);
        const Tensor y = dt::cross_entropy(x, t, r, -100, smoothing, weight.to(d));
        CHECK(y.dtype() == d);
        check_close(y, out_shape(t, r), reduce(l, wsum, r), tol, tol);
        // Class probabilities (the logits' shape and dtype), with and without weights: the mean
        // divides by the number of rows.
        const Tensor p =
            dt::softmax(rand_tensor(xs, dt::kFloat64, 3, -2, 2), xs.size() == 1 ? 0 : 1);
        const auto lp = ref_prob_losses(x, p.to(d), smoothing);
        const auto lw = ref_prob_losses(x, p.to(d), smoothing, w);
        const double rows = static_cast<double>(lp.size());
        check_close(dt::cross_entropy(x, p.to(d), r, -100, smoothing), out_shape(t, r),
                    reduce(lp, rows, r), tol, tol);
        check_close(dt::cross_entropy(x, p.to(d), r, -1, smoothing, weight), out_shape(t, r),
                    reduce(lw, rows, r), tol, tol);
      }
    }
  }
}

TEST_CASE("cross_entropy conventions: PyTorch's means, a [C] input, errors naming the argument") {
  using Catch::Contains;
  // A [C] input with a [C] probability target is one row: the mean equals the sum.
  const Tensor x1 = dt::from_vector<double>({1.0, 2.0, 3.0}, {3});
  const Tensor p1 = dt::from_vector<double>({0.2, 0.3, 0.5}, {3});
  check_close(dt::cross_entropy(x1, p1), {}, {1.1076059644443805}, 1e-12);  // torch 2.15
  check_close(dt::cross_entropy(x1, p1, Reduction::kNone), {}, {1.1076059644443805}, 1e-12);
  // Every target ignored, with weights and smoothing: the mean is NaN (0 / 0), the sum 0.
  const Tensor x = rand_tensor({4, 3}, dt::kFloat64, 3);
  const Tensor w = dt::from_vector<double>({0.2, 1.0, 3.0}, {3});
  const Tensor ignored = dt::full({4}, -100, dt::kInt64);
  check_close(dt::cross_entropy(x, ignored, Reduction::kMean, -100, 0.1, w), {}, {kNaN}, 0.0);
  check_close(dt::cross_entropy(x, ignored, Reduction::kSum, -100, 0.1, w), {}, {0.0}, 0.0);
  // No rows: NaN mean for probabilities too.
  check_close(dt::cross_entropy(dt::zeros({0, 3}), dt::zeros({0, 3})), {}, {kNaN}, 0.0);
  // PyTorch 2.15: every counted target of weight 0 with smoothing - NaN (the NLL's 0 / 0 plus
  // the smoothing term's s / 0), not inf; rows without classes - NaN, not 0 (review findings).
  const Tensor zero_weight_targets = dt::from_vector<int64_t>({0, 0, -100, 0}, {4});
  const Tensor w0 = dt::from_vector<double>({0.0, 1.0, 3.0}, {3});
  check_close(dt::cross_entropy(x, zero_weight_targets, Reduction::kMean, -100, 0.1, w0), {},
              {kNaN}, 0.0);
  check_close(dt::cross_entropy(dt::zeros({3, 0}), dt::zeros({3, 0})), {}, {kNaN}, 0.0);

  // PyTorch 2.15 differentiates the weights with probability targets (torch_loss_references.py,
  // its last lines); so does the DTensor form (and, unlike PyTorch, with class indices too).
  // An int32 class-index target with weights equals the Tensor form.
  const Tensor ce_x = dt::from_vector<double>(
      {1.2, -0.4, 0.3, -0.8, 2.1, 0.5, 0.0, 0.7, -1.5, 1.6, -0.2, 0.9}, {4, 3});
  const Tensor ce_p = dt::from_vector<double>(
      {0.7, 0.2, 0.1, 0.1, 0.3, 0.6, 0.25, 0.25, 0.5, 0.0, 1.0, 0.0}, {4, 3});
  for (Reduction r : {Reduction::kSum, Reduction::kMean}) {
    DTensor dw = dt::local_dtensor(w.clone());
    dw.requires_grad_();
    dt::cross_entropy(dt::local_dtensor(ce_x), dt::local_dtensor(ce_p), r, -100, 0.2, dw)
        .backward();
    check_close(
        dw.grad().to_local(), {3},
        r == Reduction::kSum
            ? std::vector<double>{1.1038065276108169, 2.66730864155121, 2.5300594162779997}
            : std::vector<double>{0.2759516319027042, 0.6668271603878025, 0.6325148540694999},
        1e-12, 1e-12);
  }
  const Tensor t32 = dt::from_vector<int32_t>({0, 2, -100, 1}, {4});
  check_close(dt::cross_entropy(dt::local_dtensor(ce_x), dt::local_dtensor(t32), Reduction::kMean,
                                -100, 0.1, dt::local_dtensor(w))
                  .to_local(),
              {}, dt::cross_entropy(ce_x, t32, Reduction::kMean, -100, 0.1, w).to_vector<double>(),
              1e-12, 1e-12);

  const Tensor t = dt::from_vector<int64_t>({0, 2, 1, 1}, {4});
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(x, t, Reduction::kMean, -100, 0.0, dt::ones({4}, dt::kFloat64)),
      Contains("[cross_entropy] weight of shape [4], expected [3] (one weight per class)"));
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(x, t, Reduction::kMean, -100, 0.0, dt::ones({3}, dt::kInt64)),
      Contains("[cross_entropy] weight has dtype int64, expected a floating dtype"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({4, 3}, dt::kInt64)),
                      Contains("[cross_entropy] argument target holds class probabilities (the "
                               "input's shape [4, 3]) and has dtype int64, expected the input's "
                               "floating dtype float64"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({4, 3}, dt::kFloat32)),
                      Contains("has dtype float32, expected the input's floating dtype float64"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({4, 2}, dt::kFloat64)),
                      Contains("[cross_entropy] argument target has dtype float64, expected int64 "
                               "or int32 (class indices), or class probabilities of the input's "
                               "shape [4, 3] (got target shape [4, 2])"));
  // PyTorch: "ignore_index is not supported for floating point target" (a negative one passes).
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({4, 3}, dt::kFloat64), Reduction::kMean, 0),
                      Contains("[cross_entropy] ignore_index 0 is not supported with "
                               "class-probability targets (expected a negative one"));
  CHECK_NOTHROW(dt::cross_entropy(x, dt::zeros({4, 3}, dt::kFloat64), Reduction::kMean, -1));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({4, 3}, dt::kFloat64), Reduction::kMean, -100,
                                        0.0, dt::ones({2}, dt::kFloat64)),
                      Contains("[cross_entropy] weight of shape [2], expected [3]"));
}

TEST_CASE("nll_loss matches a reference") {
  const Tensor lp = rand_tensor({6, 3}, dt::kFloat32, 4, -5, 0);
  const Tensor t = dt::from_vector<int64_t>({0, 2, 1, -100, 2, 0}, {6});
  double count = 0;
  const auto l = ref_losses(lp, t, -100, 0.0, false, &count);
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    check_close(dt::nll_loss(lp, t, r), out_shape(t, r), reduce(l, count, r), 3e-6, 1e-6);
  }
}

TEST_CASE("gather_target_log_probs over class shards reassembles nll_loss") {
  const int64_t N = 7, C = 10, shards = 3;  // uneven shards: 4, 4, 2 classes
  const Tensor lp = rand_tensor({N, C}, dt::kFloat64, 5, -6, 0);
  const Tensor t = dt::from_vector<int64_t>({0, 9, 4, -100, 3, 8, 5}, {N});
  std::vector<double> picked(N, 0.0);
  for (int64_t s = 0; s < shards; ++s) {
    const auto b = dt::chunk_bounds(C, shards, s);
    const Tensor part = dt::gather_target_log_probs(lp.narrow(1, b.offset, b.size), t, b.offset);
    REQUIRE(dt::shape_str(part.sizes()) == "[7]");
    const auto pv = part.to_vector<double>();
    for (int64_t i = 0; i < N; ++i) {
      const int64_t ti = t.at<int64_t>({i});
      const bool mine = ti != -100 && ti >= b.offset && ti < b.offset + b.size;
      CHECK(pv[i] == (mine ? lp.at<double>({i, ti}) : 0.0));
      picked[i] += pv[i];
    }
  }
  std::vector<double> neg(N);
  for (int64_t i = 0; i < N; ++i) neg[i] = -picked[i];
  const Tensor losses = dt::from_vector<double>(neg, {N});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    const auto full = dt::nll_loss(lp, t, r).to_vector<double>();
    check_close(dt::reduce_loss(losses, t, r), out_shape(t, r), full, 1e-12, 1e-12);
  }
  // [N, C, d] layout and a 1-d input.
  const Tensor lp3 = rand_tensor({2, 4, 3}, dt::kFloat32, 6, -3, 0);
  const Tensor t3 = dt::from_vector<int64_t>({0, 3, 2, 1, 1, 3}, {2, 3});
  const Tensor g = dt::gather_target_log_probs(lp3.narrow(1, 2, 2), t3, 2);
  std::vector<double> e3;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t ti = t3.at<int64_t>({n, j});
      e3.push_back(ti >= 2 ? lp3.at<double>({n, ti, j}) : 0.0);
    }
  check_close(g, {2, 3}, e3, 0.0, 0.0);
  check_close(dt::gather_target_log_probs(lp.select(0, 1), dt::full({}, 9, dt::kInt64), 0), {},
              {lp.at<double>({1, 9})}, 0.0, 0.0);
  // reduce_loss zeroes ignored elements even when the caller did not.
  check_close(
      dt::reduce_loss(dt::ones({3}), dt::from_vector<int64_t>({1, -100, 0}, {3}), Reduction::kNone),
      {3}, {1.0, 0.0, 1.0}, 0.0, 0.0);
}

TEST_CASE("loss errors name the op, the value and what was expected") {
  using Catch::Contains;
  const Tensor x = dt::zeros({3, 5});
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::from_vector<int64_t>({0, 7, 1}, {3})),
                      Contains("[nll_loss] target 7 out of range for 5 classes"));
  REQUIRE_THROWS_WITH(dt::nll_loss(x, dt::from_vector<int64_t>({0, -1, 1}, {3})),
                      Contains("[nll_loss] target -1 out of range for 5 classes"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({4}, dt::kInt64)),
                      Contains("[cross_entropy] target of shape [4] does not match input of "
                               "shape [3, 5] (expected target shape [3])"));
  REQUIRE_THROWS_WITH(
      dt::cross_entropy(x, dt::zeros({3})),
      Contains("[cross_entropy] argument target has dtype float32, expected int64 or int32"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({3}, dt::kInt64), Reduction::kMean, -100, 1.5),
                      Contains("[cross_entropy] label_smoothing must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(dt::nll_loss(dt::zeros({3, 5}, dt::kInt64), dt::zeros({3}, dt::kInt64)),
                      Contains("[nll_loss] expected a floating input, got int64 (argument input:"));
  REQUIRE_THROWS_WITH(dt::nll_loss(x, Tensor()),
                      Contains("[nll_loss] argument target is an undefined tensor"));
  REQUIRE_THROWS_WITH(
      dt::reduce_loss(dt::zeros({2}), dt::zeros({3}, dt::kInt64), Reduction::kSum),
      Contains("[reduce_loss] losses of shape [2] do not match target of shape [3]"));
  REQUIRE_THROWS_AS(dt::gather_target_log_probs(dt::zeros({}), dt::zeros({}, dt::kInt64), 0),
                    dt::Error);
}

// ---- pointwise losses and the weighted nll_loss ---------------------------------------------

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// PyTorch's values and gradients (float64, CPU) of the losses on the inputs below, printed by
// tests/ops/loss/torch_loss_references.py (run: cd /tmp && /root/venv/bin/python
// /work/main/tests/ops/loss/torch_loss_references.py; torch 2.15.0+cu132). For 'none' the
// gradients are of sum(kUpstream * loss); for the reductions, of the loss.
struct TorchRef {
  const char* name;
  const char* reduction;
  std::vector<double> value, grad_input, grad_target;
};
const std::vector<TorchRef> kTorchRefs = {
    {"mse_loss",
     "none",
     {4.0, 0.0, 9.0, 1.5625, 1.0, 12.25},
     {-2.0, -0.0, 12.0, -2.5, -1.0, 10.5},
     {2.0, -0.0, -12.0, 2.5, 1.0, -10.5}},
    {"l1_loss",
     "none",
     {2.0, 0.0, 3.0, 1.25, 1.0, 3.5},
     {-0.5, -0.0, 2.0, -1.0, -0.5, 1.5},
     {0.5, 0.0, -2.0, 1.0, 0.5, -1.5}},
    {"smooth_l1_loss",
     "none",
     {1.5, 0.0, 2.5, 0.75, 0.5, 3.0},
     {-0.5, -0.0, 2.0, -1.0, -0.5, 1.5},
     {0.5, -0.0, -2.0, 1.0, 0.5, -1.5}},
    {"smooth_l1_loss(beta=0)",
     "none",
     {2.0, 0.0, 3.0, 1.25, 1.0, 3.5},
     {-0.5, -0.0, 2.0, -1.0, -0.5, 1.5},
     {0.5, 0.0, -2.0, 1.0, 0.5, -1.5}},
    {"huber_loss",
     "none",
     {1.5, 0.0, 2.5, 0.75, 0.5, 3.0},
     {-0.5, -0.0, 2.0, -1.0, -0.5, 1.5},
     {0.5, -0.0, -2.0, 1.0, 0.5, -1.5}},
    {"huber_loss(delta=2.5)",
     "none",
     {2.0, 0.0, 4.375, 0.78125, 0.5, 5.625},
     {-1.0, -0.0, 5.0, -1.25, -0.5, 3.75},
     {1.0, -0.0, -5.0, 1.25, 0.5, -3.75}},
    {"binary_cross_entropy",
     "none",
     {0.10536051565782631, 0.6931471805599453, 1.2039728043259361, 69.07755278982137, 100.0,
      0.949783446209775},
     {0.5555555555555555, 2.0, 8.888888888888891, -1000000003995.8029, -500000001997.9014,
      -2.857142857142857},
     {1.0986122886681096, 0.0, -4.394449154672439, 69.07755278982137, kInf, 1.2709467905808054}},
    {"binary_cross_entropy(weight)",
     "none",
     {0.052680257828913155, 0.6931471805599453, 2.4079456086518722, 34.538776394910684, 100.0,
      1.89956689241955},
     {0.27777777777777773, 2.0, 17.777777777777782, -500000001997.9014, -500000001997.9014,
      -5.714285714285714},
     {0.5493061443340548, 0.0, -8.788898309344878, 34.538776394910684, kInf, 2.541893581161611}},
    {"binary_cross_entropy_with_logits",
     "none",
     {0.048587351573742055, 0.9740769841801067, 0.6931471805599453, 0.8740769841801067,
      0.1269280110429725, 40.0},
     {0.02371293658878339, 0.6224593312018546, 0.0, 0.4224593312018546, 0.05960146101105884, 1.5},
     {1.5, -0.5, -0.0, -0.5, 1.0, -60.0}},
    {"binary_cross_entropy_with_logits(weight, pos_weight)",
     "none",
     {0.07288102736061308, 0.7305577381350801, 1.2996509635498974, 0.48444619050806403,
      0.031732002760743123, 20.0},
     {0.03556940488317509, 0.466844498401391, -0.375, 0.17347559872111273, 0.01490036525276471,
      0.75},
     {4.536440513680306, -0.019442261864919985, 1.0397207708399177, -0.012961507909946657,
      0.5158660013803716, -30.0}},
    {"mse_loss",
     "sum",
     {27.8125},
     {-4.0, 0.0, 6.0, -2.5, 2.0, 7.0},
     {4.0, 0.0, -6.0, 2.5, -2.0, -7.0}},
    {"l1_loss",
     "sum",
     {10.75},
     {-1.0, 0.0, 1.0, -1.0, 1.0, 1.0},
     {1.0, -0.0, -1.0, 1.0, -1.0, -1.0}},
    {"smooth_l1_loss",
     "sum",
     {8.25},
     {-1.0, 0.0, 1.0, -1.0, 1.0, 1.0},
     {1.0, 0.0, -1.0, 1.0, -1.0, -1.0}},
    {"smooth_l1_loss(beta=0)",
     "sum",
     {10.75},
     {-1.0, 0.0, 1.0, -1.0, 1.0, 1.0},
     {1.0, -0.0, -1.0, 1.0, -1.0, -1.0}},
    {"huber_loss",
     "sum",
     {8.25},
     {-1.0, 0.0, 1.0, -1.0, 1.0, 1.0},
     {1.0, 0.0, -1.0, 1.0, -1.0, -1.0}},
    {"huber_loss(delta=2.5)",
     "sum",
     {13.28125},
     {-2.0, 0.0, 2.5, -1.25, 1.0, 2.5},
     {2.0, 0.0, -2.5, 1.25, -1.0, -2.5}},
    {"binary_cross_entropy",
     "sum",
     {172.02981673657484},
     {1.111111111111111, -2.0, 4.4444444444444455, -1000000003995.8029, 1000000003995.8029,
      -1.9047619047619047},
     {2.197224577336219, -0.0, -2.1972245773362196, 69.07755278982137, -kInf, 0.8472978603872036}},
    {"binary_cross_entropy(weight)",
     "sum",
     {139.59211633437098},
     {0.5555555555555555, -2.0, 8.888888888888891, -500000001997.9014, 1000000003995.8029,
      -3.8095238095238093},
     {1.0986122886681096, -0.0, -4.394449154672439, 34.538776394910684, -kInf, 1.6945957207744071}},
    {"binary_cross_entropy_with_logits",
     "sum",
     {42.71681651153688},
     {0.04742587317756678, -0.6224593312018546, 0.0, 0.4224593312018546, -0.11920292202211769, 1.0},
     {3.0, 0.5, -0.0, -0.5, -2.0, -40.0}},
    {"binary_cross_entropy_with_logits(weight, pos_weight)",
     "sum",
     {22.619267922314396},
     {0.07113880976635018, -0.466844498401391, -0.1875, 0.17347559872111273, -0.02980073050552942,
      0.5},
     {9.072881027360612, 0.019442261864919985, 0.5198603854199588, -0.012961507909946657,
      -1.0317320027607433, -20.0}},
    {"mse_loss",
     "mean",
     {4.635416666666667},
     {-0.6666666666666666, 0.0, 1.0, -0.41666666666666663, 0.3333333333333333, 1.1666666666666665},
     {0.6666666666666666, 0.0, -1.0, 0.41666666666666663, -0.3333333333333333,
      -1.1666666666666665}},
    {"l1_loss",
     "mean",
     {1.7916666666666667},
     {-0.16666666666666666, 0.0, 0.16666666666666666, -0.16666666666666666, 0.16666666666666666,
      0.16666666666666666},
     {0.16666666666666666, -0.0, -0.16666666666666666, 0.16666666666666666, -0.16666666666666666,
      -0.16666666666666666}},
    {"smooth_l1_loss",
     "mean",
     {1.375},
     {-0.16666666666666666, 0.0, 0.16666666666666666, -0.16666666666666666, 0.16666666666666666,
      0.16666666666666666},
     {0.16666666666666666, 0.0, -0.16666666666666666, 0.16666666666666666, -0.16666666666666666,
      -0.16666666666666666}},
    {"smooth_l1_loss(beta=0)",
     "mean",
     {1.7916666666666667},
     {-0.16666666666666666, 0.0, 0.16666666666666666, -0.16666666666666666, 0.16666666666666666,
      0.16666666666666666},
     {0.16666666666666666, -0.0, -0.16666666666666666, 0.16666666666666666, -0.16666666666666666,
      -0.16666666666666666}},
    {"huber_loss",
     "mean",
     {1.375},
     {-0.16666666666666666, 0.0, 0.16666666666666666, -0.16666666666666666, 0.16666666666666666,
      0.16666666666666666},
     {0.16666666666666666, 0.0, -0.16666666666666666, 0.16666666666666666, -0.16666666666666666,
      -0.16666666666666666}},
    {"huber_loss(delta=2.5)",
     "mean",
     {2.2135416666666665},
     {-0.3333333333333333, 0.0, 0.41666666666666663, -0.20833333333333331, 0.16666666666666666,
      0.41666666666666663},
     {0.3333333333333333, 0.0, -0.41666666666666663, 0.20833333333333331, -0.16666666666666666,
      -0.41666666666666663}},
    {"binary_cross_entropy",
     "mean",
     {28.671636122762475},
     {0.18518518518518515, -0.3333333333333333, 0.7407407407407409, -166666667332.63382,
      166666667332.63382, -0.31746031746031744},
     {0.36620409622270317, -0.0, -0.3662040962227033, 11.512925464970229, -kInf,
      0.14121631006453392}},
    {"binary_cross_entropy(weight)",
     "mean",
     {23.265352722395164},
     {0.09259259259259257, -0.3333333333333333, 1.4814814814814818, -83333333666.31691,
      166666667332.63382, -0.6349206349206349},
     {0.18310204811135158, -0.0, -0.7324081924454066, 5.756462732485114, -kInf,
      0.28243262012906784}},
    {"binary_cross_entropy_with_logits",
     "mean",
     {7.119469418589479},
     {0.00790431219626113, -0.10374322186697577, 0.0, 0.07040988853364243, -0.01986715367035295,
      0.16666666666666666},
     {0.5, 0.08333333333333333, -0.0, -0.08333333333333333, -0.3333333333333333,
      -6.666666666666667}},
    {"binary_cross_entropy_with_logits(weight, pos_weight)",
     "mean",
     {3.7698779870523995},
     {0.011856468294391695, -0.07780741640023182, -0.03125, 0.028912599786852122,
      -0.004966788417588237, 0.08333333333333333},
     {1.5121468378934353, 0.003240376977486664, 0.08664339756999313, -0.002160251318324443,
      -0.1719553337934572, -3.3333333333333335}},
    {"kl_div",
     "none",
     {-0.0818875824868201, 0.0, 0.6534264097200273, 0.1, 0.5388081587022191, -0.11478661367769954},
     {-0.1, 0.0, -1.0, -1.0, 0.15, -0.07500000000000001},
     {0.29528104378294984, kNaN, 4.613705638880109, 1.1, -1.398013597837032, -1.9435984103309867}},
    {"kl_div(log_target)",
     "none",
     {-0.08075860719786218, 0.08187307530779817, -0.030077653116841106, 0.047561471225035706,
      0.7357588823428847, -0.060441608332822784},
     {-0.10094825899732769, 0.8187307530779818, -0.2005176874456075, -0.951229424500714,
      0.18393972058572117, -0.027473458333101268},
     {0.0605689553983966, -0.90060382838578, 0.1403623812119253, 0.9987908957257497,
      -0.5518191617571635, -0.0631889541661329}},
    {"kl_div",
     "sum",
     {1.0955603722577267},
     {-0.2, -0.0, -0.5, -1.0, -0.3, -0.05},
     {0.5905620875658997, kNaN, 2.3068528194400546, 1.1, 2.796027195674064, -1.295732273553991}},
    {"kl_div(log_target)",
     "sum",
     {0.6939155602281926},
     {-0.20189651799465538, -0.8187307530779818, -0.10025884372280375, -0.951229424500714,
      -0.36787944117144233, -0.01831563888873418},
     {0.1211379107967932, 0.90060382838578, 0.07018119060596265, 0.9987908957257497,
      1.103638323514327, -0.042125969444088605}},
    {"kl_div",
     "mean",
     {0.1825933953762878},
     {-0.03333333333333333, -0.0, -0.08333333333333333, -0.16666666666666666, -0.049999999999999996,
      -0.008333333333333333},
     {0.09842701459431663, kNaN, 0.38447546990667575, 0.18333333333333332, 0.466004532612344,
      -0.21595537892566513}},
    {"kl_div(log_target)",
     "mean",
     {0.11565259337136542},
     {-0.03364941966577589, -0.13645512551299696, -0.016709807287133956, -0.15853823741678566,
      -0.061313240195240384, -0.0030526064814556963},
     {0.02018965179946553, 0.15010063806429666, 0.011696865100993771, 0.16646514928762493,
      0.18393972058572117, -0.0070209949073481}},
    {"kl_div",
     "batchmean",
     {0.5477801861288634},
     {-0.1, -0.0, -0.25, -0.5, -0.15, -0.025},
     {0.29528104378294984, kNaN, 1.1534264097200273, 0.55, 1.398013597837032, -0.6478661367769954}},
    {"kl_div(log_target)",
     "batchmean",
     {0.3469577801140963},
     {-0.10094825899732769, -0.4093653765389909, -0.050129421861401874, -0.475614712250357,
      -0.18393972058572117, -0.00915781944436709},
     {0.0605689553983966, 0.45030191419289, 0.03509059530298132, 0.4993954478628749,
      0.5518191617571635, -0.021062984722044303}},
    {"nll_loss(weight)",
     "none",
     {0.24, 4.199999999999999, 0.0, 1.1},
     {-0.1, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0},
     {}},
    {"nll_loss(weight)",
     "sum",
     {5.539999999999999},
     {-0.2, 0.0, 0.0, 0.0, 0.0, -3.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0},
     {}},
    {"nll_loss(weight)",
     "mean",
     {1.3190476190476188},
     {-0.047619047619047616, 0.0, 0.0, 0.0, 0.0, -0.7142857142857142, 0.0, 0.0, 0.0, 0.0,
      -0.23809523809523808, 0.0},
     {}},
    {"cross_entropy(weight)",
     "none",
     {0.09505620805348962, 5.485992226744406, 0.0, 2.307952014109589},
     {-0.03782896937205012, 0.012552114603922158, 0.02527685476812795, -0.1313287198633487,
      -2.3867872459793644, 2.5181159658427132, 0.0, 0.0, 0.0, 0.6017266454582053,
      -0.9005352544924539, 0.29880860903424866},
     {}},
    {"cross_entropy(weight)",
     "sum",
     {7.889000448907484},
     {-0.07565793874410023, 0.025104229207844317, 0.0505537095362559, 0.1313287198633487,
      2.3867872459793644, -2.5181159658427132, 0.0, 0.0, 0.0, 0.6017266454582053,
      -0.9005352544924539, 0.29880860903424866},
     {}},
    {"cross_entropy(weight)",
     "mean",
     {1.8783334402160674},
     {-0.018013794939071483, 0.005977197430439122, 0.012036597508632356, 0.03126874282460683,
      0.5682826776141343, -0.5995514204387412, 0.0, 0.0, 0.0, 0.1432682489186203,
      -0.21441315583153664, 0.07114490691291635},
     {}},
    {"cross_entropy(weight, smoothing=0.2)",
     "none",
     {0.49579032438434373, 4.811486389225003, 0.0, 2.248588175238356},
     {0.05010960071482309, -0.005718681204704584, -0.04439091951011851, -0.10398698974459154,
      -2.065529939741566, 2.1695169294861576, 0.0, 0.0, 0.0, 0.6365314437615285,
      -0.7592447415185168, 0.12271329775698857},
     {}},
    {"cross_entropy(weight, smoothing=0.2)",
     "sum",
     {7.555864888847702},
     {0.10021920142964617, -0.011437362409409168, -0.08878183902023702, 0.10398698974459154,
      2.065529939741566, -2.1695169294861576, 0.0, 0.0, 0.0, 0.6365314437615285,
      -0.7592447415185168, 0.12271329775698857},
     {}},
    {"cross_entropy(weight, smoothing=0.2)",
     "mean",
     {1.7990154497256432},
     {0.023861714626106225, -0.0027231815260498025, -0.021138533100056433, 0.0247588070820456,
      0.49179284279561086, -0.5165516498776564, 0.0, 0.0, 0.0, 0.15155510565750674,
      -0.18077255750440877, 0.029217451846902033},
     {}},
    {"cross_entropy(weight, smoothing=0.1, [2, 3, 2])",
     "none",
     {0.6311033036650607, 0.0, 5.259238950654476, 0.38621177342135543},
     {0.12143839461359301, 0.0, -0.12750194588310118, 0.0, 0.006063551269508184, 0.0,
      4.437484012154621, -0.10648251617750393, 0.2639114635611467, -0.011480603027612706,
      -4.701395475715767, 0.1179631192051166},
     {}},
    {"cross_entropy(weight, smoothing=0.1, [2, 3, 2])",
     "sum",
     {6.276554027740892},
     {0.24287678922718603, 0.0, -0.25500389176620236, 0.0, 0.012127102539016369, 0.0,
      2.2187420060773104, -0.10648251617750393, 0.13195573178057335, -0.011480603027612706,
      -2.3506977378578835, 0.1179631192051166},
     {}},
    {"cross_entropy(weight, smoothing=0.1, [2, 3, 2])",
     "mean",
     {1.4944176256525932},
     {0.05782780695885381, 0.0, -0.060715212325286275, 0.0, 0.002887405366432468, 0.0,
      0.5282719062088833, -0.02535298004226284, 0.03141803137632698, -0.002733476911336358,
      -0.5596899375852104, 0.028086456953599195},
     {}},
    {"cross_entropy(probs, weight, smoothing=0.2)",
     "none",
     {1.1350892505584855, 3.160906880015648, 3.9336638900948837, 2.248588175238356},
     {0.1835306146200149, -0.0636269595018016, -0.11990365511821333, -0.057168516816659014,
      -1.2654305326850745, 1.3225990495017337, 0.9560841774905423, 1.6067840564547808,
      -2.562868233945323, 0.6365314437615285, -0.7592447415185168, 0.12271329775698857},
     {0.03802248322139585, 0.8301124161069793, 1.6503372483209375, -0.500586252093035,
      -0.18293126046517472, -4.388793781395525, 0.37587545242075354, 0.7593772621037678,
      12.838131786311306, 0.0812723222575342, 1.846361611287671, 2.899084833863013}},
    {"cross_entropy(probs, weight, smoothing=0.2)",
     "sum",
     {10.478248195907373},
     {0.3670612292400298, -0.1272539190036032, -0.23980731023642665, 0.057168516816659014,
      1.2654305326850745, -1.3225990495017337, 0.47804208874527115, 0.8033920282273904,
      -1.2814341169726615, 0.6365314437615285, -0.7592447415185168, 0.12271329775698857},
     {0.0760449664427917, 1.6602248322139586, 3.300674496641875, 0.500586252093035,
      0.18293126046517472, 4.388793781395525, 0.18793772621037677, 0.3796886310518839,
      6.419065893155653, 0.0812723222575342, 1.846361611287671, 2.899084833863013}},
    {"cross_entropy(probs, weight, smoothing=0.2)",
     "mean",
     {2.619562048976843},
     {0.09176530731000745, -0.0318134797509008, -0.05995182755910666, 0.014292129204164753,
      0.31635763317126864, -0.3306497623754334, 0.11951052218631779, 0.2008480070568476,
      -0.3203585292431654, 0.15913286094038212, -0.1898111853796292, 0.030678324439247142},
     {0.019011241610697924, 0.41505620805348964, 0.8251686241604688, 0.12514656302325874,
      0.04573281511629368, 1.0971984453488812, 0.04698443155259419, 0.09492215776297097,
      1.6047664732889133, 0.02031808056438355, 0.46159040282191777, 0.7247712084657533}},
    {"cross_entropy(probs, [2, 3, 2])",
     "none",
     {1.5273429201907636, 1.7388943013612834, 0.24386348027739738, 1.8639951252750688},
     {0.019972815333583013, 0.403565793525721, 0.17611992383035144, 0.17982715915407588,
      -0.19609273916393444, -0.5833929526797967, -0.43281079384226984, 0.15057547027863358,
      0.11640075008021597, -0.531710217794623, 0.3164100437620539, 0.38113474751598936},
     {0.7136714600953817, -2.3388943013612833, 0.21367146009538177, -1.1388943013612836,
      1.1136714600953819, -0.5388943013612834, 0.48772696055479475, 1.383995125275069,
      5.687726960554795, 2.683995125275069, 3.687726960554795, 0.38399512527506896}},
    {"cross_entropy(probs, [2, 3, 2])",
     "sum",
     {5.374095827104513},
     {0.03994563066716603, -0.403565793525721, 0.3522398476607029, -0.17982715915407588,
      -0.3921854783278689, 0.5833929526797967, -0.21640539692113492, 0.15057547027863358,
      0.058200375040107985, -0.531710217794623, 0.15820502188102695, 0.38113474751598936},
     {1.4273429201907635, 2.3388943013612833, 0.42734292019076353, 1.1388943013612836,
      2.2273429201907637, 0.5388943013612834, 0.24386348027739738, 1.383995125275069,
      2.8438634802773977, 2.683995125275069, 1.8438634802773974, 0.38399512527506896}},
    {"cross_entropy(probs, [2, 3, 2])",
     "mean",
     {1.3435239567761283},
     {0.009986407666791507, -0.10089144838143024, 0.08805996191517572, -0.04495678978851897,
      -0.09804636958196722, 0.14584823816994918, -0.05410134923028373, 0.037643867569658394,
      0.014550093760026996, -0.13292755444865575, 0.03955125547025674, 0.09528368687899734},
     {0.35683573004769087, 0.5847235753403208, 0.10683573004769088, 0.2847235753403209,
      0.5568357300476909, 0.13472357534032084, 0.060965870069349344, 0.34599878131876727,
      0.7109658700693494, 0.6709987813187672, 0.46096587006934936, 0.09599878131876724}},
};

const std::vector<double> kUpstream = {0.5, -1.0, 2.0, 1.0, -0.5, 1.5};

// The inputs of torch_loss_references.py ([2, 3] unless noted).
struct RefInputs {
  std::vector<double> x, y;
  Tensor weight, pos_weight;
  dt::Shape x_shape = {2, 3};
  dt::Shape y_shape = {2, 3};
  bool class_indices = false;  // y holds class indices (int64, no gradient)
};

RefInputs ref_inputs(std::string_view name) {
  if (name.starts_with("binary_cross_entropy_with_logits")) {
    return {{-3.0, -0.5, 0.0, 0.5, 2.0, 40.0},
            {0.0, 1.0, 0.5, 0.2, 1.0, 0.0},
            dt::from_vector<double>({1.5, 0.5}, {2, 1}),
            dt::from_vector<double>({2.0, 0.5, 1.5}, {3})};
  }
  if (name.starts_with("binary_cross_entropy")) {
    return {{0.1, 0.5, 0.9, 1e-30, 1.0, 0.3},
            {0.0, 1.0, 0.5, 1.0, 0.0, 0.7},
            dt::from_vector<double>({0.5, 1.0, 2.0}, {3})};
  }
  if (name.starts_with("kl_div")) {
    const bool log_target = name == "kl_div(log_target)";
    return {{-1.2, -0.3, -2.0, -0.1, -3.0, -0.7},
            log_target ? std::vector<double>{-1.6, -0.2, -2.3, -0.05, -1.0, -4.0}
                       : std::vector<double>{0.2, 0.0, 0.5, 1.0, 0.3, 0.05}};
  }
  if (name.starts_with("cross_entropy")) {
    // [4, 3], or [2, 3, 2] ("[2, 3, 2]" in the name); class indices, or class probabilities.
    const bool three = name.ends_with("[2, 3, 2])");
    const bool probs = name.starts_with("cross_entropy(probs");
    RefInputs in;
    in.weight = name.find("weight") != std::string_view::npos
                    ? dt::from_vector<double>({0.2, 1.0, 3.0}, {3})
                    : Tensor();
    in.x_shape = three ? dt::Shape{2, 3, 2} : dt::Shape{4, 3};
    in.y_shape = probs ? in.x_shape : (three ? dt::Shape{2, 2} : dt::Shape{4});
    in.class_indices = !probs;
    in.x =
        three ? std::vector<double>{0.5, -1.0, 1.5, 0.2, -0.3, 0.8, 2.0, 0.1, -0.6, -1.2, 0.4, 1.1}
              : std::vector<double>{1.2, -0.4, 0.3, -0.8, 2.1, 0.5, 0.0, 0.7, -1.5, 1.6, -0.2, 0.9};
    if (probs) {
      in.y =
          three ? std::vector<double>{0.2, 0.5, 0.3, 0.5, 0.5, 0.0, 1.0, 0.1, 0.0, 0.6, 0.0, 0.3}
                : std::vector<double>{0.7, 0.2, 0.1, 0.1, 0.3, 0.6, 0.25, 0.25, 0.5, 0.0, 1.0, 0.0};
    } else {
      in.y = three ? std::vector<double>{1, -100, 2, 0} : std::vector<double>{0, 2, -100, 1};
    }
    return in;
  }
  if (name.starts_with("nll_loss")) {
    return {{-1.2, -0.4, -2.1, -0.3, -1.9, -1.4, -2.2, -0.2, -1.0, -0.7, -1.1, -1.6},
            {0, 2, -100, 1},
            dt::from_vector<double>({0.2, 1.0, 3.0}, {3}),
            Tensor(),
            {4, 3},
            {4},
            true};
  }
  return {{-1.5, 0.25, 2.0, -0.75, 1.0, 3.5}, {0.5, 0.25, -1.0, 0.5, 0.0, 0.0}};
}

Reduction reduction_of(std::string_view r) {
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "batchmean") return Reduction::kBatchMean;
  return Reduction::kMean;
}

// The loss `name` of the reference table, for Tensors and for DTensors alike.
template <typename T>
T apply_loss(std::string_view name, const T& x, const T& y, Reduction r, const T& w, const T& pw) {
  if (name == "mse_loss") return dt::mse_loss(x, y, r);
  if (name == "l1_loss") return dt::l1_loss(x, y, r);
  if (name == "smooth_l1_loss") return dt::smooth_l1_loss(x, y, r, 1.0);
  if (name == "smooth_l1_loss(beta=0)") return dt::smooth_l1_loss(x, y, r, 0.0);
  if (name == "huber_loss") return dt::huber_loss(x, y, r, 1.0);
  if (name == "huber_loss(delta=2.5)") return dt::huber_loss(x, y, r, 2.5);
  if (name == "binary_cross_entropy") return dt::binary_cross_entropy(x, y, r);
  if (name == "binary_cross_entropy(weight)") return dt::binary_cross_entropy(x, y, r, w);
  if (name == "binary_cross_entropy_with_logits") {
    return dt::binary_cross_entropy_with_logits(x, y, r);
  }
  if (name == "binary_cross_entropy_with_logits(weight, pos_weight)") {
    return dt::binary_cross_entropy_with_logits(x, y, r, w, pw);
  }
  if (name == "kl_div") return dt::kl_div(x, y, r);
  if (name == "kl_div(log_target)") return dt::kl_div(x, y, r, true);
  if (name == "nll_loss(weight)") return dt::nll_loss(x, y, r, -100, w);
  if (name.starts_with("cross_entropy")) {
    const double s = name.find("smoothing=0.2") != std::string_view::npos   ? 0.2
                     : name.find("smoothing=0.1") != std::string_view::npos ? 0.1
                                                                            : 0.0;
    return dt::cross_entropy(x, y, r, -100, s, w);
  }
  FAIL("no loss " << name);
  return T();
}

// Equal within a relative 1e-12 (NaN and infinities exactly).
// `relative`: within 1e-12 of each value itself, for values far below 1e-12 (a loss's tail).
void check_values(const Tensor& got, const std::vector<double>& want, bool relative = false) {
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", PyTorch " << want[i]);
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      CHECK((std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i]));
    } else {
      CHECK(std::fabs(g[i] - want[i]) <= 1e-12 * ((relative ? 0 : 1) + std::fabs(want[i])));
    }
  }
}

}  // namespace

TEST_CASE(
    "pointwise losses, the weighted nll_loss and cross_entropy (weights, probabilities) match "
    "PyTorch 2.15: values and gradients") {
  for (const TorchRef& ref : kTorchRefs) {
    INFO(ref.name << ", reduction " << ref.reduction);
    const RefInputs in = ref_inputs(ref.name);
    const bool nll = in.class_indices;
    const Tensor x = dt::from_vector<double>(in.x, in.x_shape);
    const Tensor y = nll ? dt::from_vector<double>(in.y, in.y_shape).to(dt::kInt64)
                         : dt::from_vector<double>(in.y, in.y_shape);
    const Reduction r = reduction_of(ref.reduction);
    // The Tensor function.
    const Tensor value = apply_loss(ref.name, x, y, r, in.weight, in.pos_weight);
    CHECK(value.dtype() == dt::kFloat64);
    // cross_entropy's probability targets have the input's shape, its loss the class dim less.
    dt::Shape none_shape = y.shape();
    if (std::string_view(ref.name).starts_with("cross_entropy(probs")) {
      none_shape.erase(none_shape.begin() + 1);
    }
    CHECK(value.shape() == (r == Reduction::kNone ? none_shape : dt::Shape{}));
    check_values(value, ref.value);
    // The DTensor function on local DTensors, through autograd.
    DTensor dx = dt::local_dtensor(x.clone()), dy = dt::local_dtensor(y.clone());
    dx.requires_grad_();
    if (!nll) dy.requires_grad_();
    const auto local = [](const Tensor& t) {
      return t.defined() ? dt::local_dtensor(t) : DTensor();
    };
    const DTensor loss = apply_loss(ref.name, dx, dy, r, local(in.weight), local(in.pos_weight));
    check_values(loss.to_local(), ref.value);
    if (r == Reduction::kNone) {
      const int64_t n = loss.numel();
      loss.backward(dt::local_dtensor(dt::from_vector<double>(
          std::vector<double>(kUpstream.begin(), kUpstream.begin() + n), loss.shape())));
    } else {
      loss.backward();
    }
    check_values(dx.grad().to_local(), ref.grad_input);
    if (!nll) check_values(dy.grad().to_local(), ref.grad_target);
  }
}

TEST_CASE("pointwise losses: dtypes, empty inputs, 0-d inputs and broadcast weights") {
  using S = std::vector<int64_t>;
  const auto shape = GENERATE(S{7, 3}, S{0, 4}, S{});
  for (DType d : {dt::kFloat32, dt::kFloat64, dt::kBFloat16}) {
    INFO(dt::dtype_name(d) << " shape " << dt::shape_str(shape));
    const Tensor x = rand_tensor(shape, d, 11, -2, 2);
    const Tensor y = rand_tensor(shape, d, 12, -2, 2);
    const Tensor p = rand_tensor(shape, d, 13, 0.05, 0.95);
    const Tensor t = rand_tensor(shape, d, 14, 0, 1);
    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(),
                              pv = p.to_vector<double>(), tv = t.to_vector<double>();
    // mse in double, element by element, then each reduction (a mean over nothing is NaN).
    std::vector<double> sq;
    for (size_t i = 0; i < xv.size(); ++i) sq.push_back((xv[i] - yv[i]) * (xv[i] - yv[i]));
    double total = 0;
    for (double v : sq) total += v;
    const double tol = 2 * rtol_for(d);
    check_close(dt::mse_loss(x, y, Reduction::kNone), shape, sq, tol, tol);
    check_close(dt::mse_loss(x, y, Reduction::kSum), {}, {total}, tol, tol);
    check_close(dt::mse_loss(x, y), {}, {sq.empty() ? kNaN : total / sq.size()}, tol, tol);
    CHECK(dt::mse_loss(x, y).dtype() == d);
    // binary_cross_entropy with a weight broadcast along the last dim.
    if (shape.size() == 2) {
      const Tensor w = rand_tensor({shape[1]}, d, 15, 0.5, 2);
      const std::vector<double> wv = w.to_vector<double>();
      std::vector<double> bce;
      for (size_t i = 0; i < pv.size(); ++i) {
        bce.push_back(-wv[i % shape[1]] *
                      (tv[i] * std::log(pv[i]) + (1 - tv[i]) * std::log(1 - pv[i])));
      }
      check_close(dt::binary_cross_entropy(p, t, Reduction::kNone, w), shape, bce, 4 * tol, tol);
    }
  }
}

TEST_CASE("pointwise loss errors name the op, the argument and what was expected") {
  using Catch::Contains;
  const Tensor x = dt::zeros({2, 3});
  REQUIRE_THROWS_WITH(dt::mse_loss(x, dt::zeros({3})),
                      Contains("[mse_loss] target of shape [3] does not match input of shape "
                               "[2, 3]"));
  REQUIRE_THROWS_WITH(dt::l1_loss(x, dt::zeros({2, 3}, dt::kFloat64)),
                      Contains("[l1_loss] argument target has dtype float64, expected float32"));
  REQUIRE_THROWS_WITH(dt::huber_loss(dt::zeros({2}, dt::kInt64), dt::zeros({2}, dt::kInt64)),
                      Contains("[huber_loss] argument input has dtype int64, expected a floating"));
  REQUIRE_THROWS_WITH(dt::mse_loss(x, x, Reduction::kBatchMean),
                      Contains("[mse_loss] reduction 'batchmean' is only supported by kl_div"));
  REQUIRE_THROWS_WITH(dt::nll_loss(x, dt::zeros({2}, dt::kInt64), Reduction::kBatchMean),
                      Contains("[nll_loss] reduction 'batchmean'"));
  REQUIRE_THROWS_WITH(dt::smooth_l1_loss(x, x, Reduction::kMean, -1.0),
                      Contains("[smooth_l1_loss] beta must be >= 0, got -1"));
  REQUIRE_THROWS_WITH(dt::huber_loss(x, x, Reduction::kMean, 0.0),
                      Contains("[huber_loss] delta must be > 0, got 0"));
  REQUIRE_THROWS_WITH(dt::binary_cross_entropy(dt::full({2}, 1.5), dt::zeros({2})),
                      Contains("[binary_cross_entropy] all elements of input should be between 0 "
                               "and 1"));
  REQUIRE_THROWS_WITH(dt::binary_cross_entropy(dt::full({2}, kNaN), dt::zeros({2})),
                      Contains("between 0 and 1"));
  // The target too (PyTorch 2.15: "all elements of target should be between 0 and 1").
  REQUIRE_THROWS_WITH(dt::binary_cross_entropy(dt::full({2}, 0.5), dt::full({2}, 2.0)),
                      Contains("[binary_cross_entropy] all elements of target should be between "
                               "0 and 1"));
  REQUIRE_THROWS_WITH(dt::binary_cross_entropy(dt::full({2}, 0.5), dt::full({2}, kNaN)),
                      Contains("all elements of target should be between 0 and 1"));
  REQUIRE_THROWS_WITH(dt::binary_cross_entropy(x, x, Reduction::kMean, dt::ones({2})),
                      Contains("[binary_cross_entropy] argument weight of shape [2] does not "
                               "broadcast to the input's shape [2, 3]"));
  REQUIRE_THROWS_WITH(
      dt::binary_cross_entropy_with_logits(x, x, Reduction::kMean, Tensor(),
                                           dt::ones({3}, dt::kFloat64)),
      Contains("[binary_cross_entropy_with_logits] argument pos_weight has dtype float64"));
  REQUIRE_THROWS_WITH(
      dt::nll_loss(x, dt::zeros({2}, dt::kInt64), Reduction::kMean, -100, dt::ones({4})),
      Contains("[nll_loss] weight of shape [4], expected [3]"));
  REQUIRE_THROWS_WITH(dt::kl_div(x, Tensor()),
                      Contains("[kl_div] argument target is an undefined"));
}

// The weighted mean divides by the weights' sum even where it is below 1 (one counted target of
// weight 0.2: the mean is that target's loss), on both forms; with no target counted it is NaN.
TEST_CASE("nll_loss: a weighted mean whose weight sum is below 1, or 0") {
  const Tensor lp = dt::from_vector<double>({-1.2, -0.4, -2.1, -0.3, -1.9, -1.4}, {2, 3});
  const Tensor weight = dt::from_vector<double>({0.2, 1.0, 3.0}, {3});
  const Tensor one = dt::from_vector<int64_t>({-100, 0}, {2});
  const Tensor none = dt::from_vector<int64_t>({-100, -100}, {2});
  check_values(dt::nll_loss(lp, one, Reduction::kMean, -100, weight), {0.3});
  check_values(dt::nll_loss(lp, none, Reduction::kMean, -100, weight), {kNaN});
  const DTensor dlp = dt::local_dtensor(lp), dw = dt::local_dtensor(weight);
  check_values(dt::nll_loss(dlp, dt::local_dtensor(one), Reduction::kMean, -100, dw).to_local(),
               {0.3});
  check_values(dt::nll_loss(dlp, dt::local_dtensor(none), Reduction::kMean, -100, dw).to_local(),
               {kNaN});
}

TEST_CASE("nll_loss gradients at PyTorch 2.15's edge cases: nothing counted, zero weights") {
  // torch.nn.functional.nll_loss(lp, t, weight=[0, 1, 3], reduction=r).sum().backward() in
  // torch 2.15: a mean over nothing counted is NaN with a 0 gradient; a mean whose counted
  // targets all weigh 0 is NaN, and so is the gradient at those targets' entries (-0 * 1 / 0).
  const Tensor lp = dt::from_vector<double>({-1.2, -0.4, -2.1, -0.3, -1.9, -1.4}, {2, 3});
  const Tensor weight = dt::from_vector<double>({0.0, 1.0, 3.0}, {3});
  struct Case {
    std::vector<int64_t> target;
    Reduction reduction;
    std::vector<double> value, grad;
  };
  const Case cases[] = {{{-100, -100}, Reduction::kMean, {kNaN}, {0, 0, 0, 0, 0, 0}},
                        {{0, 0}, Reduction::kMean, {kNaN}, {kNaN, 0, 0, kNaN, 0, 0}},
                        {{-100, 0}, Reduction::kMean, {kNaN}, {0, 0, 0, kNaN, 0, 0}},
                        {{1, 2}, Reduction::kMean, {1.15}, {0, -0.25, 0, 0, 0, -0.75}},
                        {{1, 2}, Reduction::kSum, {4.6}, {0, -1, 0, 0, 0, -3}},
                        {{1, 2}, Reduction::kNone, {0.4, 4.2}, {0, -1, 0, 0, 0, -3}}};
  for (const Case& k : cases) {
    INFO("target " << k.target[0] << ", " << k.target[1] << " reduction "
                   << dt::reduction_name(k.reduction));
    DTensor x = dt::local_dtensor(lp.clone());
    x.requires_grad_();
    const DTensor loss = dt::nll_loss(x, dt::local_dtensor(dt::from_vector<int64_t>(k.target, {2})),
                                      k.reduction, -100, dt::local_dtensor(weight));
    check_values(loss.to_local(), k.value);
    dt::sum(loss).backward();
    check_values(x.grad().to_local(), k.grad);
  }
}

TEST_CASE("bce_with_logits' vectorised rows follow the formula in double on long rows") {
  // 1003 elements (not a multiple of any vector width): logits over [-120, 120] (both tails of
  // log_sigmoid, e^-|x| below the smallest normal float), targets in [0, 1], then +-inf and NaN.
  std::vector<double> xs, ys;
  for (int i = 0; i < 1000; ++i) {
    xs.push_back(-120.0 + 0.24 * i + 0.013 * (i % 7));
    ys.push_back((i % 11) / 10.0);
  }
  const double inf = std::numeric_limits<double>::infinity();
  xs.insert(xs.end(), {inf, -inf, std::numeric_limits<double>::quiet_NaN()});
  ys.insert(ys.end(), {0.25, 0.25, 0.5});
  const auto n = static_cast<int64_t>(xs.size());
  for (DType d : {dt::kFloat32, dt::kFloat64}) {
    INFO(dt::dtype_name(d));
    const Tensor x = dt::from_vector<double>(xs, {n}).to(d);
    const Tensor y = dt::from_vector<double>(ys, {n}).to(d);
    // The formula in double on the inputs as the dtype holds them.
    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
    std::vector<double> value, grad;
    for (int64_t i = 0; i < n; ++i) {
      const double ls = std::min(xv[i], 0.0) - std::log1p(std::exp(-std::fabs(xv[i])));
      value.push_back((1 - yv[i]) * xv[i] - ls);
      grad.push_back(1 / (1 + std::exp(-xv[i])) - yv[i]);
    }
    // Finite ones within a relative 1e-6 (float32) / 1e-14, the infinities and NaN exactly.
    const double tol = d == dt::kFloat32 ? 1e-6 : 1e-14;
    const auto check = [&](const Tensor& got, const std::vector<double>& want) {
      const std::vector<double> g = got.to_vector<double>();
      REQUIRE(g.size() == want.size());
      for (size_t i = 0; i < g.size(); ++i) {
        INFO("element " << i << " x " << xv[i] << ": got " << g[i] << ", expected " << want[i]);
        if (std::isfinite(want[i])) {
          CHECK(std::fabs(g[i] - want[i]) <= tol * std::fabs(want[i]) + tol);
        } else {
          CHECK((std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i]));
        }
      }
    };
    check(dt::binary_cross_entropy_with_logits(x, y, Reduction::kNone), value);
    DTensor lx = dt::local_dtensor(x.clone());
    lx.requires_grad_();
    dt::binary_cross_entropy_with_logits(lx, dt::local_dtensor(y), Reduction::kSum).backward();
    check(lx.grad().to_local(), grad);
  }
}

TEST_CASE("reduction names: PyTorch's strings, parsed back to the same Reduction", "[loss]") {
  const std::pair<Reduction, std::string_view> names[] = {{Reduction::kNone, "none"},
                                                          {Reduction::kMean, "mean"},
                                                          {Reduction::kSum, "sum"},
                                                          {Reduction::kBatchMean, "batchmean"}};
  for (const auto& [r, name] : names) {
    CHECK(dt::reduction_name(r) == name);
    CHECK(dt::detail::parse_reduction(name, "mse_loss") == r);
  }
  CHECK(std::string_view(dt::reduction_name(static_cast<Reduction>(9))) == "?");
  REQUIRE_THROWS_WITH(dt::detail::parse_reduction("avg", "mse_loss"),
                      "[mse_loss] unknown reduction 'avg' (expected 'none', 'mean' or 'sum')");
}

namespace {

// An option of a round-9 reference row, read from its name ("margin=0.5", "swap=True").
double name_option(std::string_view name, std::string_view key, double fallback) {
  const size_t at = name.find(std::string(key) + "=");
  if (at == std::string_view::npos) return fallback;
  const std::string value(name.substr(at + key.size() + 1));
  if (value.starts_with("True")) return 1.0;
  if (value.starts_with("False")) return 0.0;
  return std::stod(value);
}

// The round-9 loss `name` of torch_margin_loss_refs.h, for Tensors and DTensors alike.
template <typename T>
T apply_margin_loss(std::string_view name, const std::vector<T>& a, Reduction r) {
  const auto opt = [name](std::string_view key, double fallback) {
    return name_option(name, key, fallback);
  };
  const T none = a.size() > 2 ? a[2] : T();
  if (name.starts_with("margin_ranking_loss(")) {
    return dt::margin_ranking_loss(a[0], a[1], a[2], r, opt("margin", 0));
  }
  if (name.starts_with("hinge_embedding_loss(")) {
    return dt::hinge_embedding_loss(a[0], a[1], r, opt("margin", 1));
  }
  if (name.starts_with("cosine_embedding_loss(")) {
    return dt::cosine_embedding_loss(a[0], a[1], a[2], r, opt("margin", 0.2));
  }
  if (name.starts_with("soft_margin_loss")) return dt::soft_margin_loss(a[0], a[1], r);
  if (name.starts_with("multilabel_soft_margin_loss")) {
    return dt::multilabel_soft_margin_loss(a[0], a[1], r, none);
  }
  if (name.starts_with("multi_margin_loss(")) {
    return dt::multi_margin_loss(a[0], a[1], r, static_cast<int64_t>(opt("p", 1)), opt("margin", 1),
                                 none);
  }
  if (name.starts_with("multilabel_margin_loss")) return dt::multilabel_margin_loss(a[0], a[1], r);
  if (name.starts_with("triplet_margin_loss(")) {
    return dt::triplet_margin_loss(a[0], a[1], a[2], r, opt("margin", 1), opt("p", 2),
                                   opt("eps", 1e-6), opt("swap", 0) != 0);
  }
  if (name.starts_with("triplet_margin_with_distance_loss(")) {
    return dt::triplet_margin_with_distance_loss(a[0], a[1], a[2], r, {}, 1.5, opt("swap", 0) != 0);
  }
  if (name.starts_with("poisson_nll_loss(")) {
    return dt::poisson_nll_loss(a[0], a[1], r, opt("log_input", 1) != 0, opt("full", 0) != 0,
                                opt("eps", 1e-8));
  }
  if (name.starts_with("gaussian_nll_loss(")) {
    return dt::gaussian_nll_loss(a[0], a[1], a[2], r, opt("full", 0) != 0, opt("eps", 1e-6));
  }
  FAIL("no loss " << name);
  return T();
}

}  // namespace

TEST_CASE(
    "margin, embedding and likelihood losses match PyTorch 2.15: values and gradients of every "
    "input") {
  namespace mr = dt::test::margin_refs;
  for (const mr::Ref& ref : mr::kRefs) {
    INFO(ref.name << ", reduction " << ref.reduction);
    const Reduction r = reduction_of(ref.reduction);
    std::vector<Tensor> args;
    std::vector<DTensor> dargs;
    for (const mr::Arg& a : ref.args) {
      const Tensor t = dt::from_vector<double>(a.data, dt::IntSpan(a.shape.data(), a.shape.size()));
      args.push_back(a.integer ? t.to(dt::kInt64) : t);
      dargs.push_back(dt::local_dtensor(args.back().clone()));
      if (!a.integer) dargs.back().requires_grad_();
    }
    // The Tensor function, then the DTensor one through autograd.
    const bool tail = std::string_view(ref.name).ends_with("(tail)");
    check_values(apply_margin_loss(ref.name, args, r), ref.value, tail);
    const DTensor loss = apply_margin_loss(ref.name, dargs, r);
    check_values(loss.to_local(), ref.value, tail);
    if (r == Reduction::kNone) {
      const int64_t n = loss.numel();
      loss.backward(dt::local_dtensor(dt::from_vector<double>(
          std::vector<double>(kUpstream.begin(), kUpstream.begin() + n), loss.shape())));
    } else {
      loss.backward();
    }
    for (size_t i = 0; i < dargs.size(); ++i) {
      if (ref.grads[i].empty()) continue;
      INFO("gradient of input " << i);
      REQUIRE(dargs[i].grad().defined());
      check_values(dargs[i].grad().to_local(), ref.grads[i], tail);
    }
  }
}

TEST_CASE("margin, embedding and likelihood loss errors name the op and the argument") {
  using Catch::Contains;
  const Tensor x = dt::zeros({2, 3}, dt::kFloat64), t1 = dt::zeros({2}, dt::kFloat64);
  const Tensor cls = dt::from_vector<int64_t>({0, 3}, {2});
  REQUIRE_THROWS_WITH(dt::margin_ranking_loss(x, x, t1),
                      Contains("[margin_ranking_loss] all input tensors should have the same "
                               "number of dims, got input1 [2, 3], input2 [2, 3], target [2]"));
  REQUIRE_THROWS_WITH(dt::soft_margin_loss(x, x, Reduction::kBatchMean),
                      Contains("[soft_margin_loss] reduction 'batchmean' is only supported by "
                               "kl_div"));
  REQUIRE_THROWS_WITH(dt::hinge_embedding_loss(x, x.to(dt::kFloat32)),
                      Contains("[hinge_embedding_loss] target of dtype float32 does not match "
                               "input's float64"));
  REQUIRE_THROWS_WITH(dt::cosine_embedding_loss(x, x, x),
                      Contains("[cosine_embedding_loss] 0D or 1D target tensor expected"));
  REQUIRE_THROWS_WITH(dt::cosine_embedding_loss(t1, t1, t1),
                      Contains("1D target tensor expects 2D input tensors, but found inputs "
                               "with sizes [2] and [2]"));
  REQUIRE_THROWS_WITH(dt::multi_margin_loss(x, cls, Reduction::kMean, 3),
                      Contains("[multi_margin_loss] only p == 1 and p == 2 supported, got p 3"));
  REQUIRE_THROWS_WITH(dt::multi_margin_loss(x, cls),
                      Contains("[multi_margin_loss] target 3 out of range for 3 classes"));
  REQUIRE_THROWS_WITH(dt::multi_margin_loss(x, t1),
                      Contains("[multi_margin_loss] target must be int64 or int32"));
  REQUIRE_THROWS_WITH(
      dt::multi_margin_loss(x, dt::from_vector<int64_t>({0, 1}, {2}), Reduction::kMean, 1, 1.0,
                            dt::ones({2}, dt::kFloat64)),
      Contains("[multi_margin_loss] weight must be one-dimensional of size 3 (the classes), got "
               "[2]"));
  REQUIRE_THROWS_WITH(
      dt::multilabel_margin_loss(x, dt::from_vector<int64_t>({0, -1, 7, 1, 2, -1}, {2, 3})),
      Contains("[multilabel_margin_loss] target 7 out of range for 3 classes"));
  REQUIRE_THROWS_WITH(dt::multilabel_margin_loss(x, cls),
                      Contains("[multilabel_margin_loss] target of shape [2] does not match "
                               "input of shape [2, 3]"));
  REQUIRE_THROWS_WITH(dt::triplet_margin_loss(x, x, t1),
                      Contains("[triplet_margin_loss] the anchor, positive, and negative tensors "
                               "are expected to have the same number of dimensions"));
  REQUIRE_THROWS_WITH(dt::triplet_margin_with_distance_loss(x, x, x, Reduction::kMean, {}, -1.0),
                      Contains("[triplet_margin_with_distance_loss] margin must be greater than "
                               "0, got -1"));
  REQUIRE_THROWS_WITH(dt::gaussian_nll_loss(x, x, dt::ones({3, 2}, dt::kFloat64)),
                      Contains("[gaussian_nll_loss] var is of incorrect size: [3, 2] for input "
                               "[2, 3]"));
  REQUIRE_THROWS_WITH(dt::gaussian_nll_loss(x, x, dt::full({2, 3}, -1.0, dt::kFloat64)),
                      Contains("[gaussian_nll_loss] var has negative entry/entries"));
  // The accepted var shapes (PyTorch's): the input's, less the last dim, one dim of size 1.
  for (const dt::Shape& s : {dt::Shape{2, 3}, dt::Shape{2}, dt::Shape{2, 1}, dt::Shape{1, 3}}) {
    CHECK(dt::gaussian_nll_loss(x, x, dt::ones(s, dt::kFloat64)).shape() == dt::Shape{});
  }
  // Empty batches: the means are NaN (PyTorch's multi_margin_loss / multilabel_margin_loss give
  // an uninitialised value there).
  const Tensor e = dt::zeros({0, 3}, dt::kFloat64);
  CHECK(std::isnan(dt::multi_margin_loss(e, dt::zeros({0}, dt::kInt64)).item<double>()));
  CHECK(dt::multilabel_margin_loss(e, dt::zeros({0, 3}, dt::kInt64), Reduction::kSum)
            .item<double>() == 0.0);
}
