#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/loss/loss.h"
#include "tensor/creation.h"
#include "tests/ops/matmul/ops_test_util.h"

namespace dt = dtensor;
using dt::DType;
using dt::Reduction;
using dt::Tensor;
using dt::test::check_close;
using dt::test::rand_tensor;
using dt::test::rtol_for;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reference cross entropy in double for input [outer, C, inner] (given as x with its layout) and
// target [outer, inner]. from_logits = false treats x as log-probabilities (nll_loss).
std::vector<double> ref_losses(const Tensor& x, const Tensor& target, int64_t ignore,
                               double smoothing, bool from_logits, int64_t* count) {
  const int64_t cd = x.dim() == 1 ? 0 : 1;
  const int64_t C = x.size(cd);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < cd; ++d) outer *= x.size(d);
  for (int64_t d = cd + 1; d < x.dim(); ++d) inner *= x.size(d);
  const auto v = x.contiguous().to_vector<double>();
  const auto t = target.to_vector<int64_t>();
  std::vector<double> out(t.size(), 0.0);
  *count = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t ti = t[o * inner + j];
      if (ti == ignore) continue;
      std::vector<double> lp(C);
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, v[(o * C + c) * inner + j]);
      for (int64_t c = 0; c < C; ++c) sum += std::exp(v[(o * C + c) * inner + j] - mx);
      for (int64_t c = 0; c < C; ++c) {
        const double xv = v[(o * C + c) * inner + j];
        lp[c] = from_logits ? xv - mx - std::log(sum) : xv;
      }
      double smooth = 0;
      for (double l : lp) smooth -= l;
      out[o * inner + j] = (1 - smoothing) * -lp[ti] + smoothing / C * smooth;
      ++*count;
    }
  }
  return out;
}

std::vector<double> reduce(const std::vector<double>& l, int64_t count, Reduction r) {
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
        int64_t count = 0;
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
  int64_t count = 0;
  const auto l = ref_losses(x, t, 7, 0.0, true, &count);
  REQUIRE(count == 3);
  check_close(dt::cross_entropy(x, t, Reduction::kMean, 7), {}, reduce(l, count, Reduction::kMean),
              1e-12);
  // Every element ignored: mean is NaN (0 / 0), sum is 0.
  const Tensor all_ignored = dt::full({4}, -100, dt::kInt64);
  check_close(dt::cross_entropy(x, all_ignored), {}, {kNaN}, 0.0);
  check_close(dt::cross_entropy(x, all_ignored, Reduction::kSum), {}, {0.0}, 0.0);
}

TEST_CASE("nll_loss matches a reference") {
  const Tensor lp = rand_tensor({6, 3}, dt::kFloat32, 4, -5, 0);
  const Tensor t = dt::from_vector<int64_t>({0, 2, 1, -100, 2, 0}, {6});
  int64_t count = 0;
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
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({3})),
                      Contains("[cross_entropy] expected an int64 (or int32) target, got float32"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(x, dt::zeros({3}, dt::kInt64), Reduction::kMean, -100, 1.5),
                      Contains("[cross_entropy] label_smoothing must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(dt::nll_loss(dt::zeros({3, 5}, dt::kInt64), dt::zeros({3}, dt::kInt64)),
                      Contains("[nll_loss] expected a floating input, got int64"));
  REQUIRE_THROWS_WITH(
      dt::reduce_loss(dt::zeros({2}), dt::zeros({3}, dt::kInt64), Reduction::kSum),
      Contains("[reduce_loss] losses of shape [2] do not match target of shape [3]"));
  REQUIRE_THROWS_AS(dt::gather_target_log_probs(dt::zeros({}), dt::zeros({}, dt::kInt64), 0),
                    dt::Error);
}
