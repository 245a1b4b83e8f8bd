// One PyTorch-parity case (tests/ops/parity): a registered op called on local DTensors, its
// outputs and the vector-Jacobian product of its outputs with given cotangents, and the JSON
// form of tensors and args that parity_dump writes and test_torch_parity reads back
// (torch_parity.py decodes the same form). Values are numbers, with "nan", "inf", "-inf" and "-0"
// as strings.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "tests/common/op_samples.h"

namespace dtensor::test::parity {

using nlohmann::json;

inline json number_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0 && std::signbit(x)) return "-0";
  return x;
}

inline double number_from_json(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_boolean()) return j.get<bool>() ? 1.0 : 0.0;
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::nan("");
  if (s == "inf") return HUGE_VAL;
  if (s == "-inf") return -HUGE_VAL;
  if (s == "-0") return -0.0;
  DT_FAIL("[parity] bad number %s", s.c_str());
}

inline DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (dtype_name(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  }
  DT_FAIL("[parity] unknown dtype %s", name.c_str());
}

// {"dtype", "shape", "values"}; null for an undefined tensor.
inline json tensor_json(const Tensor& t) {
  if (!t.defined()) return nullptr;
  json values = json::array();
  if (is_floating(t.dtype())) {
    for (double x : t.to_vector<double>()) values.push_back(number_json(x));
  } else if (t.dtype() == kBool) {
    for (bool x : t.to_vector<bool>()) values.push_back(x);
  } else {
    for (int64_t x : t.to_vector<int64_t>()) values.push_back(x);
  }
  return {{"dtype", std::string(dtype_name(t.dtype()))},
          {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
          {"values", values}};
}

inline Tensor tensor_from_json(const json& j) {
  if (j.is_null()) return Tensor();
  const DType d = dtype_from_name(j.at("dtype").get<std::string>());
  const std::vector<int64_t> shape = j.at("shape").get<std::vector<int64_t>>();
  if (is_floating(d) || d == kBool) {
    std::vector<double> v;
    for (const json& x : j.at("values")) v.push_back(number_from_json(x));
    return from_vector<double>(v, shape).to(d);
  }
  return from_vector<int64_t>(j.at("values").get<std::vector<int64_t>>(), shape).to(d);
}

inline json arg_json(const ArgValue& a) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return {{"none", nullptr}};
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return {{"int", v}};
        } else if constexpr (std::is_same_v<T, double>) {
          return {{"double", number_json(v)}};
        } else if constexpr (std::is_same_v<T, bool>) {
          return {{"bool", v}};
        } else if constexpr (std::is_same_v<T, Shape>) {
          return {{"shape", std::vector<int64_t>(v.begin(), v.end())}};
        } else if constexpr (std::is_same_v<T, DType>) {
          return {{"dtype", std::string(dtype_name(v))}};
        } else if constexpr (std::is_same_v<T, ReduceOp>) {
          return {{"reduce", std::string(reduce_op_name(v))}};
        } else {
          return {{"str", std::string(v)}};
        }
      },
      a);
}

inline ArgValue arg_from_json(const json& j) {
  // The one key and its value, read through j's own iterator (a structured binding of
  // *j.items().begin() would refer into a temporary that is gone by the next line: ASan).
  const auto it = j.begin();
  const std::string& kind = it.key();
  const json& v = it.value();
  if (kind == "none") return std::monostate();
  if (kind == "int") return v.get<int64_t>();
  if (kind == "double") return number_from_json(v);
  if (kind == "bool") return v.get<bool>();
  if (kind == "shape") {
    const std::vector<int64_t> dims = v.get<std::vector<int64_t>>();
    return Shape(dims.begin(), dims.end());
  }
  if (kind == "dtype") return dtype_from_name(v.get<std::string>());
  if (kind == "reduce") {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct}) {
      if (reduce_op_name(op) == v.get<std::string>()) return op;
    }
  }
  if (kind == "str") {
    // ArgValue's string_view must outlive the call: keep one copy of each string.
    static std::set<std::string> interned;
    return std::string_view(*interned.insert(v.get<std::string>()).first);
  }
  DT_FAIL("[parity] bad arg %s", j.dump().c_str());
}

// What one case gives: the outputs, the cotangents used (undefined for outputs that take none)
// and the gradient of each input (undefined where none flows or the input is not floating), or
// the error the op raised (`error`: no outputs) or its backward raised (`backward_error`: the
// outputs, no grads).
struct CaseResult {
  std::optional<std::string> error, backward_error;
  std::vector<Tensor> outputs, cotangents, grads;
};

// The cotangent gradcheck draws for output o (uniform in [-1, 1], seed 7 + o).
inline Tensor draw_cotangent(const Tensor& out, size_t o) {
  return sample_values(SampleInput{TensorMeta(out.shape(), kFloat64), -1, 1}, 7 + o, true)
      .to(out.dtype());
}

// Runs `op` on local DTensors of `inputs` (floating ones require grad; for an in-place op self
// is a non-leaf copy, as gradcheck does) and the vjp of the outputs with `cotangents` (drawn when
// empty) with respect to the floating inputs.
inline CaseResult run_case(const OpInfo& op, const std::vector<Tensor>& inputs,
                           absl::Span<const ArgValue> args, std::vector<Tensor> cotangents = {}) {
  CaseResult r;
  bool forward_done = false;
  try {
    std::vector<DTensor> leaves, in;
    for (const Tensor& t : inputs) {
      DTensor d = local_dtensor(t.clone());
      if (op.differentiable && is_floating(t.dtype())) d.requires_grad_();
      leaves.push_back(d);
    }
    in = leaves;
    if (op.inplace && !in.empty()) in[0] = mul(in[0], Scalar(1.0));
    std::vector<const DTensor*> ptrs;
    for (const DTensor& t : in) ptrs.push_back(&t);
    const DTensorList outs = dispatch_multi(op, ptrs, args);
    const bool draw = cotangents.empty();
    if (draw) cotangents.resize(outs.size());
    std::vector<DTensor> roots, grads, wrt;
    for (size_t o = 0; o < outs.size(); ++o) {
      r.outputs.push_back(outs[o].to_local().clone());
      if (!is_floating(outs[o].dtype()) || !outs[o].requires_grad()) {
        cotangents[o] = Tensor();
        continue;
      }
      if (draw) cotangents[o] = draw_cotangent(r.outputs[o], o);
      if (!cotangents[o].defined()) continue;
      roots.push_back(outs[o]);
      grads.push_back(local_dtensor(cotangents[o]));
    }
    r.cotangents = cotangents;
    forward_done = true;
    r.grads.resize(inputs.size());
    for (const DTensor& d : leaves) {
      if (d.requires_grad()) wrt.push_back(d);
    }
    if (roots.empty() || wrt.empty()) return r;
    const std::vector<DTensor> g = autograd::grad(roots, wrt, grads, false, false, true);
    for (size_t i = 0, k = 0; i < leaves.size(); ++i) {
      if (!leaves[i].requires_grad()) continue;
      if (g[k].defined()) r.grads[i] = g[k].to_local().clone();
      ++k;
    }
  } catch (const std::exception& e) {
    if (forward_done) {
      r.grads.clear();
      r.backward_error = e.what();
    } else {
      r = CaseResult();
      r.error = e.what();
    }
  }
  return r;
}

}  // namespace dtensor::test::parity
