// In-place writes to the tensors an op saved for backward (one process, float64), swept over
// every registered op and sample call: after the forward, one input (or output) is written in
// place, then backward runs. PyTorch's rule is that backward raises ("... modified by an inplace
// operation") when the write hit a tensor the op saved, and computes the gradient unchanged
// when it did not. The check here is the one that matters for correctness: when backward does
// not raise, every gradient equals the gradient computed without the write (otherwise the
// formula read the modified value: a silently wrong gradient, the defect this suite exists to
// catch). Writes: on the input itself (a non-leaf copy, x = leaf * 1, as PyTorch users write
// it), through detach() (shares storage), through a view made under no_grad, and on each
// output. The table printed at the end (raise / no raise per op and tensor) is what
// torch_saved_tensor_references.py compares with PyTorch 2.15.
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/compile/override.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "examples/l2_normalize_op.h"
#include "tests/autograd/version_error.h"
#include "tests/common/op_samples.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Tensor;
using dt::test::raises_version_error;

namespace {

// Where the write lands, and how.
enum class Write {
  kNone,
  kInput,       // x.mul_(-2).add_(0.5) on the op's input x (a non-leaf)
  kDetached,    // the same through x.detach()
  kView,        // the same through flatten(x) made under no_grad
  kOutput,      // out.mul_(-2).add_(0.5) on an output before backward
  kOutputCopy,  // out.mul(-2).add(0.5), out of place: the baseline of kOutput
};

struct Run {
  bool raised = false;
  bool version_error = false;  // the raise named an in-place modification
  bool refused = false;        // the in-place write itself was refused (a view of a graph input)
  std::string error;
  std::vector<std::vector<double>> grads;  // per input; empty where none
};

// x.mul_(-2).add_(0.5): changes every value (sign included) so that any formula reading it
// gives another gradient; integer tensors get mul_(1) (a write that keeps the indices valid:
// only the raise / no raise outcome is checked there).
void write_in_place(const DTensor& x) {
  if (dt::is_floating(x.dtype())) {
    dt::add_(dt::mul_(x, dt::Scalar(-2.0)), dt::Scalar(0.5));
  } else {
    dt::mul_(x, dt::Scalar(int64_t{1}));
  }
}

Run run_once(const dt::OpInfo& op, const dt::OpSample& call, const std::vector<Tensor>& values,
             Write write, size_t target) {
  Run r;
  std::vector<DTensor> leaves, in;
  for (const Tensor& t : values) {
    DTensor leaf = dt::local_dtensor(t.clone());
    if (dt::is_floating(t.dtype())) {
      leaf.requires_grad_();
      in.push_back(dt::mul(leaf, dt::Scalar(1.0)));  // a non-leaf: in-place writes allowed
    } else {
      in.push_back(leaf);
    }
    leaves.push_back(leaf);
  }
  std::vector<const DTensor*> ptrs;
  for (const DTensor& t : in) ptrs.push_back(&t);
  dt::DTensorList outs = dt::dispatch_multi(op, ptrs, call.args);
  try {
    switch (write) {
      case Write::kInput:
        write_in_place(in[target]);
        break;
      case Write::kDetached:
        write_in_place(in[target].detach());
        break;
      case Write::kView: {
        dt::autograd::NoGradGuard no_grad;
        write_in_place(dt::flatten(in[target]));
        break;
      }
      case Write::kOutput:
        write_in_place(outs[target]);
        break;
      case Write::kOutputCopy:
        outs[target] = dt::add(dt::mul(outs[target], dt::Scalar(-2.0)), dt::Scalar(0.5));
        break;
      case Write::kNone:
        break;
    }
  } catch (const dt::Error& e) {
    r.refused = true;
    r.error = e.what();
    return r;
  }
  std::vector<DTensor> roots, seeds;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!dt::is_floating(outs[o].dtype()) || !outs[o].requires_grad()) continue;
    roots.push_back(outs[o]);
    seeds.push_back(dt::local_dtensor(
        dt::test::sample_values(dt::SampleInput{dt::TensorMeta(outs[o].shape(), dt::kFloat64)},
                                7 + o, /*reals=*/true)
            .to(outs[o].dtype())));
  }
  if (roots.empty()) return r;
  try {
    dt::autograd::backward(roots, seeds);
  } catch (const dt::Error& e) {
    r.raised = true;
    r.error = e.what();
    r.version_error = r.error.find("modified by an in-place op") != std::string::npos;
    return r;
  }
  for (const DTensor& leaf : leaves) {
    r.grads.push_back(leaf.requires_grad() && leaf.grad().defined()
                          ? leaf.grad().to_local().to_vector<double>()
                          : std::vector<double>());
  }
  return r;
}

bool same_grads(const Run& a, const Run& b) {
  if (a.grads.size() != b.grads.size()) return false;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    if (a.grads[i].size() != b.grads[i].size()) return false;
    for (size_t j = 0; j < a.grads[i].size(); ++j) {
      const double x = a.grads[i][j], y = b.grads[i][j];
      if (std::isnan(x) && std::isnan(y)) continue;
      if (!(std::abs(x - y) <= 1e-12 * (1.0 + std::abs(y)))) return false;
    }
  }
  return true;
}

const char* write_name(Write w) {
  switch (w) {
    case Write::kInput:
      return "input";
    case Write::kDetached:
      return "input via detach()";
    case Write::kView:
      return "input via a view";
    case Write::kOutput:
      return "output";
    default:
      return "none";
  }
}

}  // namespace

TEST_CASE("a write to a saved tensor raises at backward, any other write leaves the gradient") {
  l2_example::l2_normalize_op();
  const dt::Registry& reg = dt::registered_ops();
  int64_t ops = 0, raised = 0, unchanged = 0, refused = 0, silent = 0;
  // "op: in0 R, in1 -, out0 R" (R: raises, -: no raise) from the first sample, for the PyTorch
  // comparison.
  std::vector<std::string> table;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.differentiable || !op.samples) continue;
    const std::vector<dt::OpSample> calls = op.samples(1);
    bool counted = false;
    for (size_t si = 0; si < calls.size(); ++si) {
      const dt::OpSample& call = calls[si];
      std::vector<Tensor> x;
      bool floating_input = false;
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        x.push_back(dt::test::sample_values(call.inputs[i], 100 * si + i + 1, /*reals=*/true));
        floating_input |= dt::is_floating(x.back().dtype());
      }
      if (!floating_input) continue;
      const Run base = run_once(op, call, x, Write::kNone, 0);
      INFO(name << " sample " << si << ": " << base.error);
      REQUIRE(!base.raised);
      REQUIRE(!base.refused);
      if (base.grads.empty()) continue;
      counted = true;
      std::vector<std::string> row;
      auto check = [&](Write w, size_t target, const Run& reference, const std::string& label) {
        const Run got = run_once(op, call, x, w, target);
        INFO(name << " sample " << si << ", write to " << write_name(w) << " " << target << ": "
                  << got.error);
        if (got.refused) {
          ++refused;
          if (si == 0) row.push_back(label + " refused");
          return;
        }
        if (got.raised) {
          CHECK(got.version_error);  // no other error may come out of backward
          ++raised;
          if (si == 0) row.push_back(label + " R");
          return;
        }
        const bool same = same_grads(got, reference);
        if (!same) ++silent;
        CHECK(same);  // no raise => the write did not reach the formula
        ++unchanged;
        if (si == 0) row.push_back(label + " -");
      };
      const bool inplace = op.inplace;
      for (size_t i = 0; i < x.size(); ++i) {
        // An in-place op's self is its output: written as the output below.
        if (inplace && i == 0) continue;
        check(Write::kInput, i, base, absl::StrCat("in", i));
        check(Write::kDetached, i, base, absl::StrCat("in", i, "/detach"));
        check(Write::kView, i, base, absl::StrCat("in", i, "/view"));
      }
      const dt::DTensorList probe = [&] {
        std::vector<DTensor> in;
        for (const Tensor& t : x) in.push_back(dt::local_dtensor(t.clone()));
        std::vector<const DTensor*> ptrs;
        for (const DTensor& t : in) ptrs.push_back(&t);
        dt::autograd::NoGradGuard no_grad;
        return dt::dispatch_multi(op, ptrs, call.args);
      }();
      for (size_t o = 0; o < probe.size(); ++o) {
        // An integer output (indices) gets a write that keeps its values: raise or unchanged.
        if (!dt::is_floating(probe[o].dtype())) {
          check(Write::kOutput, o, base, absl::StrCat("out", o));
          continue;
        }
        const Run copy = run_once(op, call, x, Write::kOutputCopy, o);
        REQUIRE(!copy.raised);
        check(Write::kOutput, o, copy, absl::StrCat("out", o));
      }
      if (si == 0) table.push_back(absl::StrCat(name, ": ", absl::StrJoin(row, ", ")));
    }
    ops += counted;
  }
  std::printf(
      "saved-tensor versions: %lld ops; writes: %lld raise, %lld no raise (gradient "
      "unchanged), %lld refused at the write, %lld silently wrong\n",
      static_cast<long long>(ops), static_cast<long long>(raised),
      static_cast<long long>(unchanged), static_cast<long long>(refused),
      static_cast<long long>(silent));
  if (std::getenv("DTENSOR_SAVED_TABLE") != nullptr) {
    for (const std::string& line : table) std::printf("%s\n", line.c_str());
  }
  CHECK(ops > 0);
  CHECK(silent == 0);
}

namespace {

// A leaf [1, 2, 3] that requires grad and a non-leaf copy a = leaf * 1 (in-place writes allowed).
struct Leaf {
  DTensor leaf = dt::local_dtensor(dt::from_vector<double>({1, 2, 3}, {3})).requires_grad_();
  DTensor a = dt::mul(leaf, dt::Scalar(1.0));
  std::vector<double> grad() const { return leaf.grad().to_local().to_vector<double>(); }
};

}  // namespace

// Values and raises from PyTorch 2.15 (tests/autograd/torch_saved_tensor_references.py).
TEST_CASE("in-place mechanics match PyTorch: aliasing, leaves, views, no_grad, chains") {
  SECTION("a.mul_(a) / a.div_(a): the op read self as other, then overwrote it: raises") {
    Leaf m;
    dt::mul_(m.a, m.a);
    CHECK(raises_version_error([&] { dt::sum(m.a).backward(); }));
    Leaf d;
    dt::div_(d.a, d.a);
    CHECK(raises_version_error([&] { dt::sum(d.a).backward(); }));
  }
  SECTION("partial overlap: computed as if other were copied first; mul_ then raises") {
    // PyTorch refuses a[1:4].add_(a[0:3]) at the op; dtensor computes it (SEMANTICS round 5).
    DTensor b = dt::local_dtensor(dt::from_vector<double>({1, 2, 3, 4}, {4}));
    dt::add_(dt::narrow(b, 0, 1, 3), dt::narrow(b, 0, 0, 3));
    CHECK(b.to_local().to_vector<double>() == std::vector<double>{1, 3, 5, 7});
    Leaf m;
    dt::mul_(m.a, dt::narrow(m.a, 0, 2, 1));  // other is self's memory: saved before the write
    CHECK(raises_version_error([&] { dt::sum(m.a).backward(); }));
  }
  SECTION("a.add_(a) saves nothing: gradient 2") {
    Leaf s;
    dt::add_(s.a, s.a);
    dt::sum(s.a).backward();
    CHECK(s.grad() == std::vector<double>{2, 2, 2});
  }
  SECTION("a.mul_(2).add_(1), then a * a: gradient 4 (2 a + 1)") {
    Leaf s;
    dt::add_(dt::mul_(s.a, dt::Scalar(2.0)), dt::Scalar(1.0));
    dt::sum(dt::mul(s.a, s.a)).backward();
    CHECK(s.grad() == std::vector<double>{12, 20, 28});
  }
  SECTION("a leaf that requires grad, or a view of one, refuses in-place ops; no_grad allows") {
    Leaf s;
    CHECK_THROWS_WITH(dt::add_(s.leaf, dt::Scalar(1.0)),
                      Catch::Contains("a leaf DTensor that requires grad"));
    CHECK_THROWS_WITH(dt::add_(dt::narrow(s.leaf, 0, 0, 2), dt::Scalar(1.0)),
                      Catch::Contains("view of a DTensor that requires grad"));
    {
      dt::autograd::NoGradGuard no_grad;
      dt::add_(s.leaf, dt::Scalar(1.0));
    }
    CHECK(s.leaf.requires_grad());
    CHECK(s.leaf.to_local().to_vector<double>() == std::vector<double>{2, 3, 4});
  }
  SECTION("a write through a view under no_grad: raises where the op saved the viewed tensor") {
    Leaf e;
    const DTensor y = dt::exp(e.a);  // saves its output only
    {
      dt::autograd::NoGradGuard no_grad;
      dt::mul_(dt::narrow(e.a, 0, 0, 2), dt::Scalar(3.0));
    }
    dt::sum(y).backward();
    CHECK_THAT(e.grad(),
               Catch::Approx(std::vector<double>{std::exp(1.0), std::exp(2.0), std::exp(3.0)}));
    Leaf s;
    const DTensor z = dt::sin(s.a);  // saves its input
    {
      dt::autograd::NoGradGuard no_grad;
      dt::mul_(dt::narrow(s.a, 0, 0, 2), dt::Scalar(3.0));
    }
    CHECK(raises_version_error([&] { dt::sum(z).backward(); }));
  }
  SECTION("detach() shares storage: a write through it reaches the version counter") {
    Leaf s;
    const DTensor y = dt::mul(s.leaf, s.leaf);
    dt::add_(s.leaf.detach(), dt::Scalar(1.0));
    CHECK(raises_version_error([&] { dt::sum(y).backward(); }));
  }
  SECTION("a second backward without retain_graph raises") {
    Leaf s;
    const DTensor y = dt::sum(dt::mul(s.leaf, s.leaf));
    y.backward();
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("a second time"));
  }
}

// A backward lambda that reads its forward's inputs (record_function's closures: call_eager,
// ring_attention) checks their versions as a dispatched op's node does.
TEST_CASE("call_eager's backward raises when an input was written in place after the forward") {
  dt::compiler::EagerFunction square{
      "square", [](const dt::DTensorList& in) { return dt::DTensorList{dt::mul(in[0], in[0])}; },
      [](const dt::DTensorList& in, const dt::DTensorList& g) {
        return dt::DTensorList{dt::mul(dt::mul(g[0], in[0]), dt::Scalar(2.0))};
      }};
  Leaf clean;
  dt::sum(dt::compiler::call_eager(square, {clean.a})[0]).backward();
  CHECK(clean.grad() == std::vector<double>{2, 4, 6});
  Leaf s;
  const DTensor y = dt::compiler::call_eager(square, {s.a})[0];
  dt::mul_(s.a, dt::Scalar(-2.0));  // before round 5 the gradient silently became [-4, -8, -12]
  CHECK(raises_version_error([&] { dt::sum(y).backward(); }));
}

TEST_CASE("dropout's backward raises when the mask it returned was written in place") {
  // PyTorch's native_dropout saves its mask output: a write to it makes backward raise.
  Leaf s;
  const dt::DTensorDropoutResult r = dt::dropout_with_mask(s.a, 0.5);
  dt::zero_(r.mask);  // before round 5 every gradient silently became 0
  CHECK(raises_version_error([&] { dt::sum(r.output).backward(); }));
}
