// The PyTorch parity sweep's references (tests/ops/parity/parity_references.json, written by
// torch_parity.py --write-references from PyTorch 2.15): each case (a registered op's sample call,
// random / edge / float32 values) runs again through dtensor and its outputs and first-order
// gradients must match PyTorch's by the sweep's rules: shape and dtype exactly; NaN where PyTorch
// has NaN, the same infinities; float64 within 1e-12 relative or 1e-14 of the tensor's largest
// magnitude up to 1e200, float32 within 1e-6 relative or 2 ulps or 1e-6 of the tensor's largest
// magnitude up to 1e30 (an element that cancels); integers exactly; a PyTorch None
// gradient equals zeros or none; both raise or neither; the gradient at a NaN input element is
// not compared (unspecified: PyTorch's is NaN, 0 or a branch's, by op). A float32 case marked
// float64_reference holds PyTorch's float64 values rounded, with the tolerance PyTorch's own
// float32 values need. The deliberate differences (deliberate() below, each documented in
// docs/SEMANTICS.md) must still differ at exactly the recorded elements ("differs"), so that a
// change is seen.
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/ops/ops_registry.h"
#include "tests/ops/parity/parity_case.h"

namespace dt = dtensor;
namespace parity = dtensor::test::parity;
using parity::json;

namespace {

// (op, variant) -> why dtensor differs from PyTorch there, with the SEMANTICS section saying so.
const absl::flat_hash_map<std::pair<std::string, std::string>, const char*>& deliberate() {
  static const char* const kNllTotal =
      "nll_loss's second output total_weight is W for 'mean' only: 0 for 'sum' (aten: W) and for "
      "a 1-d input's 'none' (aten: w[t]) (SEMANTICS, Losses)";
  static const char* const kEdgeCases =
      "non-finite inputs of the structured / nn families (SEMANTICS, Op edge cases checked "
      "against PyTorch 2.15)";
  static const char* const kHardsigmoid =
      "hardsigmoid's gradient multiplies by 1/6 in the compute type, PyTorch by the float32 1/6 "
      "(SEMANTICS, PyTorch parity round 3)";
  static const char* const kMod =
      "fmod / remainder of a huge x by a subnormal y: exact, PyTorch's x - trunc(x / y) y NaN "
      "(SEMANTICS, The PyTorch parity sweep)";
  static const char* const kMean =
      "var_mean / std_mean's mean with an infinity is mean(x), PyTorch's Welford NaN (SEMANTICS, "
      "PyTorch parity round 3)";
  static const char* const kProd =
      "prod / cumprod with an infinity or NaN next to zeros: the products of the other elements "
      "(inf * 0 = NaN), PyTorch's zero-aware formula 0 or its division NaN (SEMANTICS, PyTorch "
      "parity round 3 and the sweep)";
  static const char* const kTies =
      "topk / kthvalue ties by stable sort order, unspecified in PyTorch (SEMANTICS, Scans, "
      "sorting and selection)";
  static const char* const kMode =
      "mode with NaN: each NaN a value of its own (SEMANTICS, PyTorch parity round 3)";
  static const absl::flat_hash_map<std::pair<std::string, std::string>, const char*> kList = {
      {{"nll_loss", "random"}, kNllTotal},
      {{"nll_loss", "edge"}, kNllTotal},
      {{"nll_loss", "float32"}, kNllTotal},
      {{"hardsigmoid", "random"}, kHardsigmoid},
      {{"hardsigmoid", "edge"}, kHardsigmoid},
      {{"fmod", "edge"}, kMod},
      {{"remainder", "edge"}, kMod},
      {{"var_mean", "edge"}, kMean},
      {{"std_mean", "edge"}, kMean},
      {{"prod", "edge"}, kProd},
      {{"cumprod", "edge"}, kProd},
      {{"cumprod_backward", "edge"}, kProd},
      {{"topk", "edge"}, kTies},
      {{"kthvalue", "edge"}, kTies},
      {{"mode", "edge"}, kMode},
      // The structured and nn families' (torch_map_structured.py, torch_map_nn.py: the reason
      // of each case is in its DELIBERATE and in the references).
      {{"binary_cross_entropy_backward", "edge"}, kEdgeCases},
      {{"cdist", "edge"}, kEdgeCases},
      {{"cdist_backward", "edge"}, kEdgeCases},
      {{"group_norm_backward", "edge"}, kEdgeCases},
      {{"group_norm", "edge"}, kEdgeCases},
      {{"scatter_reduce", "edge"}, kEdgeCases},
      {{"upsample_linear1d_backward", "edge"}, kEdgeCases},
      {{"upsample_bicubic2d", "edge"}, kEdgeCases},
      {{"upsample_bicubic2d_backward", "edge"}, kEdgeCases},
      {{"upsample_bilinear2d", "edge"}, kEdgeCases},
      {{"upsample_bilinear2d_backward", "edge"}, kEdgeCases},
      {{"upsample_trilinear3d", "edge"}, kEdgeCases},
      {{"upsample_trilinear3d_backward", "edge"}, kEdgeCases},
  };
  return kList;
}

// How many representable floats lie between a and b (both finite).
int64_t float_ulps(double a, double b) {
  const auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(key(static_cast<float>(a)) - key(static_cast<float>(b)));
}

// The first way `ours` differs from the reference tensor `ref` (null: PyTorch gave None), or
// nothing. `rtol` > 0: a float64_reference's tolerance. Elements where `unspecified` (if
// defined) is NaN are not compared: the gradient at a NaN input element. `positions`: every
// differing element's index is appended (a difference of the whole tensor appends none).
std::optional<std::string> difference(const dt::Tensor& ours, const json& ref, double rtol,
                                      const dt::Tensor& unspecified,
                                      std::vector<int64_t>& positions) {
  std::vector<bool> skip(static_cast<size_t>(ours.defined() ? ours.numel() : 0), false);
  if (unspecified.defined() && dt::is_floating(unspecified.dtype()) &&
      unspecified.numel() == static_cast<int64_t>(skip.size())) {
    const std::vector<double> u = unspecified.to_vector<double>();
    for (size_t i = 0; i < u.size(); ++i) skip[i] = std::isnan(u[i]);
  }
  const auto all_zero = [&skip](const dt::Tensor& t) {
    if (!t.defined() || !dt::is_floating(t.dtype())) return true;
    const std::vector<double> v = t.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 0 && !(i < skip.size() && skip[i])) return false;
    }
    return true;
  };
  if (ref.is_null()) {
    if (all_zero(ours)) return std::nullopt;
    return std::string("PyTorch has no gradient, dtensor a nonzero one");
  }
  const dt::Tensor theirs = parity::tensor_from_json(ref);
  if (!ours.defined()) {
    if (all_zero(theirs)) return std::nullopt;
    return std::string("dtensor has no gradient, PyTorch a nonzero one");
  }
  if (ours.dtype() != theirs.dtype() || ours.shape() != theirs.shape()) {
    return "dtype / shape " + std::string(dt::dtype_name(ours.dtype())) + " " +
           dt::shape_str(ours.shape()) + " vs PyTorch " +
           std::string(dt::dtype_name(theirs.dtype())) + " " + dt::shape_str(theirs.shape());
  }
  const std::vector<double> a = ours.to_vector<double>(), b = theirs.to_vector<double>();
  const dt::DType d = ours.dtype();
  // An element that cancels keeps the absolute rounding of its terms: also 1e-6 (float32) /
  // 1e-14 (float64) of the tensor's largest finite magnitude up to 1e30 / 1e200 (torch_parity.py's
  // HUGE): an edge input's 1e300 would set a floor of 1e286, under which every ordinary element
  // of the tensor passes.
  double floor = 1e-300;
  const double floor_scale = d == dt::kFloat32 ? 1e-6 : d == dt::kFloat64 ? 1e-14 : 0.0;
  const double huge = d == dt::kFloat32 ? 1e30 : 1e200;
  for (double v : b) {
    if (std::isfinite(v) && std::abs(v) <= huge) floor = std::max(floor, floor_scale * std::abs(v));
  }
  std::optional<std::string> first;
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])) || skip[i];
    if (!same && dt::is_floating(d) && std::isfinite(a[i]) && std::isfinite(b[i])) {
      const double scale = std::max(std::abs(a[i]), std::abs(b[i])), diff = std::abs(a[i] - b[i]);
      if (d == dt::kFloat64) {
        same = diff <= std::max(rtol, 1e-12) * scale + floor;
      } else if (d == dt::kFloat32) {
        same = diff <= std::max(rtol, 1e-6) * scale + floor || float_ulps(a[i], b[i]) <= 2;
      } else {
        same = diff <= 8e-3 * scale;  // float16 / bfloat16: about 2 ulps of bfloat16
      }
    }
    if (!same) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "[%zu] %.17g vs PyTorch %.17g", i, a[i], b[i]);
      if (!first) first = std::string(buf);
      positions.push_back(static_cast<int64_t>(i));
    }
  }
  return first;
}

// Where a case differs (torch_parity.py's compare() names them the same): "output 0" /
// "grad of input 1" -> the differing elements' indices (none: the whole tensor), "raises" /
// "outputs" / "backward raises" -> none.
using Places = std::map<std::string, std::vector<int64_t>>;

// Every way dtensor's result differs from the reference case.
std::vector<std::string> differences(const parity::CaseResult& r, const json& ref,
                                     const std::vector<dt::Tensor>& inputs, Places& places) {
  std::vector<std::string> out;
  const double rtol =
      ref.contains("float64_reference") ? ref["float64_reference"].at("rtol").get<double>() : 0.0;
  if (ref.value("error", false) || r.error) {
    if (!ref.value("error", false)) out.push_back("dtensor raises: " + *r.error);
    if (!r.error) out.push_back("PyTorch raises, dtensor does not");
    if (!out.empty()) places["raises"];
    return out;
  }
  const json& outs = ref.at("outputs");
  if (outs.size() != r.outputs.size()) {
    out.push_back(std::to_string(r.outputs.size()) + " outputs vs PyTorch " +
                  std::to_string(outs.size()));
    places["outputs"];
    return out;
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    std::vector<int64_t> positions;
    if (auto d = difference(r.outputs[o], outs[o], rtol, dt::Tensor(), positions)) {
      out.push_back("output " + std::to_string(o) + ": " + *d);
      places["output " + std::to_string(o)] = std::move(positions);
    }
  }
  if (ref.value("backward_error", false) || r.backward_error) {
    if (!ref.value("backward_error", false)) {
      out.push_back("dtensor's backward raises: " + *r.backward_error);
    }
    if (!r.backward_error) out.push_back("PyTorch's backward raises, dtensor's does not");
    if (ref.value("backward_error", false) != r.backward_error.has_value()) {
      places["backward raises"];
    }
    return out;
  }
  const json& grads = ref.at("grads");
  for (size_t i = 0; i < grads.size(); ++i) {
    std::vector<int64_t> positions;
    if (auto d = difference(i < r.grads.size() ? r.grads[i] : dt::Tensor(), grads[i], rtol,
                            inputs[i], positions)) {
      out.push_back("grad of input " + std::to_string(i) + ": " + *d);
      places["grad of input " + std::to_string(i)] = std::move(positions);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("registered ops match PyTorch 2.15 on the parity references") {
  std::ifstream in(DTENSOR_PARITY_REFERENCES);
  REQUIRE(in.good());
  const json refs = json::parse(in);
  const dt::Registry& reg = dt::registered_ops();
  absl::flat_hash_set<std::string> ops;
  absl::flat_hash_set<std::pair<std::string, std::string>> deliberate_seen;
  int64_t cases = 0, deliberate_cases = 0;
  for (const json& ref : refs) {
    const std::string op = ref.at("op").get<std::string>();
    const std::string variant = ref.at("variant").get<std::string>();
    INFO(op << " sample " << ref.at("sample").get<int64_t>() << " " << variant);
    std::vector<dt::Tensor> inputs, cotangents;
    for (const json& j : ref.at("inputs")) inputs.push_back(parity::tensor_from_json(j));
    dt::ArgList args;
    for (const json& j : ref.at("args")) args.push_back(parity::arg_from_json(j));
    if (ref.contains("cotangents") && ref["cotangents"].is_array()) {
      for (const json& j : ref["cotangents"]) cotangents.push_back(parity::tensor_from_json(j));
    }
    const parity::CaseResult r = parity::run_case(reg.get(op), inputs, args, cotangents);
    Places places;
    const std::vector<std::string> diffs = differences(r, ref, inputs, places);
    const auto listed = deliberate().find({op, variant});
    if (ref.contains("deliberate")) {
      // A listed difference must be in the test's list and still differ.
      INFO("marked deliberate in the references: " << ref["deliberate"].dump());
      CHECK(listed != deliberate().end());
      CHECK(!diffs.empty());
      // Exactly the recorded places differ (torch_parity.py's "differs").
      INFO("differs now: " << json(places).dump());
      CHECK(json(places) == ref.at("differs"));
      deliberate_seen.insert({op, variant});
      ++deliberate_cases;
    } else {
      for (const std::string& d : diffs) FAIL_CHECK(d);
    }
    ops.insert(op);
    ++cases;
  }
  for (const auto& [key, why] : deliberate()) {
    INFO("deliberate difference " << key.first << " " << key.second << " (" << why
                                  << ") has no case in the references");
    CHECK(deliberate_seen.contains(key));
  }
  std::printf("torch parity: %zu ops, %lld cases, %lld deliberate differences\n", ops.size(),
              static_cast<long long>(cases), static_cast<long long>(deliberate_cases));
  CHECK(cases > 0);
}
