// Writes every registered op's sample calls, run through dtensor on local DTensors, as JSON lines
// for tests/ops/parity/torch_parity.py to compare with PyTorch. For each op with samples, each
// sample and each variant:
//   random   the values gradcheck draws (sample_values(in, 100 * sample + input + 1, reals));
//   edge     the same with special values written into each floating input: positions 0..6 hold
//            0, -0, +inf, -inf, NaN, a large (1e300) and a tiny (1e-310, subnormal) magnitude,
//            rotated by the input's index (so that two inputs pair different specials), and
//            positions 7 and 8 a tie (two equal elements in a row); integer inputs keep their
//            registered range (indices stay valid);
//   float32  the random values with the floating inputs in float32 (with_floating_dtype);
//   finite   (only when asked for: --variant finite) as edge with finite specials only: 0, -0,
//            +-1e300, +-1e-310, so that no NaN or inf hides what a row does with the others;
//   finite32 (only when asked for) the same in float32: 0, -0, +-3e38, +-1e-40 (subnormal).
// One line per case: {"op", "sample", "variant", "args", "inputs", "requires_grad", "outputs",
// "cotangents", "grads"} (tensors as {"dtype", "shape", "values"}, null where undefined), with
// "error" (forward raised) or "backward_error" (the vjp raised) instead of what is missing.
//   parity_dump [--op NAME]... [--variant random|edge|float32|finite|finite32]... > dump.jsonl
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "dtensor/ops/ops_registry.h"
#include "tests/ops/parity/parity_case.h"

namespace dt = dtensor;
namespace parity = dtensor::test::parity;
using parity::json;

namespace {

// The specials of the edge variant, in the order input 0 gets them.
constexpr double kSpecials[] = {0.0,
                                -0.0,
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(),
                                1e300,
                                1e-310};
constexpr double kFiniteSpecials[] = {0.0, -0.0, 1e300, -1e300, 1e-310, -1e-310};
constexpr double kFinite32Specials[] = {0.0, -0.0, 3e38, -3e38, 1e-40, -1e-40};

// The specials rotated by the input's index at positions 0.., then a tie.
template <size_t N>
dt::Tensor with_specials(const dt::Tensor& t, size_t input_index, const double (&specials)[N]) {
  if (!dt::is_floating(t.dtype())) return t;
  std::vector<double> v = t.to_vector<double>();
  for (size_t j = 0; j < N && j < v.size(); ++j) v[j] = specials[(j + input_index) % N];
  if (v.size() > N + 1) v[N + 1] = v[N];
  return dt::from_vector<double>(v, t.shape()).to(t.dtype());
}

json tensors_json(const std::vector<dt::Tensor>& ts) {
  json a = json::array();
  for (const dt::Tensor& t : ts) a.push_back(parity::tensor_json(t));
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  std::set<std::string> only;
  std::vector<std::string> variants;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--op") == 0) only.insert(argv[i + 1]);
    if (std::strcmp(argv[i], "--variant") == 0) variants.push_back(argv[i + 1]);
  }
  if (variants.empty()) variants = {"random", "edge", "float32"};
  const dt::Registry& reg = dt::registered_ops();
  int64_t cases = 0, ops = 0;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.samples || (!only.empty() && !only.count(name))) continue;
    ++ops;
    const std::vector<dt::OpSample> samples = op.samples(1);
    for (size_t si = 0; si < samples.size(); ++si) {
      for (const std::string& variant : variants) {
        const bool f32 = variant == "float32" || variant == "finite32";
        const dt::OpSample call =
            f32 ? dt::test::with_floating_dtype(samples[si], dt::kFloat32) : samples[si];
        bool any_floating = false;
        std::vector<dt::Tensor> x;
        for (size_t i = 0; i < call.inputs.size(); ++i) {
          dt::Tensor t = dt::test::sample_values(call.inputs[i], 100 * si + i + 1, true);
          any_floating |= dt::is_floating(t.dtype());
          if (variant == "edge") t = with_specials(t, i, kSpecials);
          if (variant == "finite") t = with_specials(t, i, kFiniteSpecials);
          if (variant == "finite32") t = with_specials(t, i, kFinite32Specials);
          x.push_back(t);
        }
        // Without a floating input the edge and float32 variants repeat the random one.
        if (!any_floating && variant != "random") continue;
        json c = {{"op", name}, {"sample", si}, {"variant", variant}};
        c["args"] = json::array();
        for (const dt::ArgValue& a : call.args) c["args"].push_back(parity::arg_json(a));
        c["inputs"] = tensors_json(x);
        c["requires_grad"] = json::array();
        for (const dt::Tensor& t : x) {
          c["requires_grad"].push_back(op.differentiable && dt::is_floating(t.dtype()));
        }
        const parity::CaseResult r = parity::run_case(op, x, call.args);
        if (r.error) {
          c["error"] = *r.error;
        } else {
          c["outputs"] = tensors_json(r.outputs);
          c["cotangents"] = tensors_json(r.cotangents);
          if (r.backward_error) {
            c["backward_error"] = *r.backward_error;
          } else {
            c["grads"] = tensors_json(r.grads);
          }
        }
        std::cout << c.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
        ++cases;
      }
    }
  }
  std::fprintf(stderr, "parity_dump: %lld ops, %lld cases\n", static_cast<long long>(ops),
               static_cast<long long>(cases));
  return 0;
}
