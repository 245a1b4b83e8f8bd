// conv1d/2d/3d and conv_transpose1d/2d/3d on local tensors and local DTensors: values and
// gradients match PyTorch 2.15 (torch_conv_references.h), the CPU kernels agree with a direct
// loop on many geometries (strides, padding, dilation, groups, 1x1), 16-bit dtypes run in float,
// unbatched inputs, and bad arguments raise PyTorch's errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/conv/detail/halo.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/local_op_test_util.h"
#include "tests/ops/conv/torch_conv_references.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Shape;
using dt::Tensor;

namespace {

// torch_conv_references.py's det(shape, seed).
Tensor det(const Shape& shape, int64_t seed) {
  std::vector<double> v(static_cast<size_t>(dt::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = (static_cast<double>((static_cast<int64_t>(i) * 7 + seed * 3) % 11) - 5) * 0.25;
  }
  return dt::from_vector<double>(v, shape);
}

struct Case {
  Shape x, w;
  Shape stride, padding, dilation, output_padding;
  int64_t groups;
  bool transposed;
  bool same;  // padding="same"
};

Case case_of(const std::string& name) {
  if (name == "conv2d")
    return {{2, 4, 5, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, {0}, 2, false, false};
  if (name == "conv1d_same") return {{2, 3, 7}, {4, 3, 4}, {1}, {0}, {1}, {0}, 1, false, true};
  if (name == "conv3d")
    return {{1, 2, 3, 4, 3}, {3, 2, 2, 3, 2}, {1}, {1, 0, 1}, {1}, {0}, 1, false, false};
  if (name == "conv_transpose2d")
    return {{2, 4, 3, 3}, {4, 3, 2, 3}, {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2, true, false};
  if (name == "conv_transpose1d") return {{1, 3, 4}, {3, 2, 3}, {3}, {1}, {1}, {2}, 1, true, false};
  return {{1, 2, 2, 2, 2}, {2, 2, 2, 2, 2}, {2}, {0}, {1}, {0}, 1, true, false};
}

// got and want (any floating dtypes) have one shape and agree to tol relative to max |want|.
bool close(const Tensor& got, const Tensor& want, double tol = 1e-10) {
  if (got.sizes() != want.sizes()) return false;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 1;
  for (double v : w) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::fabs(g[i] - w[i]) <= tol * scale)) return false;
  }
  return true;
}

Shape expand(const Shape& v, int64_t nd) {
  return v.size() == 1 ? Shape(static_cast<size_t>(nd), v[0]) : v;
}

template <typename TT>
TT call(const Case& c, const TT& x, const TT& w, const TT& b) {
  const int64_t nd = static_cast<int64_t>(c.x.size()) - 2;
  if (c.same) return dt::conv1d(x, w, b, {1}, "same");
  if (!c.transposed) {
    if (nd == 1) return dt::conv1d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    if (nd == 2) return dt::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    return dt::conv3d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  }
  if (nd == 1)
    return dt::conv_transpose1d(x, w, b, c.stride, c.padding, c.output_padding, c.groups,
                                c.dilation);
  if (nd == 2)
    return dt::conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups,
                                c.dilation);
  return dt::conv_transpose3d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
}

// A direct loop reference of convolution (batched, float64) for the kernel checks.
Tensor direct_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& s,
                   const Shape& p, const Shape& d, bool transposed, const Shape& op, int64_t g) {
  // Embed into 3-d.
  const int64_t nd = x.dim() - 2, lead = 3 - nd;
  Shape xs = {x.size(0), x.size(1), 1, 1, 1}, ws = {w.size(0), w.size(1), 1, 1, 1};
  int64_t S[3] = {1, 1, 1}, P[3] = {0, 0, 0}, D[3] = {1, 1, 1}, OP[3] = {0, 0, 0};
  for (int64_t i = 0; i < nd; ++i) {
    xs[2 + lead + i] = x.size(2 + i);
    ws[2 + lead + i] = w.size(2 + i);
    S[lead + i] = s[i];
    P[lead + i] = p[i];
    D[lead + i] = d[i];
    OP[lead + i] = op[i];
  }
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const int64_t cin = xs[1];
  const int64_t cout = transposed ? ws[1] * g : ws[0];
  int64_t o[3];
  for (int i = 0; i < 3; ++i) {
    o[i] = transposed ? (xs[2 + i] - 1) * S[i] - 2 * P[i] + D[i] * (ws[2 + i] - 1) + OP[i] + 1
                      : (xs[2 + i] + 2 * P[i] - D[i] * (ws[2 + i] - 1) - 1) / S[i] + 1;
  }
  std::vector<double> y(static_cast<size_t>(xs[0] * cout * o[0] * o[1] * o[2]), 0.0);
  const auto yat = [&](int64_t n, int64_t c, int64_t z, int64_t yy, int64_t xx) -> double& {
    return y[static_cast<size_t>((((n * cout + c) * o[0] + z) * o[1] + yy) * o[2] + xx)];
  };
  const int64_t cig = cin / g, cog = cout / g;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t iz = 0; iz < xs[2]; ++iz)
        for (int64_t iy = 0; iy < xs[3]; ++iy)
          for (int64_t ix = 0; ix < xs[4]; ++ix)
            for (int64_t a = 0; a < ws[2]; ++a)
              for (int64_t bb = 0; bb < ws[3]; ++bb)
                for (int64_t e = 0; e < ws[4]; ++e) {
                  const double xval = xv[static_cast<size_t>(
                      (((n * cin + ci) * xs[2] + iz) * xs[3] + iy) * xs[4] + ix)];
                  const int64_t grp = ci / cig;
                  for (int64_t q = 0; q < cog; ++q) {
                    const int64_t co = grp * cog + q;
                    int64_t oz, oy, ox;
                    double wval;
                    if (transposed) {
                      oz = iz * S[0] - P[0] + a * D[0];
                      oy = iy * S[1] - P[1] + bb * D[1];
                      ox = ix * S[2] - P[2] + e * D[2];
                      wval = wv[static_cast<size_t>(
                          (((ci * cog + q) * ws[2] + a) * ws[3] + bb) * ws[4] + e)];
                    } else {
                      const int64_t tz = iz + P[0] - a * D[0], ty = iy + P[1] - bb * D[1],
                                    tx = ix + P[2] - e * D[2];
                      if (tz % S[0] || ty % S[1] || tx % S[2] || tz < 0 || ty < 0 || tx < 0)
                        continue;
                      oz = tz / S[0];
                      oy = ty / S[1];
                      ox = tx / S[2];
                      wval = wv[static_cast<size_t>(
                          (((co * cig + ci % cig) * ws[2] + a) * ws[3] + bb) * ws[4] + e)];
                    }
                    if (oz < 0 || oy < 0 || ox < 0 || oz >= o[0] || oy >= o[1] || ox >= o[2])
                      continue;
                    yat(n, co, oz, oy, ox) += xval * wval;
                  }
                }
  if (b.defined()) {
    const std::vector<double> bv = b.to_vector<double>();
    for (int64_t n = 0; n < xs[0]; ++n)
      for (int64_t c = 0; c < cout; ++c)
        for (int64_t i = 0; i < o[0] * o[1] * o[2]; ++i)
          y[static_cast<size_t>((n * cout + c) * o[0] * o[1] * o[2] + i)] += bv[c];
  }
  Shape ys = {xs[0], cout};
  for (int64_t i = 0; i < nd; ++i) ys.push_back(o[lead + i]);
  return dt::from_vector<double>(y, ys);
}

}  // namespace

TEST_CASE("convolutions match PyTorch 2.15: values and gradients (Tensor and DTensor)") {
  for (const ConvRef& ref : conv_refs()) {
    INFO(ref.name);
    const Case c = case_of(ref.name);
    const int64_t cout = c.transposed ? c.w[1] * c.groups : c.w[0];
    const Tensor x = det(c.x, 1), w = det(c.w, 2), b = det({cout}, 3);
    const Shape ys(ref.out_shape.begin(), ref.out_shape.end());
    const Tensor y = call(c, x, w, b);
    dt::test::check_close(y, ys, ref.out, 1e-12, 1e-12);
    const Tensor u = det(ys, 9);
    if (!c.same) {  // the local gradient op (conv1d "same" runs as a narrowed convolution)
      const int64_t nd = static_cast<int64_t>(c.x.size()) - 2;
      const dt::ConvGrads g = dt::convolution_backward(
          u, x, w, expand(c.stride, nd), expand(c.padding, nd), expand(c.dilation, nd),
          c.transposed, expand(c.output_padding, nd), c.groups);
      dt::test::check_close(g.grad_input, c.x, ref.grad_x, 1e-12, 1e-12);
      dt::test::check_close(g.grad_weight, c.w, ref.grad_w, 1e-12, 1e-12);
      dt::test::check_close(g.grad_bias, {cout}, ref.grad_b, 1e-12, 1e-12);
    }
    // The DTensor functions on local DTensors, through autograd.
    DTensor dx = dt::local_dtensor(x.clone()), dw = dt::local_dtensor(w.clone()),
            db = dt::local_dtensor(b.clone());
    dx.requires_grad_();
    dw.requires_grad_();
    db.requires_grad_();
    const DTensor dy = call(c, dx, dw, db);
    dt::test::check_close(dy.to_local(), ys, ref.out, 1e-12, 1e-12);
    dt::sum(dt::mul(dy, dt::local_dtensor(u))).backward();
    dt::test::check_close(dx.grad().to_local(), c.x, ref.grad_x, 1e-12, 1e-12);
    dt::test::check_close(dw.grad().to_local(), c.w, ref.grad_w, 1e-12, 1e-12);
    dt::test::check_close(db.grad().to_local(), {cout}, ref.grad_b, 1e-12, 1e-12);
  }
}

TEST_CASE("convolution kernels equal a direct loop on many geometries") {
  struct G {
    Shape x, w, s, p, d, op;
    int64_t groups;
    bool transposed;
  };
  const std::vector<G> geos = {
      {{2, 3, 6, 5}, {4, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, {0, 0}, 1, false},  // 1x1: no im2col
      {{2, 3, 6, 5}, {4, 3, 1, 1}, {2, 1}, {0, 1}, {1, 1}, {0, 0}, 1, false},
      {{1, 4, 9}, {4, 1, 3}, {2}, {2}, {3}, {0}, 4, false},  // depthwise
      {{3, 2, 7, 6}, {6, 1, 3, 3}, {3, 2}, {2, 1}, {1, 2}, {0, 0}, 2, false},
      {{2, 2, 3, 4, 5}, {2, 2, 3, 1, 2}, {1, 2, 1}, {1, 0, 2}, {1, 1, 2}, {0, 0, 0}, 1, false},
      {{2, 4, 5}, {4, 3, 3}, {2}, {1}, {1}, {1}, 2, true},
      {{2, 3, 4, 3}, {3, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, {0, 0}, 1, true},  // 1x1 transposed
      {{1, 2, 3, 2, 4}, {2, 3, 2, 2, 3}, {2, 1, 3}, {1, 0, 1}, {1, 2, 1}, {1, 0, 2}, 1, true},
  };
  int64_t seed = 10;
  for (const G& g : geos) {
    INFO("x " << dt::shape_str(g.x) << " w " << dt::shape_str(g.w) << " transposed "
              << g.transposed);
    const Tensor x = dt::test::rand_tensor(g.x, dt::kFloat64, seed++);
    const Tensor w = dt::test::rand_tensor(g.w, dt::kFloat64, seed++);
    const int64_t cout = g.transposed ? g.w[1] * g.groups : g.w[0];
    const Tensor b = dt::test::rand_tensor({cout}, dt::kFloat64, seed++);
    const Tensor want = direct_conv(x, w, b, g.s, g.p, g.d, g.transposed, g.op, g.groups);
    const Tensor got = dt::convolution(x, w, b, g.s, g.p, g.d, g.transposed, g.op, g.groups);
    CHECK(close(got, want));
    // float32 and bfloat16 (computed in float32, rounded once).
    for (dt::DType d : {dt::kFloat32, dt::kBFloat16}) {
      const Tensor g32 =
          dt::convolution(x.to(d), w.to(d), b.to(d), g.s, g.p, g.d, g.transposed, g.op, g.groups);
      CHECK(g32.dtype() == d);
      const double tol = d == dt::kFloat32 ? 1e-5 : 3e-2;
      CHECK(close(g32.to(dt::kFloat64), want, tol));
    }
    // Gradients: grad_input and grad_weight against the direct loop's adjoints through a dot
    // product identity: <u, conv(x, w)> is linear in x and in w, so
    // <grad_input, x> = <u, conv(x, w) - conv(0, w)> = <u, conv(x, w, no bias)>, same for w.
    const Tensor y0 = direct_conv(x, w, Tensor(), g.s, g.p, g.d, g.transposed, g.op, g.groups);
    const Tensor u = dt::test::rand_tensor(y0.sizes(), dt::kFloat64, seed++);
    const dt::ConvGrads gr =
        dt::convolution_backward(u, x, w, g.s, g.p, g.d, g.transposed, g.op, g.groups);
    const double uy = dt::sum(dt::mul(u, y0)).item<double>();
    CHECK(dt::sum(dt::mul(gr.grad_input, x)).item<double>() == Approx(uy).epsilon(1e-10));
    CHECK(dt::sum(dt::mul(gr.grad_weight, w)).item<double>() == Approx(uy).epsilon(1e-10));
    // And elementwise: a unit change of one input element changes <u, y> by its gradient.
    for (int64_t j : {int64_t{0}, x.numel() / 2, x.numel() - 1}) {
      Tensor xj = x.clone();
      xj.view({-1}).narrow(0, j, 1).fill_(x.view({-1}).narrow(0, j, 1).item<double>() + 1.0);
      const Tensor y1 = direct_conv(xj, w, Tensor(), g.s, g.p, g.d, g.transposed, g.op, g.groups);
      const double du = dt::sum(dt::mul(u, y1)).item<double>() - uy;
      CHECK(gr.grad_input.view({-1}).narrow(0, j, 1).item<double>() == Approx(du).margin(1e-9));
    }
  }
}

TEST_CASE("convolutions: unbatched input, padding strings, empty batch, errors") {
  const Tensor x = det({3, 7, 6}, 1), w = det({2, 3, 3, 3}, 2), b = det({2}, 3);
  const Tensor yb = dt::conv2d(x.unsqueeze(0), w, b, {1}, {1});
  const Tensor yu = dt::conv2d(x, w, b, {1}, {1});
  CHECK(yu.sizes() == Shape{2, 7, 6});
  CHECK(close(yu, yb.squeeze(0)));
  CHECK(close(dt::conv2d(x, w, b, {1}, "same"), yu));
  CHECK(dt::conv2d(x, w, b, {1}, "valid").sizes() == Shape{2, 5, 4});
  CHECK(dt::conv2d(dt::zeros({0, 3, 7, 6}, dt::TensorOptions(dt::kFloat64)), w).sizes() ==
        Shape{0, 2, 5, 4});
  CHECK_THROWS_WITH(dt::conv2d(x, w, b, {2}, "same"),
                    Catch::Contains("padding='same' is not supported for strided"));
  CHECK_THROWS_WITH(dt::conv2d(x, w, b, {1}, "full"), Catch::Contains("invalid padding string"));
  CHECK_THROWS_WITH(dt::conv2d(x, det({2, 2, 3, 3}, 2)), Catch::Contains("input channels"));
  CHECK_THROWS_WITH(dt::conv2d(x, w, Tensor(), {1}, {0}, {1}, 0),
                    Catch::Contains("non-positive groups"));
  CHECK_THROWS_WITH(dt::conv2d(x, w, Tensor(), {1, 1, 1}), Catch::Contains("expected 1 or 2"));
  CHECK_THROWS_WITH(dt::conv2d(det({1, 3, 2, 2}, 1), w), Catch::Contains("smaller than"));
  CHECK_THROWS_WITH(dt::conv_transpose2d(x, det({3, 2, 3, 3}, 2), Tensor(), {1}, {0}, {1}),
                    Catch::Contains("output padding must be smaller"));
  CHECK_THROWS_WITH(dt::conv2d(x, w.to(dt::kFloat32)), Catch::Contains("dtype"));
  CHECK_THROWS_WITH(dt::conv1d(x, w), Catch::Contains("as many dims"));
  CHECK_THROWS_WITH(dt::conv1d(det({1, 3, 7, 2}, 1), det({2, 3, 3}, 2)),
                    Catch::Contains("expected a 2D (unbatched) or 3D"));
  // The DTensor forms take unbatched inputs too, as PyTorch (they raised "expected a batched 4D
  // input DTensor"): values and the input's gradient are the batch of one's.
  const auto grad_of = [](const Tensor& in, const auto& f) {
    DTensor d = dt::local_dtensor(in.clone());
    d.requires_grad_();
    const DTensor y = f(d);
    dt::sum(dt::mul(y, y)).backward();
    return std::pair{y.to_local(), d.grad().to_local()};
  };
  const DTensor dw = dt::local_dtensor(w), db = dt::local_dtensor(b);
  const auto [u, gu] =
      grad_of(x, [&](const DTensor& d) { return dt::conv2d(d, dw, db, {1}, {1}); });
  const auto [v, gv] =
      grad_of(x.unsqueeze(0), [&](const DTensor& d) { return dt::conv2d(d, dw, db, {1}, {1}); });
  CHECK(u.sizes() == Shape{2, 7, 6});
  CHECK(close(u, v.squeeze(0)));
  CHECK(close(gu, gv.squeeze(0)));
  CHECK(
      close(dt::conv2d(dt::local_dtensor(x), dw, db, {1}, dt::ConvPadding::kSame).to_local(), yu));
  const Tensor wt = det({3, 2, 3, 3}, 2);
  CHECK(close(
      dt::conv_transpose2d(dt::local_dtensor(x), dt::local_dtensor(wt), DTensor(), {2}).to_local(),
      dt::conv_transpose2d(x.unsqueeze(0), wt, Tensor(), {2}).squeeze(0)));
  CHECK_THROWS_WITH(
      dt::conv1d(dt::local_dtensor(det({1, 3, 7, 2}, 1)), dt::local_dtensor(det({2, 3, 3}, 2))),
      Catch::Contains("expected a 3D (batched) or 2D (unbatched) input DTensor"));
}

namespace {

// One exchange's messages (src -> dst, at most one per ordered pair, as the halo sends) posted
// by every rank in `order(rank, send_peers, recv_peers)`'s order, run on a model of a backend
// whose sends and receives complete in issue order and only in pairs (NCCL's ungrouped p2p on
// one stream): a send at the head of its rank's queue completes with the matching receive at
// the head of the peer's. Returns whether every message completed (false: a hang).
template <typename Order>
bool completes_in_issue_order(int64_t world, const std::vector<std::pair<int64_t, int64_t>>& msgs,
                              const Order& order) {
  struct Op {
    bool send;
    int64_t peer;
  };
  std::vector<std::deque<Op>> queue(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    std::vector<int64_t> to, from;
    for (const auto& [src, dst] : msgs) {
      if (src == r) to.push_back(dst);
      if (dst == r) from.push_back(src);
    }
    for (const dt::detail::PostStep& s : order(r, to, from)) {
      queue[r].push_back({s.send, s.send ? to[s.index] : from[s.index]});
    }
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t a = 0; a < world; ++a) {
      if (queue[a].empty() || !queue[a].front().send) continue;
      const int64_t b = queue[a].front().peer;
      if (queue[b].empty() || queue[b].front().send || queue[b].front().peer != a) continue;
      queue[a].pop_front();
      queue[b].pop_front();
      progress = true;
    }
  }
  return std::all_of(queue.begin(), queue.end(), [](const auto& q) { return q.empty(); });
}

}  // namespace

// The halo's sends and receives are posted in an order that an in-order backend (NCCL's
// ungrouped send / recv on one stream) completes: neighbours both ways along a chain, ranks
// further along (shards thinner than the halo), one-way edges, and random pair sets. Posting
// every receive first, as the exchange once did, hangs such a backend on two neighbours.
TEST_CASE("halo exchange: the send / recv posting order completes on an in-order backend") {
  using Msgs = std::vector<std::pair<int64_t, int64_t>>;
  const auto receives_first = [](int64_t, const std::vector<int64_t>& to,
                                 const std::vector<int64_t>& from) {
    std::vector<dt::detail::PostStep> o;
    for (size_t i = 0; i < from.size(); ++i) o.push_back({false, i});
    for (size_t i = 0; i < to.size(); ++i) o.push_back({true, i});
    return o;
  };
  std::vector<std::pair<int64_t, Msgs>> cases;
  for (int64_t w : {2, 3, 4, 8}) {
    Msgs chain, reach2, forward_only;
    for (int64_t r = 0; r + 1 < w; ++r) {
      chain.push_back({r, r + 1});
      chain.push_back({r + 1, r});
      forward_only.push_back({r, r + 1});
    }
    for (int64_t r = 0; r < w; ++r) {
      for (int64_t d : {1, 2}) {
        if (r + d < w) reach2.push_back({r, r + d}), reach2.push_back({r + d, r});
      }
    }
    cases.push_back({w, chain});
    cases.push_back({w, reach2});
    cases.push_back({w, forward_only});
  }
  uint64_t seed = 12345;
  const auto next = [&seed] {
    return (seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 33;
  };
  for (int t = 0; t < 200; ++t) {
    const int64_t w = 2 + static_cast<int64_t>(next() % 7);
    Msgs msgs;
    for (int64_t a = 0; a < w; ++a) {
      for (int64_t b = 0; b < w; ++b) {
        if (a != b && next() % 3 == 0) msgs.push_back({a, b});
      }
    }
    cases.push_back({w, msgs});
  }
  for (const auto& [w, msgs] : cases) {
    INFO(w << " ranks, " << msgs.size() << " messages");
    CHECK(completes_in_issue_order(w, msgs, dt::detail::p2p_post_order));
  }
  // The model is not vacuous: receiving first hangs two neighbours exchanging both ways.
  CHECK_FALSE(completes_in_issue_order(2, Msgs{{0, 1}, {1, 0}}, receives_first));
}
