// The autograd engine on one process (local DTensors on the self mesh): gradients of simple
// graphs against closed forms, accumulation, retain_graph, hooks, grad mode, and the errors
// for the usual misuse.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "tests/autograd/leaf.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::DTensor;
using dt::Tensor;
using dt::test::leaf;

namespace {

std::vector<double> values(const DTensor& x) {
  return x.to_local().to_vector<double>();
}

}  // namespace

TEST_CASE("autograd: gradients of a small graph equal the closed form") {
  // f = sum(a * b + a^2) -> df/da = b + 2a, df/db = a.
  DTensor a = leaf({1, 2, 3}, {3}), b = leaf({4, 5, 6}, {3});
  DTensor f = dt::sum(a * b + a * a);
  CHECK(f.requires_grad());
  CHECK_FALSE(f.is_leaf());
  REQUIRE(f.grad_fn() != nullptr);
  f.backward();
  CHECK(values(a.grad()) == std::vector<double>{6, 9, 12});
  CHECK(values(b.grad()) == std::vector<double>{1, 2, 3});
  // The leaf's gradient has the leaf's spec.
  CHECK(a.grad().spec() == a.spec());
}

TEST_CASE("autograd: gradients accumulate across backward calls and clear with set_grad") {
  DTensor a = leaf({1, -2}, {2});
  dt::sum(a * 3.0).backward();
  dt::sum(a * 3.0).backward();
  CHECK(values(a.grad()) == std::vector<double>{6, 6});
  a.set_grad(DTensor());
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("autograd: a tensor used twice gets the sum of both paths") {
  DTensor a = leaf({2}, {1});
  DTensor y = a * a;           // 2a
  DTensor z = dt::sum(y + y);  // 4a
  z.backward();
  CHECK(values(a.grad()) == std::vector<double>{8});
}

TEST_CASE("autograd: matmul gradients") {
  DTensor a = leaf({1, 2, 3, 4}, {2, 2}), b = leaf({5, 6, 7, 8}, {2, 2});
  dt::sum(dt::mm(a, b)).backward();
  // d sum(A B)/dA = 1 B^T: row sums of B; d/dB = A^T 1: column sums of A.
  CHECK(values(a.grad()) == std::vector<double>{11, 15, 11, 15});
  CHECK(values(b.grad()) == std::vector<double>{4, 4, 6, 6});
}

TEST_CASE("autograd: backward of a non-scalar needs a gradient") {
  DTensor a = leaf({1, 2}, {2});
  DTensor y = a * 2.0;
  REQUIRE_THROWS_WITH(y.backward(), Contains("[backward] a gradient can be implied only for a "
                                             "one-element root"));
  y.backward(dt::local_dtensor(dt::from_vector<double>({1, 10}, {2})));
  CHECK(values(a.grad()) == std::vector<double>{2, 20});
}

TEST_CASE("autograd: a second backward without retain_graph throws, with it accumulates") {
  DTensor a = leaf({3}, {1});
  DTensor f = dt::sum(a * a);
  f.backward(DTensor(), /*retain_graph=*/true);
  f.backward();
  CHECK(values(a.grad()) == std::vector<double>{12});
  REQUIRE_THROWS_WITH(f.backward(), Contains("a second time"));
}

TEST_CASE("autograd: no_grad, detach and integer outputs do not record") {
  DTensor a = leaf({1, 2}, {2});
  {
    dt::autograd::NoGradGuard guard;
    CHECK_FALSE(dt::autograd::grad_enabled());
    DTensor y = a * 2.0;
    CHECK_FALSE(y.requires_grad());
    REQUIRE_THROWS_WITH(dt::sum(y).backward(), Contains("does not require grad"));
  }
  CHECK(dt::autograd::grad_enabled());
  CHECK_FALSE(a.detach().requires_grad());
  CHECK_FALSE(dt::gt(a, dt::Scalar(1)).requires_grad());  // comparisons are not differentiable
  CHECK_FALSE(dt::argmax(a).requires_grad());
  {
    dt::autograd::InferenceMode guard;
    CHECK_FALSE((a + a).requires_grad());
  }
}

TEST_CASE(
    "autograd: hooks see and may replace the gradient, retain_grad keeps a non-leaf gradient") {
  DTensor a = leaf({1, 2}, {2});
  DTensor y = a * 3.0;
  y.retain_grad();
  std::vector<double> seen;
  y.register_hook([&](const DTensor& g) {
    seen = values(g);
    return g * 2.0;  // doubles what flows on to a
  });
  a.register_hook([&](const DTensor& g) { return DTensor(); });  // keep as is
  dt::sum(y).backward();
  CHECK(seen == std::vector<double>{1, 1});
  CHECK(values(a.grad()) == std::vector<double>{6, 6});
  REQUIRE(y.grad().defined());
}

TEST_CASE("autograd: in-place misuse is refused and a saved tensor modified in place is caught") {
  DTensor a = leaf({1, 2}, {2});
  REQUIRE_THROWS_WITH(dt::add_(a, dt::Scalar(1.0)),
                      Contains("a leaf DTensor that requires grad is used in an in-place"));
  {
    dt::autograd::NoGradGuard guard;  // allowed without recording (optimizer steps)
    dt::add_(a, dt::Scalar(1.0));
  }
  CHECK(values(a) == std::vector<double>{2, 3});
  DTensor b = a * 1.0;
  DTensor y = b * b;  // saves b
  dt::mul_(b, dt::Scalar(2.0));
  REQUIRE_THROWS_WITH(dt::sum(y).backward(), Contains("modified by an in-place op"));
  // A recorded in-place op on a non-leaf: d(sum((a*1) * 3))/da = 3.
  DTensor c = leaf({1, 1}, {2});
  DTensor d = c * 1.0;
  dt::mul_(d, dt::Scalar(3.0));
  dt::sum(d).backward();
  CHECK(values(c.grad()) == std::vector<double>{3, 3});
  // In place on a view of a tensor that requires grad.
  DTensor v = dt::reshape(d, {2, 1});
  REQUIRE_THROWS_WITH(dt::add_(v, dt::Scalar(1.0)), Contains("view"));
}

TEST_CASE("autograd: a saved DTensor written through its local Tensor is caught, as PyTorch") {
  // PyTorch's version counter counts every in-place write, so a write into the storage a
  // backward will read raises "modified by an inplace operation" instead of a wrong gradient
  // (here d(sum((3x)^2))/dx = 18x would silently become 180 with the values scaled by 10).
  using Write = void (*)(Tensor);
  const std::vector<std::pair<const char*, Write>> writes = {
      {"mul_", [](Tensor t) { dt::mul_(t, dt::Scalar(10.0)); }},
      {"add_", [](Tensor t) { dt::add_(t, dt::ones(t.sizes(), t.dtype())); }},
      {"copy_", [](Tensor t) { t.copy_(dt::full(t.sizes(), 5.0, t.dtype())); }},
      {"fill_", [](Tensor t) { t.fill_(dt::Scalar(7.0)); }},
      {"zero_", [](Tensor t) { t.zero_(); }},
      {"normal_", [](Tensor t) { dt::normal_(t); }},
      {"index_put_",
       [](Tensor t) {
         const std::vector<std::optional<Tensor>> idx = {dt::from_vector<int64_t>({0}, {1})};
         dt::index_put_(t, idx, dt::full({1}, 2.0, t.dtype()));
       }},
      {"a view's fill_", [](Tensor t) { t.narrow(0, 1, 1).fill_(dt::Scalar(1.0)); }},
  };
  for (const auto& [name, write] : writes) {
    DYNAMIC_SECTION(name) {
      DTensor x = leaf({1, 2}, {2});
      DTensor a = x * 3.0;
      DTensor y = a * a;  // saves a
      const uint32_t before = a.to_local().storage().version();
      write(a.to_local());
      CHECK(a.to_local().storage().version() > before);
      REQUIRE_THROWS_WITH(dt::sum(y).backward(), Contains("modified by an in-place op"));
    }
  }
  // A refused in-place call writes nothing, so it does not invalidate what was saved (PyTorch
  // checks the arguments before it bumps the version counter).
  SECTION("refused writes") {
    DTensor x = leaf({1, 2}, {2});
    DTensor a = x * 3.0;
    DTensor y = a * a;
    Tensor l = a.to_local();
    const uint32_t before = l.storage().version();
    CHECK_THROWS(dt::add_(l, dt::ones({3}, l.dtype())));  // shape
    CHECK_THROWS(l.copy_(dt::ones({3}, l.dtype())));      // broadcast
    CHECK_THROWS(l.copy_(dt::empty({2}, dt::TensorOptions(l.dtype(), dt::Device("meta")))));
    Tensor i = dt::ones({2}, dt::DType::kInt64);
    const uint32_t before_i = i.storage().version();
    CHECK_THROWS(dt::add_(i, dt::Scalar(0.5)));  // result dtype
    CHECK(i.storage().version() == before_i);
    CHECK(l.storage().version() == before);
    // Meta tensors count their writes too (a dry run refuses what the real run would).
    Tensor m = dt::empty({2}, dt::TensorOptions(l.dtype(), dt::Device("meta")));
    const uint32_t before_m = m.storage().version();
    m.fill_(dt::Scalar(1.0));
    CHECK(m.storage().version() == before_m + 1);
    m.copy_(dt::empty({2}, dt::TensorOptions(l.dtype(), dt::Device("meta"))));
    CHECK(m.storage().version() == before_m + 2);
    dt::sum(y).backward();
    CHECK(values(x.grad()) == std::vector<double>{18, 36});
  }
  // Writes into other storages (a clone of a saved tensor) are not counted against it.
  DTensor x = leaf({1, 2}, {2});
  DTensor a = x * 3.0;
  DTensor y = a * a;
  dt::mul_(a.to_local().clone(), dt::Scalar(10.0));
  dt::sum(y).backward();
  CHECK(values(x.grad()) == std::vector<double>{18, 36});
}

TEST_CASE("autograd: a formula reading what its op does not save is told so") {
  // Recording sizes a node's saved lists only when the op saves something: reading a missing
  // input or output must still raise, whichever list is empty.
  const auto op_saving = [](const char* name, uint32_t inputs, uint32_t outputs, bool read_output) {
    dt::OpInfo op;
    op.name = name;
    op.input_names = {"self"};
    op.differentiable = true;
    op.meta = [](const dt::OpSchema& s) { return dt::OutputMetas{s.input(0).meta()}; };
    op.strategy = [](const dt::OpSchema&) { return dt::StrategyRows{}; };
    op.kernel = dt::single_output(
        [](const dt::KernelContext&, absl::Span<const Tensor> l) { return l[0] * 2.0; });
    op.backward = [read_output](const dt::autograd::BackwardContext& c,
                                absl::Span<const DTensor> g) {
      const DTensor& saved = read_output ? c.output(0) : c.input(0);
      return dt::DTensorList{g[0] * saved};
    };
    op.saved_inputs = inputs;
    op.saved_outputs = outputs;
    return op;
  };
  dt::Registry reg;
  const dt::OpInfo& none = reg.add(op_saving("test_saves_nothing", 0, 0, false));
  const dt::OpInfo& input_only = reg.add(op_saving("test_saves_input", 1, 0, true));
  const dt::OpInfo& output_only = reg.add(op_saving("test_saves_output", 0, 1, false));
  const dt::OpInfo& both = reg.add(op_saving("test_saves_both", 1, 1, true));
  DTensor a = leaf({1, 2}, {2});
  const DTensor* in[] = {&a};
  REQUIRE_THROWS_WITH(dt::sum(dt::dispatch(none, in, {})).backward(),
                      Contains("[test_saves_nothing backward] input 0 was not saved"));
  REQUIRE_THROWS_WITH(dt::sum(dt::dispatch(input_only, in, {})).backward(),
                      Contains("[test_saves_input backward] output 0 was not saved"));
  REQUIRE_THROWS_WITH(dt::sum(dt::dispatch(output_only, in, {})).backward(),
                      Contains("[test_saves_output backward] input 0 was not saved"));
  // What is saved is there: this formula returns g * y, with y = 2a the saved output (the
  // failed backwards above accumulated nothing).
  dt::sum(dt::dispatch(both, in, {})).backward();
  CHECK(values(a.grad()) == std::vector<double>{2, 4});
}

TEST_CASE("autograd: requires_grad_ errors") {
  DTensor i = dt::local_dtensor(dt::zeros({2}, dt::kInt64));
  REQUIRE_THROWS_WITH(i.requires_grad_(), Contains("only floating DTensors"));
  DTensor a = leaf({1}, {1});
  DTensor y = a * 2.0;
  REQUIRE_THROWS_WITH(y.requires_grad_(false), Contains("leaf"));
  // Asking a recorded op's output to require grad changes nothing, as PyTorch.
  y.requires_grad_();
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
}

// PyTorch 2.15 (tests/autograd/torch_autograd_references.py): a retained grad() is the
// gradient after every hook of the tensor, whichever was registered first, and follows the
// tensor through an in-place op, while a hook registered before the write sees the gradient
// of the value before it.
TEST_CASE("autograd: retain_grad keeps the gradient the hooks made, and follows in-place ops") {
  for (const bool retain_first : {true, false}) {
    DTensor a = leaf({1, 2}, {2});
    DTensor b = a * 3.0;
    if (retain_first) b.retain_grad();
    b.register_hook([](const DTensor& g) { return g * 10.0; });
    if (!retain_first) b.retain_grad();
    dt::sum(b * b).backward();
    CHECK(values(b.grad()) == std::vector<double>{60, 120});
    CHECK(values(a.grad()) == std::vector<double>{180, 360});
  }
  DTensor a = leaf({1, 2}, {2});
  DTensor b = a * 3.0;
  b.retain_grad();
  std::vector<double> seen;
  b.register_hook([&seen](const DTensor& g) {
    seen = values(g);
    return DTensor();
  });
  dt::mul_(b, dt::Scalar(2.0));
  b.register_hook([](const DTensor& g) { return g * 10.0; });
  dt::sum(b * b).backward();
  CHECK(values(b.grad()) == std::vector<double>{120, 240});
  CHECK(values(a.grad()) == std::vector<double>{720, 1440});
  CHECK(seen == std::vector<double>{240, 480});
}

TEST_CASE("autograd: queue_callback runs after the whole graph, in order, refused outside") {
  CHECK_THROWS_WITH(dt::autograd::queue_callback([] {}), Contains("[queue_callback]"));
  CHECK_FALSE(dt::autograd::in_backward());
  DTensor a = leaf({1, 2}, {2});
  std::vector<std::string> log;
  DTensor h = a * 2.0;
  h.register_hook([&](const DTensor&) {
    CHECK(dt::autograd::in_backward());
    log.push_back("hook");
    dt::autograd::queue_callback([&] {
      // The leaf's gradient is complete when the callback runs.
      CHECK(a.grad().defined());
      log.push_back("first");
      dt::autograd::queue_callback([&] { log.push_back("queued by a callback"); });
    });
    dt::autograd::queue_callback([&] { log.push_back("second"); });
    return DTensor();
  });
  dt::sum(h * 3.0).backward();
  CHECK(log == std::vector<std::string>{"hook", "first", "second", "queued by a callback"});
  CHECK_FALSE(dt::autograd::in_backward());
}
