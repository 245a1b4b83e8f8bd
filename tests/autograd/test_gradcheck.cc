// Finite-difference checks of every backward formula (one process, float64): for every
// registered op and every sample call it registers, the gradient autograd computes for
// f(x) = sum over outputs of <v_o, out_o(x)> (v random) equals the central difference
// (f(x + eps e_j) - f(x - eps e_j)) / 2 eps, for every element j of every floating input.
// Inputs are random reals (no ties, no kinks hit), indices stay integers. An op that is
// differentiable but has no formula fails here.
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
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

// Random directions, one per floating input (seed + its index among all inputs).
std::vector<Tensor> random_like(const std::vector<Tensor>& x, uint64_t seed) {
  std::vector<Tensor> r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!dt::is_floating(x[i].dtype())) continue;
    r.push_back(
        random_input(dt::SampleInput{dt::TensorMeta(x[i].shape(), dt::kFloat64), -1, 1}, seed + i));
  }
  return r;
}

// sum_k <g_k, dir_k> (+ <g_k^2, dir_k> / 2 when `square`) over the defined g_k, in double.
double value_along(const std::vector<DTensor>& g, const std::vector<Tensor>& dir, bool square) {
  double s = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    if (!g[k].defined()) continue;
    const std::vector<double> p = g[k].to_local().to_vector<double>(),
                              q = dir[k].to_vector<double>();
    for (size_t i = 0; i < p.size(); ++i)
      s += square ? (p[i] + 0.5 * p[i] * p[i]) * q[i] : p[i] * q[i];
  }
  return s;
}

// The same sum as a DTensor over the g_k that carry history (undefined when none does).
DTensor along(const std::vector<DTensor>& g, const std::vector<Tensor>& dir, bool square) {
  DTensor s;
  for (size_t k = 0; k < g.size(); ++k) {
    if (!g[k].defined() || !g[k].requires_grad()) continue;
    const DTensor gk = square ? g[k] + dt::mul(g[k] * g[k], dt::Scalar(0.5)) : g[k];
    const DTensor term = dt::sum(gk * dt::local_dtensor(dir[k]));
    s = s.defined() ? s + term : term;
  }
  return s;
}

// The gradient of `root` with respect to `ins` (undefined entries where there is none).
std::vector<DTensor> grad_of(const DTensor& root, const std::vector<DTensor>& ins,
                             bool create_graph) {
  if (!root.defined()) return std::vector<DTensor>(ins.size());
  const DTensor roots[] = {root};
  return dt::autograd::grad(roots, ins, {}, std::nullopt, create_graph, true);
}

// One op sample's first-order gradients: of F(at) = sum_o <v_o, out_o> (+ <v_o, out_o^2> / 2
// when `square`) over the float64 outputs, with respect to the floating inputs (returned through
// `ins`), create_graph or not; v is drawn on the first call. Empty when no output needs a grad.
struct FirstOrder {
  const dt::OpInfo& op;
  const dt::OpSample& call;
  bool square;
  std::vector<Tensor> v;

  std::vector<DTensor> operator()(const std::vector<Tensor>& at, bool create_graph,
                                  std::vector<DTensor>& ins) {
    ins.clear();
    std::vector<DTensor> leaves;
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
        v[o] = random_input(dt::SampleInput{dt::TensorMeta(outs[o].shape(), dt::kFloat64), -1, 1},
                            7 + o);
      }
      const DTensor vo = dt::local_dtensor(v[o]);
      roots.push_back(square ? dt::sum(vo * (outs[o] + dt::mul(outs[o] * outs[o], dt::Scalar(0.5))))
                             : outs[o]);
      if (!square) grads.push_back(vo);
    }
    if (roots.empty()) return {};
    return dt::autograd::grad(roots, ins, grads, std::nullopt, create_graph, true);
  }
};

// The samples the create_graph sweeps check: those with a float64 input, inputs drawn as the
// first-order gradcheck draws them.
template <typename Check>
void for_each_float64_sample(const dt::OpInfo& op, Check check) {
  const std::vector<dt::OpSample> calls = op.samples(1);
  for (size_t si = 0; si < calls.size(); ++si) {
    std::vector<Tensor> x;
    for (size_t i = 0; i < calls[si].inputs.size(); ++i) {
      x.push_back(random_input(calls[si].inputs[i], 100 * si + i + 1));
    }
    bool any_f64 = false;
    for (const Tensor& t : x) any_f64 |= t.dtype() == dt::kFloat64;
    if (any_f64 && !check(si, calls[si], x)) return;
  }
}

// x + eps dir on the floating inputs.
std::vector<Tensor> moved(const std::vector<Tensor>& x, const std::vector<Tensor>& dir,
                          double eps) {
  std::vector<Tensor> r;
  for (size_t i = 0, k = 0; i < x.size(); ++i) {
    r.push_back(dt::is_floating(x[i].dtype()) ? dt::add(x[i], dt::mul(dir[k++], dt::Scalar(eps)))
                                              : x[i]);
  }
  return r;
}

// Runs a create_graph pass; the create_graph error (the only one allowed) lists the op and gives
// false.
template <typename Pass>
bool runs_or_raises(Pass pass, const std::string& name, std::vector<std::string>& raising) {
  try {
    pass();
    return true;
  } catch (const dt::Error& e) {
    REQUIRE_THAT(e.what(), Catch::Contains("[autograd] create_graph: "));
    raising.push_back(name);
    return false;
  }
}

// (f(eps) - f(-eps)) / 2 eps, and |f(eps)| + |f(-eps)| (the scale of its rounding).
struct Central {
  double numeric, scale;
};
template <typename F>
Central central_difference(F f, double eps) {
  const double a = f(eps), b = f(-eps);
  return {(a - b) / (2 * eps), std::abs(a) + std::abs(b)};
}

}  // namespace

TEST_CASE("every double backward matches finite differences, or raises (float64, one rank)") {
  const dt::Registry& reg = dt::registered_ops();
  int64_t checked = 0;
  std::vector<std::string> raising;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.differentiable || !op.samples) continue;
    for_each_float64_sample(
        op, [&](size_t si, const dt::OpSample& call, const std::vector<Tensor>& x) {
          const std::vector<Tensor> u = random_like(x, 31), w = random_like(x, 57);
          FirstOrder first{op, call, /*square=*/false, {}};
          INFO(name << " sample " << si);
          std::vector<DTensor> ins, g;
          if (!runs_or_raises([&] { g = first(x, true, ins); }, name, raising)) return false;
          if (g.empty()) return true;
          // d phi / dx by a second pass (zero where no history).
          const double analytic = value_along(grad_of(along(g, u, false), ins, false), w, false);
          const double numeric =
              central_difference(
                  [&](double eps) {
                    std::vector<DTensor> unused;
                    return value_along(first(moved(x, w, eps), false, unused), u, false);
                  },
                  1e-5)
                  .numeric;
          INFO("analytic " << analytic << ", numeric " << numeric);
          CHECK(std::abs(analytic - numeric) <= 1e-5 * (1.0 + std::abs(numeric)));
          ++checked;
          return true;
        });
  }
  std::printf("double backward: %lld samples checked; raising: %s\n",
              static_cast<long long>(checked), absl::StrJoin(raising, ", ").c_str());
  CHECK(checked > 0);
}

// Third order (create_graph twice): with F(x) = <v, out + out^2 / 2>, G its gradient,
// phi(x) = <G + G^2 / 2, u> and psi(x) = <d phi / dx, w>, the gradient autograd gives for psi
// along z equals the central difference of psi (itself from two passes, the first create_graph).
// The squares make the gradients met at each gradient op's node carry history, so that a gradient
// op's own backward (e.g. max_pool_backward's gather, select_backward's select) that returns a
// detached result fails here: with linear F and phi, as the double-backward sweep, the backward
// of the gradient op that gives G only sees the constant u, so its history never counts.
TEST_CASE("every triple backward matches finite differences, or raises (float64, one rank)") {
  // Third orders known to come out NaN, with why; each must still do so (a fix is noticed).
  const absl::flat_hash_map<std::string, const char*> kNonFinite = {
      {"logcumsumexp",
       "PyTorch's formula (exp of reversed logcumsumexps of log|g| - out, the lowest double where "
       "g has the other sign), differentiated twice, meets inf - inf; PyTorch 2.15's is NaN too"}};
  absl::flat_hash_set<std::string> non_finite;
  const dt::Registry& reg = dt::registered_ops();
  int64_t checked = 0;
  std::vector<std::string> raising, ops;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.differentiable || !op.samples) continue;
    for_each_float64_sample(
        op, [&](size_t si, const dt::OpSample& call, const std::vector<Tensor>& x) {
          const std::vector<Tensor> u = random_like(x, 31), w = random_like(x, 57),
                                    z = random_like(x, 83);
          FirstOrder first{op, call, /*square=*/true, {}};
          // d phi / dx at `at`, with the leaves through `ins`; the second pass create_graph or not.
          const auto second = [&](const std::vector<Tensor>& at, bool create_graph,
                                  std::vector<DTensor>& ins) {
            const std::vector<DTensor> g = first(at, true, ins);
            return g.empty() ? g : grad_of(along(g, u, true), ins, create_graph);
          };
          INFO(name << " sample " << si);
          std::vector<DTensor> ins, h;
          if (!runs_or_raises([&] { h = second(x, true, ins); }, name, raising)) return false;
          if (h.empty()) return true;
          const double analytic = value_along(grad_of(along(h, w, false), ins, false), z, false);
          const double eps = 1e-5;
          const Central c = central_difference(
              [&](double e) {
                std::vector<DTensor> unused;
                return value_along(second(moved(x, z, e), false, unused), w, false);
              },
              eps);
          const double numeric = c.numeric;
          if (kNonFinite.contains(name) && !std::isfinite(analytic) && std::isfinite(numeric)) {
            non_finite.insert(name);
            return true;
          }
          INFO("analytic " << analytic << ", numeric " << numeric << ", |psi| " << c.scale / 2);
          // Plus psi's rounding over the step: the max pools draw from +-1e6, and psi is ~1e6
          // there.
          CHECK(std::abs(analytic - numeric) <=
                1e-5 * (1.0 + std::abs(numeric)) + 1e-14 * c.scale / eps);
          if (ops.empty() || ops.back() != name) ops.push_back(name);
          ++checked;
          return true;
        });
  }
  std::printf("triple backward: %lld samples of %zu ops checked; raising: %s\n",
              static_cast<long long>(checked), ops.size(), absl::StrJoin(raising, ", ").c_str());
  for (const auto& [name, why] : kNonFinite) {
    INFO(name << ": " << why);
    CHECK(non_finite.contains(name));
    std::printf("triple backward: %s NaN (known): %s\n", name.c_str(), why);
  }
  CHECK(checked > 0);
}
