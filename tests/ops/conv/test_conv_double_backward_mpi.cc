// Double backward (create_graph) of the convolutions, pools, upsampling and pad on DTensors
// (mpirun at 1, 2 and 4 ranks): gradient penalties and Hessian-vector products on batch-,
// channel- and height-sharded (halo exchanges, zeros and padding_mode, conv and pools) inputs,
// even and uneven, equal the single-device ones; a third-order derivative matches central
// differences; a Conv2d-ReLU-MaxPool2d-Linear gradient penalty equals PyTorch 2.15's
// (torch_conv_double_backward_references.py) at 1e-12. The single-device double backward of every
// registered form is checked against finite differences by autograd_tests' gradcheck.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/conv/detail/halo.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/ops/conv/torch_conv_double_backward_references.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

DTensor dist(const Tensor& t, const dt::DeviceMesh& mesh, const Placements& p) {
  return dt::distribute_tensor(t, mesh, p, std::nullopt);
}

DTensor leaf(const Tensor& t, const dt::DeviceMesh& mesh, const Placements& p) {
  DTensor d = dist(t, mesh, p);
  d.requires_grad_();
  return d;
}

// Placements of a mesh: Replicate, and `p` on the last mesh dim.
Placements on_last(const dt::DeviceMesh& mesh, const dt::Placement& p) {
  Placements out(static_cast<size_t>(mesh.ndim()), Replicate());
  out.back() = p;
  return out;
}

std::vector<Tensor> full(const std::vector<DTensor>& v) {
  std::vector<Tensor> out;
  for (const DTensor& d : v) out.push_back(d.full_tensor());
  return out;
}

// gx = d sum(out^2) / dx (create_graph) for out = avg_pool2d(pad(interpolate(max_pool2d(
// tanh(conv2d(x, w, b, padding 1))), x2 bilinear), 1, reflect), 3, stride 1), then sum(gx^2)
// backward: gx and the gradients of x, w, b.
std::vector<Tensor> window_penalty(const DTensor& x, const DTensor& w, const DTensor& b) {
  const DTensor h = dt::tanh(dt::conv2d(x, w, b, {1}, {1}));
  const DTensor p = dt::max_pool2d(h, {2}, {2});
  const DTensor u = dt::interpolate(p, {}, {2.0}, "bilinear");
  const DTensor q = dt::pad(u, {1, 1, 1, 1}, "reflect");
  const DTensor out = dt::avg_pool2d(q, {3}, {1});
  const DTensor loss[] = {dt::sum(out * out)}, ins[] = {x};
  const DTensor gx = dt::autograd::grad(loss, ins, {}, std::nullopt, /*create_graph=*/true)[0];
  dt::sum(gx * gx).backward();
  return full({gx, x.grad(), w.grad(), b.grad()});
}

// The Hessian-vector product of sum(tanh(conv(x, w))^2) along (vx, vw), and the gradient.
template <typename Conv>
std::vector<Tensor> hvp(const Conv& conv, const DTensor& x, const DTensor& w, const DTensor& vx,
                        const DTensor& vw) {
  const DTensor y = dt::tanh(conv(x, w));
  const DTensor loss[] = {dt::sum(y * y)}, ins[] = {x, w};
  const std::vector<DTensor> g = dt::autograd::grad(loss, ins, {}, std::nullopt, true);
  const DTensor s[] = {dt::sum(g[0] * vx) + dt::sum(g[1] * vw)};
  const std::vector<DTensor> h = dt::autograd::grad(s, ins);
  return full({g[0], g[1], h[0], h[1]});
}

}  // namespace

TEST_CASE("create_graph: a conv / pool / upsample / pad gradient penalty on sharded inputs") {
  const int64_t n = dt::world_size();
  const Tensor x = st::det_input({2 * n + 1, 3, 3 * n + 1, 5}, 1, -1.0, 0.1371, dt::kFloat64);
  const Tensor w = st::det_input({4, 3, 3, 3}, 2, -0.6, 0.1173, dt::kFloat64);
  const Tensor b = st::det_input({4}, 3, -0.2, 0.0917, dt::kFloat64);
  const dt::DeviceMesh one = dt::init_device_mesh(dt::kCPU, {n});
  const std::vector<Tensor> want = window_penalty(
      leaf(x, one, {Replicate()}), leaf(w, one, {Replicate()}), leaf(b, one, {Replicate()}));
  for (const dt::DeviceMesh& mesh : st::family_meshes()) {
    // data parallel (uneven batch), output channels, input channels (a Partial output), height
    // (the halo exchanges of the convolution and of the max pool, uneven rows).
    for (const auto& [px, pw, pb] :
         std::vector<std::tuple<dt::Placement, dt::Placement, dt::Placement>>{
             {Shard(0), Replicate(), Replicate()},
             {Replicate(), Shard(0), Shard(0)},
             {Shard(1), Shard(1), Replicate()},
             {Shard(2), Replicate(), Replicate()}}) {
      INFO("mesh " << mesh.str() << " x " << px.str() << " w " << pw.str());
      const std::vector<Tensor> got =
          window_penalty(leaf(x, mesh, on_last(mesh, px)), leaf(w, mesh, on_last(mesh, pw)),
                         leaf(b, mesh, on_last(mesh, pb)));
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("value " << i);
        CHECK(st::same_values(got[i], want[i], 1e-12));
      }
    }
  }
}

// The halo exchange with another padding than zeros (nn::ConvNd's padding_mode) and the
// height-sharded avg pool's: its reverse exchange is recorded too, so a penalty through them
// equals pad + conv2d + avg_pool2d on the replicated tensors (uneven rows).
TEST_CASE("create_graph: height-sharded conv with padding_mode and avg pool (halo exchanges)") {
  for (const dt::DeviceMesh& mesh : st::family_meshes()) {
    const int64_t md = mesh.ndim(), wm = mesh.size(md - 1);
    const Tensor x = st::det_input({2, 3, 3 * wm + 1, 5}, 4, -1.0, 0.1371, dt::kFloat64);
    const Tensor w = st::det_input({4, 3, 3, 3}, 5, -0.6, 0.1173, dt::kFloat64);
    const Tensor b = st::det_input({4}, 6, -0.2, 0.0917, dt::kFloat64);
    const int64_t pads[] = {1, 1, 1, 1};
    for (const char* mode : {"reflect", "replicate", "circular"}) {
      INFO("mesh " << mesh.str() << " " << mode);
      const auto run = [&](const dt::Placement& px, bool halo) {
        const DTensor dx = leaf(x, mesh, on_last(mesh, px)),
                      dw = leaf(w, mesh, on_last(mesh, Replicate())),
                      db = leaf(b, mesh, on_last(mesh, Replicate()));
        const DTensor y =
            halo ? dt::detail::halo_padded_convolution(dx, dw, db, pads, mode, {1, 1}, {1, 1}, 1)
                 : dt::conv2d(dt::pad(dx, pads, mode), dw, db);
        REQUIRE(y.defined());
        const DTensor out = dt::avg_pool2d(dt::tanh(y), {3}, {1}, {1});
        const DTensor loss[] = {dt::sum(out * out)}, ins[] = {dx};
        const DTensor gx =
            dt::autograd::grad(loss, ins, {}, std::nullopt, /*create_graph=*/true)[0];
        dt::sum(gx * gx).backward();
        return full({gx, dx.grad(), dw.grad(), db.grad()});
      };
      const std::vector<Tensor> want = run(Replicate(), false), got = run(Shard(2), true);
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("value " << i);
        CHECK(st::same_values(got[i], want[i], 1e-12));
      }
    }
  }
}

TEST_CASE("create_graph: Hessian-vector products of conv_transpose2d and depthwise conv1d") {
  const int64_t n = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {n});
  const auto check = [&](const auto& conv, const Tensor& x, const Tensor& w,
                         const std::vector<std::pair<dt::Placement, dt::Placement>>& layouts) {
    const Tensor vx = st::det_input(x.sizes(), 7, -0.5, 0.093, dt::kFloat64);
    const Tensor vw = st::det_input(w.sizes(), 8, -0.4, 0.087, dt::kFloat64);
    const Placements r = {Replicate()};
    const std::vector<Tensor> want =
        hvp(conv, leaf(x, mesh, r), leaf(w, mesh, r), dist(vx, mesh, r), dist(vw, mesh, r));
    for (const auto& [px, pw] : layouts) {
      INFO("x " << px.str() << " w " << pw.str());
      const std::vector<Tensor> got = hvp(conv, leaf(x, mesh, {px}), leaf(w, mesh, {pw}),
                                          dist(vx, mesh, {px}), dist(vw, mesh, {pw}));
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("value " << i);
        CHECK(st::same_values(got[i], want[i], 1e-12));
      }
    }
  };
  SECTION("conv_transpose2d: batch, input channels (weight S(0)), output channels (S(1))") {
    const Tensor x = st::det_input({2 * n + 1, n + 1, 3, 4}, 1, -1.0, 0.1371, dt::kFloat64);
    const Tensor w = st::det_input({n + 1, 2 * n + 1, 3, 2}, 2, -0.6, 0.1173, dt::kFloat64);
    check(
        [](const DTensor& a, const DTensor& k) {
          return dt::conv_transpose2d(a, k, DTensor(), {2, 1}, {1, 0}, {1, 0});
        },
        x, w, {{Shard(0), Replicate()}, {Shard(1), Shard(0)}, {Replicate(), Shard(1)}});
  }
  SECTION("depthwise conv1d: channels (x S(1), w S(0)) and batch") {
    const Tensor x = st::det_input({3, 2 * n + 1, 7}, 1, -1.0, 0.1371, dt::kFloat64);
    const Tensor w = st::det_input({2 * n + 1, 1, 3}, 2, -0.6, 0.1173, dt::kFloat64);
    check([n](const DTensor& a,
              const DTensor& k) { return dt::conv1d(a, k, DTensor(), {1}, {1}, {1}, 2 * n + 1); },
          x, w, {{Shard(1), Shard(0)}, {Shard(0), Replicate()}});
  }
}

TEST_CASE("create_graph: a Conv2d-ReLU-MaxPool2d-Linear gradient penalty matches PyTorch 2.15") {
  const int64_t n = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {n});
  const Tensor x = st::det_input({5, 2, 4, 4}, 1, -0.7, 0.1371, dt::kFloat64);
  const Tensor w = st::det_input({3, 2, 3, 3}, 2, -0.6, 0.1173, dt::kFloat64);
  const Tensor b = st::det_input({3}, 3, -0.2, 0.0917, dt::kFloat64);
  const Tensor w2 = st::det_input({4, 12}, 4, -0.5, 0.0931, dt::kFloat64);
  const Tensor b2 = st::det_input({4}, 5, -0.1, 0.0713, dt::kFloat64);
  namespace ref = conv_penalty_ref;
  const std::vector<double>* want[] = {&ref::gx,     &ref::x_grad,  &ref::w_grad,
                                       &ref::b_grad, &ref::w2_grad, &ref::b2_grad};
  // Replicated, and data parallel (5 samples: uneven over 2 and 4 ranks).
  for (const dt::Placement& px : {Replicate(), Shard(0)}) {
    INFO("x " << px.str());
    const Placements r = {Replicate()};
    const DTensor dx = leaf(x, mesh, {px}), dw = leaf(w, mesh, r), db = leaf(b, mesh, r),
                  dw2 = leaf(w2, mesh, r), db2 = leaf(b2, mesh, r);
    const DTensor h = dt::max_pool2d(dt::relu(dt::conv2d(dx, dw, db, {1}, {1})), {2});
    const DTensor out = dt::linear(dt::flatten(h, 1), dw2, db2);
    const DTensor loss[] = {dt::sum(out * out)}, ins[] = {dx};
    const DTensor gx = dt::autograd::grad(loss, ins, {}, std::nullopt, /*create_graph=*/true)[0];
    dt::sum(gx * gx).backward();
    const std::vector<Tensor> got =
        full({gx, dx.grad(), dw.grad(), db.grad(), dw2.grad(), db2.grad()});
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("value " << i);
      const Tensor expect = dt::from_vector<double>(*want[i], got[i].sizes());
      CHECK(st::same_values(got[i], expect, 1e-12));
    }
  }
}

// Third order: s2(x) = <d/dx <d sum(out^2) / dx, v>, u> through conv2d (stride, dilation), a
// max pool, bicubic upsampling and circular padding, its gradient along d against central
// differences of s2 (the gradient ops' backwards are differentiable again: convolution_backward's
// through convolution / convolution_backward, max_pool_backward's gather through
// gather_backward, the window ops' through their gradient ops). x batch-sharded, uneven.
TEST_CASE("create_graph: third-order derivatives through conv, pools, upsampling and pad") {
  const int64_t n = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {n});
  const Tensor x0 = st::det_input({2 * n + 1, 2, 7, 6}, 1, -1.0, 0.1371, dt::kFloat64);
  const Tensor w0 = st::det_input({3, 2, 3, 2}, 2, -0.6, 0.1173, dt::kFloat64);
  const Tensor v = st::det_input({2 * n + 1, 2, 7, 6}, 3, -0.5, 0.093, dt::kFloat64);
  const Tensor u = st::det_input({2 * n + 1, 2, 7, 6}, 4, -0.4, 0.087, dt::kFloat64);
  const Tensor d = st::det_input({2 * n + 1, 2, 7, 6}, 5, -0.3, 0.079, dt::kFloat64);
  const Placements px = {Shard(0)}, r = {Replicate()};
  // s2 at x (and, when third, its gradient along d).
  const auto s2 = [&](const Tensor& x, bool third, double* along_d) {
    const DTensor dx = leaf(x, mesh, px), dw = leaf(w0, mesh, r);
    const DTensor h = dt::tanh(dt::conv2d(dx, dw, DTensor(), {2, 1}, {1, 1}, {1, 2}));
    const DTensor p = dt::max_pool2d(h, {2}, {1});
    const DTensor q = dt::pad(dt::interpolate(p, {5, 4}, {}, "bicubic"), {1, 1, 1, 1}, "circular");
    const DTensor loss[] = {dt::sum(q * q)}, ins[] = {dx};
    const DTensor g1 = dt::autograd::grad(loss, ins, {}, std::nullopt, true)[0];
    const DTensor s1[] = {dt::sum(g1 * dist(v, mesh, px))};
    const DTensor g2 = dt::autograd::grad(s1, ins, {}, std::nullopt, true)[0];
    const DTensor s[] = {dt::sum(g2 * dist(u, mesh, px))};
    if (third) {
      const DTensor g3 = dt::autograd::grad(s, ins)[0];
      *along_d = dt::sum(g3 * dist(d, mesh, px)).full_tensor().item<double>();
    }
    return s[0].full_tensor().item<double>();
  };
  double analytic = 0;
  s2(x0, true, &analytic);
  const double eps = 1e-4;
  const double numeric = (s2(dt::add(x0, dt::mul(d, dt::Scalar(eps))), false, nullptr) -
                          s2(dt::add(x0, dt::mul(d, dt::Scalar(-eps))), false, nullptr)) /
                         (2 * eps);
  INFO("analytic " << analytic << ", numeric " << numeric);
  CHECK(std::abs(analytic) > 1e-3);
  CHECK(std::abs(analytic - numeric) <= 1e-6 * (1 + std::abs(numeric)));
}
