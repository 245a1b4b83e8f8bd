// The round-9 inventory modules against PyTorch 2.15 (tests/nn/torch_nn_references.py writes
// tests/nn/inventory_references.inc): a module built as the reference case names it, given
// PyTorch's parameters by their state_dict names (so the names and their order are checked),
// gives PyTorch's output and the gradients of sum(out * c) w.r.t. its inputs and parameters at
// 1e-12 (float64). Included by the activation, pooling and basic module tests.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/reference_case.h"

namespace dtensor::test::inventory {

using test::f64;
using test::RefCase;
using test::RefTensor;
using test::value;

inline const RefCase& reference(const std::string& name) {
  static const std::vector<RefCase> cases = {
#include "tests/nn/inventory_references.inc"
  };
  return find_case(cases, name);
}

inline void check_close(const DTensor& got, const Tensor& want, const std::string& what,
                        double tol = 1e-12) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(want.defined());
  CHECK(got.shape() == want.shape());
  CHECK(same_values(got.full_tensor(), want, tol));
}

// `m` (float64 parameters) on the case's inputs, in the mode the case names (the caller sets
// train / eval); `forward` maps the inputs to the output (one input: m(x)). The input
// gradients are compared at `input_grad_tol`.
inline void check_module(nn::Module& m, const std::string& case_name,
                         const std::function<DTensor(const std::vector<DTensor>&)>& forward,
                         double input_grad_tol = 1e-12) {
  INFO(case_name);
  const RefCase& ref = reference(case_name);
  std::vector<std::string> want_names, names;
  for (const RefTensor& t : ref.tensors) {
    const std::string n = t.name;
    if (n.rfind("param:", 0) != 0) continue;
    want_names.push_back(n.substr(6));
    m.set_parameter(n.substr(6), nn::local_dtensor(value(ref, n)));
  }
  for (const auto& [n, p] : m.named_parameters()) names.push_back(n);
  for (const auto& [n, b] : m.named_buffers()) names.push_back(n);
  CHECK(names == want_names);
  std::vector<DTensor> inputs;
  for (const char* n : {"x", "x2"}) {
    const Tensor v = value(ref, n);
    if (!v.defined()) continue;
    DTensor d = nn::local_dtensor(v);
    d.requires_grad_(true);
    inputs.push_back(d);
  }
  m.zero_grad();
  const DTensor out = forward(inputs);
  check_close(out, value(ref, "out"), "out");
  sum(mul(out, nn::local_dtensor(value(ref, "c")))).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_close(inputs[i].grad(), value(ref, i == 0 ? "grad:x" : "grad:x2"), "grad of input",
                input_grad_tol);
  }
  for (const auto& [n, p] : m.named_parameters()) check_close(p.grad(), value(ref, "grad:" + n), n);
}

inline void check_module(nn::Module& m, const std::string& case_name,
                         double input_grad_tol = 1e-12) {
  check_module(
      m, case_name, [&](const std::vector<DTensor>& in) { return m(in[0]); }, input_grad_tol);
}

// A one-input module, its reference case and type name; cases named "... eval" run in eval mode.
struct ModuleCase {
  const char* name;
  std::shared_ptr<nn::Module> m;
  const char* type;
  double input_grad_tol = 1e-12;
};

inline void check_modules(const std::vector<ModuleCase>& cases) {
  for (const ModuleCase& c : cases) {
    CHECK(c.m->type_name() == c.type);
    if (std::string(c.name).find(" eval") != std::string::npos) c.m->eval();
    check_module(*c.m, c.name, c.input_grad_tol);
  }
}

}  // namespace dtensor::test::inventory
