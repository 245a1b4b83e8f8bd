// Finite-difference checks of every backward formula (one process, float64): for every
// registered op and every sample call it registers, the gradient autograd computes for
// f(x) = sum over outputs of <v_o, out_o(x)> (v random) equals the central difference
// (f(x + eps e_j) - f(x - eps e_j)) / 2 eps, for every element j of every floating input.
// Inputs are random reals (no ties, no kinks hit), indices stay integers. An op that is
// differentiable but has no formula fails here.
#include <absl/strings/str_join.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/creation.h"
#include "examples/l2_normalize_op.h"
#include "tests/common/op_samples.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Tensor;

namespace {

Tensor random_input(const dt::SampleInput& in, uint64_t seed) {
  return dt::test::sample_values(in, seed, /*reals=*/true);
}

// The op on local DTensors made from `values`; for in-place ops self is a non-leaf copy (an
// in-place op on a leaf that requires grad is refused, as in PyTorch).
dt::DTensorList run(const dt::OpInfo& op, const std::vector<DTensor>& inputs,
                    absl::Span<const dt::ArgValue> args) {
  std::vector<DTensor> in = inputs;
  if (op.inplace) in[0] = dt::mul(in[0], dt::Scalar(1.0));
  std::vector<const DTensor*> ptrs;
  for (const DTensor& t : in) ptrs.push_back(&t);
  return dt::dispatch_multi(op, ptrs, args);
}

// f(x) = sum_o <v_o, out_o> over the floating outputs, in double.
double objective(const dt::DTensorList& outs, const std::vector<Tensor>& v) {
  double f = 0;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!v[o].defined()) continue;
    const std::vector<double> y = outs[o].to_local().to_vector<double>();
    const std::vector<double> w = v[o].to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) f += y[i] * w[i];
  }
  return f;
}

}  // namespace

TEST_CASE("every backward formula matches finite differences (float64, one rank)") {
  l2_example::l2_normalize_op();  // a user-registered op's formula is checked like the library's
  const dt::Registry& reg = dt::registered_ops();
  int64_t checked_ops = 0, checked_elements = 0;
  std::vector<std::string> skipped;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.differentiable || !op.samples) {
      skipped.push_back(name);
      continue;
    }
    const std::vector<dt::OpSample> calls = op.samples(1);
    bool any = false;
    for (size_t si = 0; si < calls.size(); ++si) {
      const dt::OpSample& call = calls[si];
      std::vector<Tensor> x;
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        x.push_back(random_input(call.inputs[i], 100 * si + i + 1));
      }
      std::vector<DTensor> leaves;
      bool differentiable_input = false;
      for (const Tensor& t : x) {
        DTensor d = dt::local_dtensor(t.clone());
        if (dt::is_floating(t.dtype())) {
          d.requires_grad_();
          differentiable_input = true;
        }
        leaves.push_back(d);
      }
      if (!differentiable_input) continue;
      INFO(name << " sample " << si);
      const dt::DTensorList outs = run(op, leaves, call.args);
      // Upstream gradients v_o for the floating outputs.
      std::vector<Tensor> v(outs.size());
      std::vector<DTensor> roots, grads;
      for (size_t o = 0; o < outs.size(); ++o) {
        if (!dt::is_floating(outs[o].dtype()) || !outs[o].requires_grad()) continue;
        v[o] = random_input(dt::SampleInput{dt::TensorMeta(outs[o].shape(), dt::kFloat64), -1, 1},
                            7 + o)
                   .to(outs[o].dtype());
        roots.push_back(outs[o]);
        grads.push_back(dt::local_dtensor(v[o]));
      }
      REQUIRE(!roots.empty());
      dt::autograd::backward(roots, grads);
      any = true;
      // Central differences, element by element.
      dt::autograd::NoGradGuard no_grad;
      bool low_precision = false;
      for (const DTensor& o : outs) low_precision |= o.dtype() != dt::kFloat64;
      // A float32 output (cast) rounds f: a wider step keeps the difference above the noise
      // (cast is linear, so the step costs no accuracy there).
      const double eps = low_precision ? 1e-2 : 1e-6;
      const double tol = low_precision ? 2e-3 : 1e-6;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!dt::is_floating(x[i].dtype())) continue;
        REQUIRE(leaves[i].grad().defined());
        const std::vector<double> analytic = leaves[i].grad().to_local().to_vector<double>();
        std::vector<double> base = x[i].to_vector<double>();
        for (size_t j = 0; j < base.size(); ++j) {
          double f[2];
          for (int side = 0; side < 2; ++side) {
            std::vector<double> moved = base;
            moved[j] += side == 0 ? eps : -eps;
            std::vector<DTensor> in;
            for (size_t k = 0; k < x.size(); ++k) {
              in.push_back(dt::local_dtensor(
                  k == i ? dt::from_vector<double>(moved, x[i].shape()).to(x[i].dtype())
                         : x[k].clone()));
            }
            f[side] = objective(run(op, in, call.args), v);
          }
          const double numeric = (f[0] - f[1]) / (2 * eps);
          INFO("input " << i << " element " << j << ": analytic " << analytic[j] << ", numeric "
                        << numeric);
          CHECK(std::abs(analytic[j] - numeric) <= tol * (1.0 + std::abs(numeric)));
          ++checked_elements;
        }
      }
    }
    if (any) ++checked_ops;
  }
  std::printf(
      "gradcheck: %lld differentiable ops, %lld input elements checked; not "
      "differentiable: %s\n",
      static_cast<long long>(checked_ops), static_cast<long long>(checked_elements),
      absl::StrJoin(skipped, ", ").c_str());
  CHECK(checked_ops > 0);
}

// Double backward (create_graph): for every differentiable op and sample (float64 outputs), with
// G(x) the gradient of <v, out(x)> and phi(x) = <G(x), u>, the gradient autograd gives for phi
// from a create_graph pass, along a random direction w, equals the central difference
// (phi(x + eps w) - phi(x - eps w)) / 2 eps. Ops whose formula uses a gradient op with no
// derivative raise "[autograd] create_graph: ..." and are listed; a formula that drops history
// silently (the gradient of phi would miss terms) fails here.
namespace {

std::vector<Tensor> random_like(const std::vector<Tensor>& x, uint64_t seed) {
  std::vector<Tensor> r;
  for (size_t i = 0; i < x.size(); ++i) {
    r.push_back(
        dt::is_floating(x[i].dtype())
            ? random_input(dt::SampleInput{dt::TensorMeta(x[i].shape(), dt::kFloat64), -1, 1},
                           seed + i)
            : Tensor());
  }
  return r;
}

double dot(const DTensor& a, const Tensor& b) {
  if (!a.defined()) return 0;
  const std::vector<double> p = a.to_local().to_vector<double>(), q = b.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += p[i] * q[i];
  return s;
}

}  // namespace

TEST_CASE("every double backward matches finite differences, or raises (float64, one rank)") {
  const dt::Registry& reg = dt::registered_ops();
  int64_t checked = 0;
  std::vector<std::string> raising;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.differentiable || !op.samples) continue;
    const std::vector<dt::OpSample> calls = op.samples(1);
    bool raised = false;
    for (size_t si = 0; si < calls.size() && !raised; ++si) {
      const dt::OpSample& call = calls[si];
      std::vector<Tensor> x;
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        x.push_back(random_input(call.inputs[i], 100 * si + i + 1));
      }
      bool all_f64 = false;
      for (const Tensor& t : x) all_f64 |= t.dtype() == dt::kFloat64;
      if (!all_f64) continue;
      const std::vector<Tensor> u = random_like(x, 31), w = random_like(x, 57);
      std::vector<Tensor> v;  // per output, set on the first run
      // The first-order gradients at `at` (create_graph or not), leaves returned through `leaves`.
      auto first = [&](const std::vector<Tensor>& at, bool create_graph,
                       std::vector<DTensor>& leaves) {
        leaves.clear();
        std::vector<DTensor> ins;
        for (const Tensor& t : at) {
          DTensor d = dt::local_dtensor(t.clone());
          if (dt::is_floating(t.dtype())) {
            d.requires_grad_();
            ins.push_back(d);
          }
          leaves.push_back(d);
        }
        const dt::DTensorList outs = run(op, leaves, call.args);
        std::vector<DTensor> roots, grads;
        if (v.empty()) v.resize(outs.size());
        for (size_t o = 0; o < outs.size(); ++o) {
          if (outs[o].dtype() != dt::kFloat64 || !outs[o].requires_grad()) continue;
          if (!v[o].defined()) {
            v[o] = random_input(
                dt::SampleInput{dt::TensorMeta(outs[o].shape(), dt::kFloat64), -1, 1}, 7 + o);
          }
          roots.push_back(outs[o]);
          grads.push_back(dt::local_dtensor(v[o]));
        }
        if (roots.empty()) return std::vector<DTensor>();
        return dt::autograd::grad(roots, ins, grads, false, create_graph, true);
      };
      auto phi_of = [&](const std::vector<DTensor>& g) {
        double s = 0;
        for (size_t i = 0, k = 0; i < x.size(); ++i) {
          if (dt::is_floating(x[i].dtype())) s += dot(g[k++], u[i]);
        }
        return s;
      };
      INFO(name << " sample " << si);
      std::vector<DTensor> leaves;
      std::vector<DTensor> g;
      try {
        g = first(x, true, leaves);
      } catch (const dt::Error& e) {
        REQUIRE_THAT(e.what(), Catch::Contains("[autograd] create_graph: "));
        raising.push_back(name);
        raised = true;
        continue;
      }
      if (g.empty()) continue;
      // d phi / dx by a second pass (zero where no history).
      DTensor phi;
      for (size_t i = 0, k = 0; i < x.size(); ++i) {
        if (!dt::is_floating(x[i].dtype())) continue;
        const DTensor& gi = g[k++];
        if (!gi.defined() || !gi.requires_grad()) continue;
        const DTensor term = dt::sum(gi * dt::local_dtensor(u[i]));
        phi = phi.defined() ? phi + term : term;
      }
      double analytic = 0;
      if (phi.defined()) {
        std::vector<DTensor> ins;
        for (const DTensor& l : leaves) {
          if (l.requires_grad()) ins.push_back(l);
        }
        const DTensor roots[] = {phi};
        const std::vector<DTensor> h = dt::autograd::grad(roots, ins, {}, false, false, true);
        for (size_t i = 0, k = 0; i < x.size(); ++i) {
          if (dt::is_floating(x[i].dtype())) analytic += dot(h[k++], w[i]);
        }
      }
      const double eps = 1e-5;
      double f[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<Tensor> moved;
        for (size_t i = 0; i < x.size(); ++i) {
          moved.push_back(dt::is_floating(x[i].dtype())
                              ? dt::add(x[i], dt::mul(w[i], dt::Scalar(side == 0 ? eps : -eps)))
                              : x[i]);
        }
        std::vector<DTensor> unused;
        f[side] = phi_of(first(moved, false, unused));
      }
      const double numeric = (f[0] - f[1]) / (2 * eps);
      INFO("analytic " << analytic << ", numeric " << numeric);
      CHECK(std::abs(analytic - numeric) <= 1e-5 * (1.0 + std::abs(numeric)));
      ++checked;
    }
  }
  std::printf("double backward: %lld samples checked; raising: %s\n",
              static_cast<long long>(checked), absl::StrJoin(raising, ", ").c_str());
  CHECK(checked > 0);
}
