#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"

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
};

const std::vector<double> kUpstream = {0.5, -1.0, 2.0, 1.0, -0.5, 1.5};

// The inputs of torch_loss_references.py ([2, 3] unless noted).
struct RefInputs {
  std::vector<double> x, y;
  Tensor weight, pos_weight;
  dt::Shape x_shape = {2, 3};
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
  if (name.starts_with("nll_loss")) {
    return {{-1.2, -0.4, -2.1, -0.3, -1.9, -1.4, -2.2, -0.2, -1.0, -0.7, -1.1, -1.6},
            {0, 2, -100, 1},
            dt::from_vector<double>({0.2, 1.0, 3.0}, {3}),
            Tensor(),
            {4, 3}};
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
  FAIL("no loss " << name);
  return T();
}

// Equal within a relative 1e-12 (NaN and infinities exactly).
void check_values(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", PyTorch " << want[i]);
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      CHECK((std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i]));
    } else {
      CHECK(std::fabs(g[i] - want[i]) <= 1e-12 * (1 + std::fabs(want[i])));
    }
  }
}

}  // namespace

TEST_CASE("pointwise losses and the weighted nll_loss match PyTorch 2.15: values and gradients") {
  for (const TorchRef& ref : kTorchRefs) {
    INFO(ref.name << ", reduction " << ref.reduction);
    const RefInputs in = ref_inputs(ref.name);
    const bool nll = std::string_view(ref.name).starts_with("nll_loss");
    const Tensor x = dt::from_vector<double>(in.x, in.x_shape);
    const Tensor y = nll ? dt::from_vector<double>(in.y, {4}).to(dt::kInt64)
                         : dt::from_vector<double>(in.y, in.x_shape);
    const Reduction r = reduction_of(ref.reduction);
    // The Tensor function.
    const Tensor value = apply_loss(ref.name, x, y, r, in.weight, in.pos_weight);
    CHECK(value.dtype() == dt::kFloat64);
    CHECK(value.shape() == (r == Reduction::kNone ? y.shape() : dt::Shape{}));
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
