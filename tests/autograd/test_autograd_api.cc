// The autograd API a PyTorch user reaches for, on one process, against PyTorch 2.15's values and
// hook orders (tests/autograd/torch_autograd_api_references.py): autograd::grad and
// register_post_accumulate_grad_hook.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/compile/compile.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::DTensor;

namespace {

DTensor leaf(std::vector<double> v, dt::Shape shape) {
  DTensor x = dt::local_dtensor(dt::from_vector<double>(v, shape));
  x.requires_grad_();
  return x;
}

std::vector<double> range(int64_t n, double div, double sub) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i) / div - sub);
  return v;
}

// The reference script's leaves: x [2, 3], w1 [3, 4], w2 [4, 2], u [2] (never used).
struct Graph {
  DTensor x = leaf(range(6, 10, 0), {2, 3});
  DTensor w1 = leaf(range(12, 7, 0.5), {3, 4});
  DTensor w2 = leaf(range(8, 5, 0.3), {4, 2});
  DTensor u = leaf({1, 1}, {2});
  DTensor h, r, loss;
  // h = x @ w1 (a non-leaf), r = h * h + h (h used twice), loss = sum((r @ w2)^2).
  void forward(bool retain_r = false) {
    h = dt::matmul(x, w1);
    r = h * h + h;
    if (retain_r) r.retain_grad();
    const DTensor y = dt::matmul(r, w2);
    loss = dt::sum(y * y);
  }
};

// Rounded to 6 decimals, as the script prints them.
void check_values(const DTensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.to_local().to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));
}

const std::vector<double> kGw1 = {-0.55115, 0.803723, 2.744766, 5.271979, -0.781575, 1.132011,
                                  3.841082, 7.345637, -1.012,   1.460299, 4.937397,  9.419295};
const std::vector<double> kGh = {-0.467087, 0.603801, 1.813936, 3.163319,
                                 -1.837166, 2.679077, 9.14922,  17.573262};
const std::vector<double> kRGrad = {-0.367371, 0.444906, 1.257184, 2.069461,
                                    -1.312261, 1.537176, 4.386612, 7.236049};
const std::vector<double> kGx = {-0.596752, 2.325517, 5.247786, -3.254011, 12.497071, 28.248153};

}  // namespace

TEST_CASE("autograd.grad: a leaf and a non-leaf as PyTorch, nothing accumulated, path hooks run") {
  Graph g;
  std::vector<std::string> order;
  auto note = [&order](std::string what) {
    return [&order, what](const DTensor&) {
      order.push_back(what);
      return DTensor();
    };
  };
  g.w1.register_hook(note("w1"));
  g.w2.register_hook(note("w2"));  // no path to an input passes w2's accumulator
  g.x.register_hook(note("x"));
  g.w1.register_post_accumulate_grad_hook([&order](const DTensor&) { order.push_back("post"); });
  g.forward(/*retain_r=*/true);
  g.h.register_hook(note("h"));
  const DTensor inputs[] = {g.w1, g.h};
  const DTensor loss[] = {g.loss};
  std::vector<DTensor> grads = dt::autograd::grad(loss, inputs, {}, /*retain_graph=*/true);
  REQUIRE(grads.size() == 2);
  check_values(grads[0], kGw1);
  check_values(grads[1], kGh);
  CHECK(grads[0].spec() == g.w1.spec());
  CHECK(order == std::vector<std::string>{"h", "w1"});
  CHECK_FALSE(g.w1.grad().defined());
  CHECK_FALSE(g.w2.grad().defined());
  CHECK_FALSE(g.x.grad().defined());
  // PyTorch populates a retained grad on the path (its retains_grad hook runs with the node).
  check_values(g.r.grad(), kRGrad);
  const DTensor x_in[] = {g.x};
  check_values(dt::autograd::grad(loss, x_in, {}, true)[0], kGx);
  CHECK_FALSE(dt::autograd::in_grad_call());
}

TEST_CASE("autograd.grad: an input whose node also runs is taken before its hooks, as PyTorch") {
  Graph g;
  g.forward();
  g.h.register_hook([](const DTensor& grad) { return grad * 2.0; });
  const DTensor loss[] = {g.loss};
  const DTensor h_alone[] = {g.h};
  const DTensor h_and_x[] = {g.h, g.x};
  // Alone, h's node does not run: taken after the hook (doubled).
  check_values(dt::autograd::grad(loss, h_alone, {}, true)[0] * 0.5, kGh);
  // With x, h's node runs: h is taken before the hook, x sees the doubled gradient.
  std::vector<DTensor> both = dt::autograd::grad(loss, h_and_x, {}, true);
  check_values(both[0], kGh);
  check_values(both[1] * 0.5, kGx);
}

TEST_CASE("autograd.grad: unused inputs, grad_outputs and the errors") {
  Graph g;
  g.forward();
  const DTensor loss[] = {g.loss};
  const DTensor with_u[] = {g.w1, g.u};
  CHECK_THROWS_WITH(dt::autograd::grad(loss, with_u, {}, true),
                    Contains("[autograd.grad] input 1") && Contains("not have been used"));
  std::vector<DTensor> allowed =
      dt::autograd::grad(loss, with_u, {}, true, false, /*allow_unused=*/true);
  check_values(allowed[0], kGw1);
  CHECK_FALSE(allowed[1].defined());
  std::vector<DTensor> zeros =
      dt::autograd::grad(loss, with_u, {}, true, false, false, /*materialize_grads=*/true);
  check_values(zeros[1], {0, 0});
  CHECK(zeros[1].spec() == g.u.spec());

  const DTensor plain[] = {dt::local_dtensor(dt::from_vector<double>({1, 2}, {2}))};
  CHECK_THROWS_WITH(dt::autograd::grad(loss, plain, {}, true),
                    Contains("[autograd.grad] input 0 does not require grad"));
  const DTensor w1[] = {g.w1};
  CHECK_THROWS_WITH(dt::autograd::grad(loss, w1, {}, true, /*create_graph=*/true),
                    Contains("[autograd.grad] create_graph"));
  // A non-scalar output needs its gradient: d sum(h * v) / d w1 from grad_outputs = v.
  const DTensor h[] = {g.h};
  CHECK_THROWS_WITH(dt::autograd::grad(h, w1, {}, true), Contains("[autograd.grad] a gradient"));
  const DTensor v[] = {leaf(range(8, 3, 1), {2, 4}).detach()};
  const DTensor via_sum[] = {dt::sum(g.h * v[0])};
  check_values(dt::autograd::grad(h, w1, v, true)[0],
               dt::autograd::grad(via_sum, w1, {}, true)[0].to_local().to_vector<double>());
  // Without retain_graph the path's saved tensors go, as backward.
  dt::autograd::grad(loss, w1);
  CHECK_THROWS_WITH(dt::autograd::grad(loss, w1), Contains("a second time"));
}

TEST_CASE("post accumulate grad hooks: after the hooks and the accumulation, not in grad()") {
  Graph g;
  std::vector<std::string> order;
  std::vector<double> seen;
  g.w1.register_post_accumulate_grad_hook([&](const DTensor& p) {
    order.push_back("post");
    CHECK(p.autograd_meta() == g.w1.autograd_meta());
    seen = p.grad().to_local().to_vector<double>();
  });
  g.w1.register_hook([&order](const DTensor& grad) {
    order.push_back("hook");
    return grad * 2.0;
  });
  dt::sum(dt::matmul(dt::matmul(g.x, g.w1), g.w2)).backward();
  // PyTorch: ['hook', ('post', [-0.24, 0.24])].
  CHECK(order == std::vector<std::string>{"hook", "post"});
  REQUIRE(seen.size() == 12);
  CHECK(seen[0] == Approx(-0.24));
  CHECK(seen[1] == Approx(0.24));
  CHECK_THROWS_WITH(dt::matmul(g.x, g.w1).register_post_accumulate_grad_hook([](const DTensor&) {}),
                    Contains("[register_post_accumulate_grad_hook] expected a leaf"));
}

TEST_CASE("autograd.grad inside a captured step is refused with a [compile] error") {
  DTensor w = leaf({1, 2, 3}, {3});
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    const DTensor loss[] = {dt::sum(in[0] * w)};
    const DTensor inputs[] = {w};
    return dt::DTensorList{dt::autograd::grad(loss, inputs)[0]};
  });
  CHECK_THROWS_WITH(step({dt::local_dtensor(dt::from_vector<double>({1, 1, 1}, {3}))}),
                    Contains("[compile] autograd::grad"));
}
