// The autograd API a PyTorch user reaches for, on one process, against PyTorch 2.15's values and
// hook orders (tests/autograd/torch_autograd_api_references.py): autograd::grad,
// register_post_accumulate_grad_hook and the module backward hooks.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dtensor/autograd/create_graph.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/compile/compile.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/tensor/creation.h"
#include "tests/autograd/create_graph_references.inc"
#include "tests/autograd/leaf.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::DTensor;
using dt::test::leaf;

namespace {

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

TEST_CASE("autograd.grad: in_grad_call holds in its hooks, not in a backward they run") {
  DTensor a = leaf({1, 2}, {2}), b = leaf({3}, {1});
  std::vector<bool> seen;
  b.register_hook([&seen](const DTensor&) {
    seen.push_back(dt::autograd::in_grad_call());
    return DTensor();
  });
  const DTensor b_loss = dt::sum(b * 2.0);  // hooks run with grad mode off: recorded before
  a.register_hook([&](const DTensor&) {
    seen.push_back(dt::autograd::in_grad_call());
    b_loss.backward();
    seen.push_back(dt::autograd::in_grad_call());
    return DTensor();
  });
  const DTensor out[] = {dt::sum(a * a)};
  const DTensor in[] = {a};
  dt::autograd::grad(out, in);
  CHECK(seen == std::vector<bool>{true, false, true});
  CHECK(b.grad().defined());
  CHECK_FALSE(dt::autograd::in_grad_call());
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

namespace {

void set(const DTensor& p, std::vector<double> v) {
  dt::Tensor local = p.to_local();  // shares the parameter's memory
  local.copy_(dt::from_vector<double>(v, p.shape()));
}

std::vector<double> first(const DTensor& t, size_t n) {
  std::vector<double> v = t.to_local().to_vector<double>();
  v.resize(n);
  return v;
}

void check_first(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));
}

struct Chain {
  std::shared_ptr<dt::nn::Linear> l1 =
      std::make_shared<dt::nn::Linear>(3, 4, true, dt::nn::ModuleOptions{dt::kFloat64});
  std::shared_ptr<dt::nn::Linear> l2 =
      std::make_shared<dt::nn::Linear>(4, 2, true, dt::nn::ModuleOptions{dt::kFloat64});
  DTensor x = dt::local_dtensor(dt::from_vector<double>(range(6, 10, 0), {2, 3}));
  Chain() {
    set(l1->get_parameter("weight"), range(12, 7, 0.5));
    set(l1->get_parameter("bias"), {0.1, -0.2, 0.3, 0.0});
    set(l2->get_parameter("weight"), range(8, 5, 0.3));
    set(l2->get_parameter("bias"), {0.05, -0.05});
  }
  void step() {
    const DTensor out = (*l2)((*l1)(x));
    dt::sum(out * out).backward();
  }
};

const std::vector<double> kL2GradOut = {0.397143, 1.248571, 1.168571, 3.665714};
const std::vector<double> kL2GradIn = {0.505143, 0.834286, 1.163429, 1.492571,
                                       1.482286, 2.449143, 3.416,    4.382857};

}  // namespace

TEST_CASE("module backward hooks: order, grad_input / grad_output and replacements as PyTorch") {
  Chain c;
  std::vector<std::string> events;
  std::vector<DTensor> grads;
  for (dt::nn::Module* m :
       {static_cast<dt::nn::Module*>(c.l1.get()), static_cast<dt::nn::Module*>(c.l2.get())}) {
    const std::string name = m == c.l1.get() ? "l1" : "l2";
    m->register_forward_pre_hook([&events, name](dt::nn::Module&, const DTensor& in) {
      events.push_back(name + " fwd pre");
      return in;
    });
    m->register_forward_hook([&events, name](dt::nn::Module&, const DTensor&, DTensor& out) {
      events.push_back(name + " fwd");
      return out;
    });
    m->register_full_backward_pre_hook([&, name](dt::nn::Module&, const DTensor& go) {
      events.push_back(name + " bwd pre");
      grads.push_back(go);
      return DTensor();
    });
    m->register_full_backward_hook(
        [&, name, m](dt::nn::Module& mod, const DTensor& gi, const DTensor& go) {
          CHECK(&mod == m);
          events.push_back(name + " bwd");
          grads.push_back(gi);
          grads.push_back(go);
          return DTensor();
        });
  }
  c.step();
  CHECK(events == std::vector<std::string>{"l1 fwd pre", "l1 fwd", "l2 fwd pre", "l2 fwd",
                                           "l2 bwd pre", "l2 bwd", "l1 bwd pre", "l1 bwd"});
  REQUIRE(grads.size() == 6);
  check_values(grads[0], kL2GradOut);  // l2 pre: grad_output
  check_values(grads[1], kL2GradIn);   // l2: grad_input
  check_values(grads[2], kL2GradOut);  // l2: grad_output
  check_values(grads[3], kL2GradIn);   // l1 pre: its grad_output is l2's grad_input
  CHECK_FALSE(grads[4].defined());     // l1: the input does not require grad
  check_values(grads[5], kL2GradIn);
  check_first(first(c.l1->get_parameter("weight").grad(), 3), {0.444686, 0.643429, 0.842171});
}

TEST_CASE("module backward hooks: a pre-hook replaces grad_output, hooks chain on grad_input") {
  Chain c;
  c.l2->register_full_backward_pre_hook(
      [](dt::nn::Module&, const DTensor& go) { return go * 2.0; });
  c.l2->register_full_backward_hook(
      [](dt::nn::Module&, const DTensor& gi, const DTensor&) { return gi * 0.5; });
  std::vector<double> seen;
  c.l2->register_full_backward_hook([&seen](dt::nn::Module&, const DTensor& gi, const DTensor&) {
    seen = first(gi, 2);
    return gi * 0.5;
  });
  c.step();
  // PyTorch: l2.weight.grad [-0.684122, -0.319469, 2.550327, 2.91498], l1.weight.grad
  // [0.222343, 0.321714, 0.421086, 0.367371], the second hook saw [0.505143, 0.834286].
  check_first(first(c.l2->get_parameter("weight").grad(), 4),
              {-0.684122, -0.319469, 2.550327, 2.91498});
  check_first(first(c.l1->get_parameter("weight").grad(), 4),
              {0.222343, 0.321714, 0.421086, 0.367371});
  check_first(seen, {0.505143, 0.834286});
  // The input of l1 does not require grad: a hook returning a grad_input is refused.
  c.l1->register_full_backward_hook(
      [](dt::nn::Module&, const DTensor&, const DTensor& go) { return go; });
  CHECK_THROWS_WITH(c.step(), Contains("[register_full_backward_hook] Linear"));
}

// A two-input module's call (module(a, b)) runs the args forms of the hooks (PyTorch's args
// tuple of two) and refuses the one-input forms at registration, naming the args form; a
// backward pre-hook (one output) fits every module. (Before, every backward hook was refused and
// module(a, b) ran no forward hook.)
TEST_CASE("module hooks on a two-input module: the one-input forms are refused at registration") {
  dt::nn::MSELoss mse;
  dt::nn::CosineSimilarity cosine;
  auto hook = [](dt::nn::Module&, const DTensor&, const DTensor&) { return DTensor(); };
  CHECK_THROWS_WITH(
      mse.register_full_backward_hook(hook),
      Contains("[MSELoss] register_full_backward_hook: one-input backward hooks need a one-input "
               "module (MSELoss's forward takes input and target; register the args form"));
  dt::nn::Module& as_module = cosine;
  CHECK_THROWS_WITH(as_module.register_full_backward_hook(hook),
                    Contains("[CosineSimilarity] register_full_backward_hook: one-input backward "
                             "hooks need a one-input module (CosineSimilarity's forward takes x1 "
                             "and x2"));
  CHECK_THROWS_WITH(
      as_module.register_forward_pre_hook([](dt::nn::Module&, const DTensor& x) { return x; }),
      Contains("[CosineSimilarity] register_forward_pre_hook: one-input forward hooks need a "
               "one-input module"));
  CHECK_THROWS_WITH(
      mse.register_forward_hook(
          [](dt::nn::Module&, const DTensor&, const DTensor& y) { return y; }),
      Contains("[MSELoss] register_forward_hook: one-input forward hooks need a one-input module"));
  mse.register_full_backward_pre_hook([](dt::nn::Module&, const DTensor&) { return DTensor(); });
  Chain c;
  c.l1->register_full_backward_hook(hook);  // a one-input module takes them
}

TEST_CASE("autograd.grad inside a captured step is refused with a [compile] error") {
  DTensor w = leaf({1, 2, 3}, {3});
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    const DTensor loss[] = {dt::sum(in[0] * w)};
    const DTensor inputs[] = {w};
    return dt::DTensorList{dt::autograd::grad(loss, inputs)[0]};
  });
  CHECK_THROWS_WITH(step({dt::local_dtensor(dt::from_vector<double>({1, 1, 1}, {3}))}),
                    Contains("[compile] the step cannot be captured: it runs autograd::grad"));
}

TEST_CASE("post accumulate grad hooks: optimizer-in-backward replays bit-equal under compile") {
  // An SGD step in the hook (PyTorch's optimizer-in-backward recipe): captured, then replayed.
  auto run = [](bool compiled) {
    DTensor w = leaf({1, -2, 3}, {3});
    w.register_post_accumulate_grad_hook([](const DTensor& p) { dt::sub_(p, p.grad() * 0.125); });
    auto step_fn = [w](const dt::DTensorList& in) {
      dt::autograd::zero_grad(std::vector<DTensor>{w});
      const DTensor loss = dt::sum(in[0] * w * w);
      loss.backward();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step = dt::compile(step_fn);
    for (int i = 0; i < 3; ++i) {
      const dt::DTensorList in = {
          dt::local_dtensor(dt::from_vector<double>({0.5 + i, 1.5, -0.25 * i}, {3}))};
      if (compiled) {
        step(in);
      } else {
        step_fn(in);
      }
    }
    if (compiled) {
      CHECK(step.captures() == 1);
      CHECK(step.replays() == 2);
    }
    return w.to_local().to_vector<double>();
  };
  const std::vector<double> eager = run(false);
  CHECK(eager != std::vector<double>{1, -2, 3});  // the hook stepped
  CHECK(run(true) == eager);
}

// create_graph (double backward) against torch_autograd_api_references.py, float64, at 1e-12.
namespace {

namespace refs = dt::test::create_graph_refs;

void check_close(const DTensor& t, const std::vector<double>& want) {
  REQUIRE(t.defined());
  const std::vector<double> got = t.to_local().to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
}

DTensor grad1(const DTensor& out, const DTensor& in, bool create_graph,
              const DTensor& grad_out = DTensor()) {
  const DTensor outs[] = {out}, ins[] = {in}, gouts[] = {grad_out};
  return dt::autograd::grad(
      outs, ins, grad_out.defined() ? absl::MakeSpan(gouts) : absl::Span<const DTensor>(),
      std::nullopt, create_graph)[0];
}

}  // namespace

TEST_CASE("create_graph: grad of grad of x^3 + sin + exp, softmax and log_softmax as PyTorch") {
  const DTensor x = leaf({0.3, -0.7, 1.2, 2.0}, {4});
  const DTensor g = grad1(dt::sum(x * x * x + dt::sin(x) + dt::exp(x)), x, true);
  CHECK(g.requires_grad());
  check_close(g, refs::kCgG);
  check_close(grad1(dt::sum(g * g), x, false), refs::kCgGg);

  const DTensor m = leaf({0.3, -0.7, 1.2, 2.0, 0.1, -0.4}, {2, 3});
  const DTensor c = leaf({1.0, -2.0, 0.5, 0.25, 3.0, -1.0}, {2, 3}).detach();
  const DTensor gs = grad1(dt::sum(dt::softmax(m, 1) * c), m, true);
  check_close(gs, refs::kCgSoftmaxG);
  check_close(grad1(dt::sum(gs * gs), m, false), refs::kCgSoftmaxGg);
  const DTensor gl = grad1(dt::sum(dt::log_softmax(m, 1) * c), m, true);
  check_close(gl, refs::kCgLogSoftmaxG);
  check_close(grad1(dt::sum(gl * gl), m, false), refs::kCgLogSoftmaxGg);
  // Without create_graph the gradient has no history.
  CHECK_FALSE(grad1(dt::sum(x * x * x), x, false).requires_grad());
}

TEST_CASE("create_graph: layer_norm, rms_norm, mse_loss, cross_entropy: grad of grad as PyTorch") {
  std::vector<double> xs, cs;
  for (int i = 0; i < 24; ++i) {
    xs.push_back(std::sin(i));
    cs.push_back(std::cos(i * 0.7));
  }
  const DTensor c = leaf(cs, {2, 3, 4}).detach();
  struct Case {
    const char* name;
    std::function<DTensor(const DTensor&, const DTensor&, const DTensor&)> norm;
    const std::vector<double>*gx, *hx, *hw;
  };
  const Case cases[] = {
      {"layer_norm",
       [](const DTensor& x, const DTensor& w, const DTensor& b) {
         return dt::layer_norm(x, {4}, w, b, 1e-5);
       },
       &refs::kCgLnGx, &refs::kCgLnHx, &refs::kCgLnHw},
      {"layer_norm over 2 dims, no affine",
       [](const DTensor& x, const DTensor&, const DTensor&) {
         return dt::layer_norm(x, {3, 4}, DTensor(), DTensor(), 1e-5);
       },
       &refs::kCgLn2Gx, &refs::kCgLn2Hx, nullptr},
      {"rms_norm",
       [](const DTensor& x, const DTensor& w, const DTensor&) {
         return dt::rms_norm(x, {4}, w, 1e-6);
       },
       &refs::kCgRmsGx, &refs::kCgRmsHx, &refs::kCgRmsHw},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    const DTensor x = leaf(xs, {2, 3, 4});
    const DTensor w = leaf(range(4, 4, -0.5), {4});
    const DTensor b = leaf(range(4, 8, 0.2), {4});
    const DTensor outs[] = {dt::sum(k.norm(x, w, b) * c)}, ins[] = {x, w};
    const std::vector<DTensor> g = dt::autograd::grad(outs, ins, {}, std::nullopt,
                                                      /*create_graph=*/true, /*allow_unused=*/true);
    check_close(g[0], *k.gx);
    DTensor p = dt::sum(g[0] * g[0]);
    if (g[1].defined()) p = p + dt::sum(g[1] * g[1]);
    const DTensor ps[] = {p};
    const std::vector<DTensor> h = dt::autograd::grad(ps, ins, {}, false, false, true);
    check_close(h[0], *k.hx);
    if (k.hw != nullptr) check_close(h[1], *k.hw);
  }
  for (const auto& [reduction, gr, ggr] :
       {std::tuple{dt::Reduction::kMean, &refs::kCgMseMeanG, &refs::kCgMseMeanGg},
        std::tuple{dt::Reduction::kSum, &refs::kCgMseSumG, &refs::kCgMseSumGg}}) {
    const DTensor x = leaf(range(6, 5, 0.4), {3, 2});
    std::vector<double> ys;
    for (int i = 0; i < 6; ++i) ys.push_back(std::cos(i));
    const DTensor y = leaf(ys, {3, 2}).detach();
    const DTensor g = grad1(dt::mse_loss(dt::tanh(x), y, reduction), x, true);
    check_close(g, *gr);
    check_close(grad1(dt::sum(g * g), x, false), *ggr);
  }
  std::vector<double> ls;
  for (int i = 0; i < 12; ++i) ls.push_back(std::sin(i));
  const DTensor logits = leaf(ls, {3, 4});
  const DTensor target = dt::local_dtensor(dt::from_vector<int64_t>({0, 3, 1}, {3}));
  const DTensor g = grad1(dt::cross_entropy(logits, target), logits, true);
  check_close(g, refs::kCgCeG);
  check_close(grad1(dt::sum(g * g), logits, false), refs::kCgCeGg);
}

TEST_CASE("create_graph: grad of grad through max values along a dim and gather") {
  // f = sum(max(x^3, 1).values): g = 3 x^2 at each row's argmax, d sum(g^2) / dx = 36 x^3 there.
  const DTensor x = leaf({0.5, -1.5, 1.0, 2.0, -0.5, 0.25}, {2, 3});
  const DTensor g = grad1(dt::sum(dt::max(x * x * x, 1).values), x, true);
  check_close(g, {0, 0, 3.0, 12.0, 0, 0});
  check_close(grad1(dt::sum(g * g), x, false), {0, 0, 36.0, 288.0, 0, 0});
  // The same through gather at [[2, 2], [0, 1]] (element 2 picked twice: g = 6 x^2 there).
  const DTensor idx = dt::local_dtensor(dt::from_vector<int64_t>({2, 2, 0, 1}, {2, 2}));
  const DTensor gg = grad1(dt::sum(dt::gather(x * x * x, 1, idx)), x, true);
  check_close(gg, {0, 0, 6.0, 12.0, 0.75, 0});
  // d sum(g^2) / dx = 2 g dg/dx: 2 * 6 * 12 x = 144 at x = 1, 2 * 3 x^2 * 6 x = 36 x^3 elsewhere.
  check_close(grad1(dt::sum(gg * gg), x, false), {0, 0, 144.0, 288.0, -4.5, 0});
}

TEST_CASE("create_graph: a Hessian-vector product as PyTorch") {
  const DTensor w = leaf(range(12, 7, 0.6), {4, 3}).detach();
  const DTensor v = leaf({0.5, -0.2, 0.9}, {3, 1});
  const DTensor u = leaf({1.0, -1.0, 0.5}, {3, 1}).detach();
  const DTensor s = dt::sum(v * v);
  const DTensor wv = dt::matmul(w, v);
  const DTensor f = dt::mean(dt::exp(wv)) + dt::sum(dt::tanh(wv)) + s * s;
  const DTensor g = grad1(f, v, true);
  check_close(g, refs::kHvpG);
  check_close(grad1(g, v, false, u), refs::kHvp);
}

TEST_CASE("create_graph: gradient penalty of an MLP to its parameters as PyTorch") {
  struct Case {
    const char* name;
    std::function<DTensor(const DTensor&)> act;
    const std::vector<double>*gx, *w1, *b1, *w2;
  };
  const Case cases[] = {
      {"tanh", [](const DTensor& t) { return dt::tanh(t); }, &refs::kGpTanhGx, &refs::kGpTanhW1,
       &refs::kGpTanhB1, &refs::kGpTanhW2},
      {"gelu", [](const DTensor& t) { return dt::gelu(t); }, &refs::kGpGeluGx, &refs::kGpGeluW1,
       &refs::kGpGeluB1, &refs::kGpGeluW2},
      {"gelu tanh", [](const DTensor& t) { return dt::gelu(t, dt::GeluApproximate::kTanh); },
       &refs::kGpGeluTanhGx, &refs::kGpGeluTanhW1, &refs::kGpGeluTanhB1, &refs::kGpGeluTanhW2},
      {"silu", [](const DTensor& t) { return dt::silu(t); }, &refs::kGpSiluGx, &refs::kGpSiluW1,
       &refs::kGpSiluB1, &refs::kGpSiluW2},
      {"sigmoid", [](const DTensor& t) { return dt::sigmoid(t); }, &refs::kGpSigmoidGx,
       &refs::kGpSigmoidW1, &refs::kGpSigmoidB1, &refs::kGpSigmoidW2},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    const DTensor x = leaf(range(12, 10, 0.5), {4, 3});
    const DTensor w1 = leaf(range(15, 9, 0.8), {5, 3});
    const DTensor b1 = leaf(range(5, 10, 0.2), {5});
    const DTensor w2 = leaf(range(5, 4, 0.5), {1, 5});
    const DTensor b2 = leaf({0.1}, {1});
    const DTensor out = dt::linear(k.act(dt::linear(x, w1, b1)), w2, b2);
    const DTensor gx = grad1(dt::sum(out), x, true);
    const DTensor penalty = dt::sum(gx * gx);
    penalty.backward();
    check_close(gx, *k.gx);
    check_close(w1.grad(), *k.w1);
    check_close(b1.grad(), *k.b1);
    check_close(w2.grad(), *k.w2);
    CHECK_FALSE(b2.grad().defined());  // the penalty does not depend on b2, as in PyTorch
  }
}

TEST_CASE("create_graph: backward(create_graph) then a second backward as PyTorch") {
  const DTensor x = leaf({0.3, -0.7, 1.2}, {3});
  const DTensor y[] = {dt::sum(x * x * x)};
  dt::autograd::backward(y, {}, std::nullopt, /*create_graph=*/true);
  const DTensor g = x.grad();
  CHECK(g.requires_grad());
  CHECK_FALSE(g.is_leaf());
  x.set_grad(DTensor());
  dt::sum(g * g).backward();
  check_close(x.grad(), refs::kBackwardCgSecond);
}

TEST_CASE("create_graph: DTensor::backward(gradient, retain_graph, create_graph) as PyTorch") {
  // PyTorch 2.15: x.backward(gradient, retain_graph=None, create_graph=True) gives x.grad with
  // history (the same second derivative as the free function above).
  const DTensor x = leaf({0.3, -0.7, 1.2}, {3});
  const DTensor y = dt::sum(x * x * x);
  y.backward(DTensor(), std::nullopt, /*create_graph=*/true);
  const DTensor g = x.grad();
  REQUIRE(g.requires_grad());
  CHECK_FALSE(g.is_leaf());
  // retain_graph unset under create_graph retains (PyTorch's None): y's graph runs again (kept
  // once more, as g's history reads its nodes).
  x.set_grad(DTensor());
  y.backward(DTensor(), /*retain_graph=*/true);
  CHECK_FALSE(x.grad().requires_grad());
  check_close(x.grad(), {0.27, 1.47, 4.32});  // 3 x^2
  x.set_grad(DTensor());
  dt::sum(g * g).backward();
  check_close(x.grad(), refs::kBackwardCgSecond);
  // An explicit retain_graph=false is honoured, as PyTorch: the graph is freed as the pass goes,
  // so the second order through exp's node (its formula reads exp's saved output, with history)
  // and a first-order rerun both raise, as torch's "backward through the graph a second time".
  const DTensor u = leaf({0.5, -1.0}, {2});
  const DTensor e = dt::sum(dt::exp(u));
  e.backward(DTensor(), /*retain_graph=*/false, /*create_graph=*/true);
  REQUIRE(u.grad().requires_grad());
  check_close(u.grad(), {std::exp(0.5), std::exp(-1.0)});
  const DTensor gu = u.grad();
  u.set_grad(DTensor());
  CHECK_THROWS_WITH(dt::sum(gu).backward(), Contains("a second time"));
  CHECK_THROWS_WITH(e.backward(), Contains("a second time"));
  // retain_graph=true with create_graph: the second order and a rerun work.
  const DTensor v = leaf({0.5, -1.0}, {2});
  const DTensor f = dt::sum(dt::exp(v));
  f.backward(DTensor(), /*retain_graph=*/true, /*create_graph=*/true);
  const DTensor gv = v.grad();
  v.set_grad(DTensor());
  dt::sum(gv).backward();
  check_close(v.grad(), {std::exp(0.5), std::exp(-1.0)});  // d exp / dv again
  // Without create_graph nothing changes: the gradient carries no history, and an explicit
  // gradient seeds a non-scalar root.
  const DTensor w = leaf({1.0, 2.0}, {2});
  (w * w).backward(leaf({1.0, -1.0}, {2}).detach());
  CHECK_FALSE(w.grad().requires_grad());
  check_close(w.grad(), {2.0, -4.0});
}

TEST_CASE("create_graph: autograd::grad's retain_graph as PyTorch's (unset, true, false)") {
  // PyTorch 2.15: torch.autograd.grad(e, u, create_graph=True) retains (retain_graph=None means
  // create_graph); retain_graph=False frees the graph, so grad(gu.sum(), u) through ExpBackward
  // (which reads exp's saved output) raises "Trying to backward through the graph a second time".
  const auto first = [](const DTensor& u, std::optional<bool> retain) {
    const DTensor e[] = {dt::sum(dt::exp(u))}, in[] = {u};
    return std::pair{e[0], dt::autograd::grad(e, in, {}, retain, /*create_graph=*/true)[0]};
  };
  const auto second = [](const DTensor& gu, const DTensor& u) {
    const DTensor s[] = {dt::sum(gu)}, in[] = {u};
    return dt::autograd::grad(s, in)[0];
  };
  for (const std::optional<bool> retain : {std::optional<bool>(), std::optional<bool>(true)}) {
    const DTensor u = leaf({0.5, -1.0}, {2});
    const auto [e, gu] = first(u, retain);
    REQUIRE(gu.requires_grad());
    check_close(second(gu, u), {std::exp(0.5), std::exp(-1.0)});
  }
  const DTensor u = leaf({0.5, -1.0}, {2});
  const auto [e, gu] = first(u, false);
  REQUIRE(gu.requires_grad());  // the pass was recorded: the gradient has history
  check_close(gu, {std::exp(0.5), std::exp(-1.0)});
  CHECK_THROWS_WITH(second(gu, u), Contains("a second time"));
  CHECK_THROWS_WITH(e.backward(), Contains("a second time"));
  // A bool still converts (source compatibility): true retains without create_graph.
  const DTensor w = leaf({1.0, 2.0}, {2});
  const DTensor y[] = {dt::sum(w * w)}, in[] = {w};
  check_close(dt::autograd::grad(y, in, {}, true)[0], {2.0, 4.0});
  check_close(dt::autograd::grad(y, in, {}, false)[0], {2.0, 4.0});
  CHECK_THROWS_WITH(dt::autograd::grad(y, in), Contains("a second time"));
}

TEST_CASE("create_graph: backward stores private, contiguous grads (review R2, finding 1)") {
  // add_bw hands one gradient to both, sum_bw makes it a stride-0 expand: PyTorch 2.15 gives
  // distinct data_ptrs with stride (1,), so an in-place update of one .grad leaves the other.
  const DTensor a = leaf({1, 2, 3}, {3}), b = leaf({4, 5, 6}, {3});
  const DTensor y[] = {dt::sum(a + b)};
  dt::autograd::backward(y, {}, std::nullopt, /*create_graph=*/true);
  const dt::Tensor ga = a.grad().to_local();
  const dt::Tensor gb = b.grad().to_local();
  CHECK(ga.data_ptr() != gb.data_ptr());
  CHECK(ga.is_contiguous());
  ga.data<double>()[0] = 5;
  CHECK(gb.to_vector<double>() == std::vector<double>{1, 1, 1});
  CHECK(ga.to_vector<double>() == std::vector<double>{5, 1, 1});
  // A gradient with history: the copy is recorded (d sum(c.grad) / dc = 2 for 2 (c + d)).
  const DTensor c = leaf({1, 2}, {2}), d = leaf({3, -1}, {2});
  const DTensor z[] = {dt::sum((c + d) * (c + d))};
  dt::autograd::backward(z, {}, std::nullopt, /*create_graph=*/true);
  CHECK(c.grad().to_local().data_ptr() != d.grad().to_local().data_ptr());
  REQUIRE(c.grad().requires_grad());
  check_close(c.grad(), {8.0, 2.0});
  check_close(grad1(dt::sum(c.grad()), c, false), {2.0, 2.0});
}

TEST_CASE("create_graph: a retained gradient keeps its history (review R2, finding 4)") {
  const DTensor x = leaf({0.5, -1.0, 2.0}, {3});
  const DTensor y = x * x;
  y.retain_grad();
  const DTensor l[] = {dt::sum(y * y)};
  dt::autograd::backward(l, {}, std::nullopt, /*create_graph=*/true);
  // y.grad = 2y = 2x^2 carries history: d sum(y.grad) / dx = 4x (PyTorch keeps it too).
  REQUIRE(y.grad().requires_grad());
  check_close(y.grad(), {0.5, 2.0, 8.0});
  check_close(grad1(dt::sum(y.grad()), x, false), {2.0, -4.0, 8.0});
}

TEST_CASE(
    "create_graph: a record_function backward not declared linear raises (review R2, "
    "finding 2)") {
  // Checkpoint's recompute once dropped its second-order term (-2 tanh (1 - tanh^2)) silently
  // (6x instead of PyTorch's 1.2668 / -3.4328), then raised; under create_graph it now records
  // the recompute and gives PyTorch's values (d/dx of (1 - tanh^2) + 3 x^2).
  const DTensor x = leaf({0.3, -0.7}, {2});
  const auto tanh_fn = [](const DTensor& v) { return dt::tanh(v); };
  const auto loss = [&] { return dt::sum(dt::nn::checkpoint(tanh_fn, x)) + dt::sum(x * x * x); };
  const DTensor gc = grad1(loss(), x, true);
  REQUIRE(gc.requires_grad());
  std::vector<double> want;
  for (double v : {0.3, -0.7}) {
    const double t = std::tanh(v);
    want.push_back(-2 * t * (1 - t * t) + 6 * v);
  }
  check_close(grad1(dt::sum(gc), x, false), want);
  CHECK(want[0] == Approx(1.2668190).margin(1e-7));
  CHECK(want[1] == Approx(-3.4327631).margin(1e-7));
  CHECK(grad1(loss(), x, false).defined());
  // A user's record_function raises; record_linear_function (a backward linear in the
  // gradient, written with DTensor ops) is differentiated: y = 2x, d sum(y^2)/dx = 8x, then 8.
  const DTensor* in[] = {&x};
  const auto twice = [](absl::Span<const DTensor> g) { return dt::DTensorList{g[0] * 2.0}; };
  const auto y = [&](bool linear) {
    return linear ? dt::autograd::record_linear_function("Twice", in, (x * 2.0).detach(), twice)
                  : dt::autograd::record_function("Twice", in, (x * 2.0).detach(), twice);
  };
  CHECK_THROWS_WITH(grad1(dt::sum(y(false) * y(false)), x, true),
                    Contains("[autograd] create_graph: Twice's backward uses its record_function"));
  const DTensor g = grad1(dt::sum(y(true) * y(true)), x, true);
  check_close(g, {2.4, -5.6});
  check_close(grad1(dt::sum(g), x, false), {8.0, 8.0});
}

TEST_CASE("create_graph: a gradient penalty through checkpoint_wrapper equals the plain model") {
  // Linear(3, 5) - GELU - Linear(5, 1) as the gelu case of the MLP penalty above (PyTorch 2.15's
  // values), once plain and once under checkpoint_wrapper (PyTorch's non-reentrant checkpoint
  // supports double backward: the recompute records its graph): the first-order gradient with
  // respect to the input, then the penalty's gradients reaching the parameters and the input.
  struct Run {
    DTensor gx, x_grad, w1, b1, w2;
  };
  const auto run = [](bool wrapped) {
    dt::nn::ModuleOptions opts;
    opts.dtype = dt::kFloat64;
    dt::nn::Sequential mlp{std::make_shared<dt::nn::Linear>(3, 5, true, opts),
                           std::make_shared<dt::nn::GELU>(),
                           std::make_shared<dt::nn::Linear>(5, 1, true, opts)};
    dt::nn::Module& fc1 = mlp.get_submodule("0");
    dt::nn::Module& fc2 = mlp.get_submodule("2");
    fc1.set_parameter("weight", leaf(range(15, 9, 0.8), {5, 3}));
    fc1.set_parameter("bias", leaf(range(5, 10, 0.2), {5}));
    fc2.set_parameter("weight", leaf(range(5, 4, 0.5), {1, 5}));
    fc2.set_parameter("bias", leaf({0.1}, {1}));
    if (wrapped) dt::nn::checkpoint_wrapper(mlp);
    const DTensor x = leaf(range(12, 10, 0.5), {4, 3});
    Run r;
    r.gx = grad1(dt::sum(mlp(x)), x, true);
    REQUIRE(r.gx.requires_grad());
    dt::sum(r.gx * r.gx).backward();
    r.x_grad = x.grad();
    r.w1 = fc1.param("weight").grad();
    r.b1 = fc1.param("bias").grad();
    r.w2 = fc2.param("weight").grad();
    CHECK_FALSE(fc2.param("bias").grad().defined());  // the penalty does not depend on b2
    return r;
  };
  const Run plain = run(false), wrapped = run(true);
  check_close(wrapped.gx, refs::kGpGeluGx);
  check_close(wrapped.w1, refs::kGpGeluW1);
  check_close(wrapped.b1, refs::kGpGeluB1);
  check_close(wrapped.w2, refs::kGpGeluW2);
  for (const auto& [a, b] :
       {std::pair{plain.gx, wrapped.gx}, std::pair{plain.x_grad, wrapped.x_grad},
        std::pair{plain.w1, wrapped.w1}, std::pair{plain.b1, wrapped.b1},
        std::pair{plain.w2, wrapped.w2}}) {
    REQUIRE(b.defined());
    const std::vector<double> want = a.to_local().to_vector<double>();
    const std::vector<double> got = b.to_local().to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(std::abs(got[i] - want[i]) <= 1e-15 * (1 + std::abs(want[i])));
    }
  }
}

TEST_CASE("create_graph: cumprod differentiates again, and a compile capture refuses it") {
  // cumprod's backward once dispatched cumprod_backward, which had no derivative, and raised;
  // every registered op now has a double backward (autograd_tests' gradcheck lists none that
  // raises), and a record_function backward still raises (above). f = x0 + x0 x1 + x0 x1 x2:
  // sum(df/dx) = 1 + x0 + x1 + x0 x1 + x0 x2 + x1 x2, whose gradient is [1 + x1 + x2,
  // 1 + x0 + x2, x0 + x1].
  const DTensor x = leaf({0.3, -0.7, 1.2}, {3});
  const DTensor g = grad1(dt::sum(dt::cumprod(x, 0)), x, true);
  check_close(g, {1 - 0.7 - 0.7 * 1.2, 0.3 + 0.3 * 1.2, 0.3 * -0.7});
  check_close(grad1(dt::sum(g), x, false), {1.5, 2.5, -0.4});
  DTensor w = leaf({1, 2, 3}, {3});
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    const DTensor loss[] = {dt::sum(in[0] * w)};
    dt::autograd::backward(loss, {}, std::nullopt, /*create_graph=*/true);
    return dt::DTensorList{loss[0]};
  });
  CHECK_THROWS_WITH(step({dt::local_dtensor(dt::from_vector<double>({1, 1, 1}, {3}))}),
                    Contains("[compile] the step cannot be captured: it runs backward with "
                             "create_graph=true"));
}
