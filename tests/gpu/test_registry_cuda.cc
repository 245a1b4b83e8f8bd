// Every registered op on CUDA against the CPU, driven by the registry (OpInfo::samples): for each
// op and each sample call it registers (at world 1), in the dtypes the sample registers and, when
// it has floating inputs, with them also in float32, float16 and bfloat16 (a variant the CPU op
// rejects with dtensor::Error is one the op does not support: skipped), the op runs through
// dispatch on local DTensors of CUDA tensors and of CPU tensors holding the same values. Every
// output must match the CPU one (exact for integer and bool outputs; floating within
// gpu_test_util.h's rtol for the dtype, see close_to_cpu), and for a differentiable op so must
// the gradient autograd computes for every floating input (the upstream gradients are the same
// values on both devices).
//
// Floating inputs are distinct values evenly spaced over the sample's [low, high], shuffled: no
// ties, so sort / topk / argmax / cummax pick the same indices on both devices even after
// rounding to bfloat16 (the samples are small). Integer and bool inputs (indices, masks) are the
// integers the other registry suites draw (tests/common/op_samples.h).
//
// An op with no CUDA kernel is listed in kNoCudaKernel with the reason; the test fails for an op
// that is neither checked nor listed, and for a listed op that runs on CUDA (a stale entry).
#include <absl/strings/str_join.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "tests/common/op_samples.h"
#include "tests/gpu/gpu_test_util.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::DType;
using dt::Tensor;

namespace {

struct NoCuda {
  std::string_view op;
  std::string_view reason;
};
// Ops without a CUDA kernel, with the reason. Empty: every registered op computes on CUDA (its
// family's .cu kernels, cuBLAS for the matmul family, the tensor layer's CUDA copies for the
// view family, and compositions of those for attention, einsum and the copy ops).
constexpr std::array<NoCuda, 0> kNoCudaKernel = {};

const NoCuda* no_cuda_entry(std::string_view op) {
  for (const NoCuda& e : kNoCudaKernel) {
    if (e.op == op) return &e;
  }
  return nullptr;
}

// A CPU tensor for `in`: see the file comment.
Tensor sample_input(const dt::SampleInput& in, uint64_t seed) {
  if (!dt::is_floating(in.meta.dtype)) return dt::test::sample_values(in, seed, /*reals=*/false);
  const size_t n = static_cast<size_t>(dt::shape_numel(in.meta.shape));
  std::vector<size_t> rank(n);
  std::iota(rank.begin(), rank.end(), size_t{0});
  std::mt19937_64 gen(seed);
  std::shuffle(rank.begin(), rank.end(), gen);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] =
        in.low + (in.high - in.low) * (static_cast<double>(rank[i]) + 0.5) / static_cast<double>(n);
  }
  return dt::from_vector<double>(v, in.meta.shape).to(in.meta.dtype);
}

// The outputs of one run and the gradients of its floating inputs (undefined where none).
struct Run {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;
};

// `op` on local DTensors of `inputs` placed on `device` (CPU inputs are cloned, so an in-place op
// leaves the caller's tensors alone). With `grad`: the floating inputs require grad (an in-place
// op gets a non-leaf self, as in PyTorch), and the floating outputs are backpropagated with
// deterministic upstream gradients.
Run run_op(const dt::OpInfo& op, const std::vector<Tensor>& inputs,
           absl::Span<const dt::ArgValue> args, dt::Device device, bool grad) {
  std::vector<DTensor> leaves;
  for (const Tensor& t : inputs) {
    DTensor d = dt::local_dtensor(device.is_cuda() ? t.to(device) : t.clone());
    if (grad && dt::is_floating(t.dtype())) d.requires_grad_();
    leaves.push_back(d);
  }
  std::vector<DTensor> in = leaves;
  if (op.inplace && in[0].requires_grad()) in[0] = dt::mul(in[0], dt::Scalar(1.0));
  std::vector<const DTensor*> ptrs;
  for (const DTensor& t : in) ptrs.push_back(&t);
  const dt::DTensorList outs = dt::dispatch_multi(op, ptrs, args);
  Run r;
  for (const DTensor& o : outs) r.outputs.push_back(o.to_local());
  if (!grad) return r;
  std::vector<DTensor> roots, upstream;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!dt::is_floating(outs[o].dtype()) || !outs[o].requires_grad()) continue;
    const Tensor v = dt::gpu_test::make_input(outs[o].shape(), outs[o].dtype(), 900 + o);
    roots.push_back(outs[o]);
    upstream.push_back(dt::local_dtensor(device.is_cuda() ? v.to(device) : v));
  }
  if (roots.empty()) return r;
  dt::autograd::backward(roots, upstream);
  for (const DTensor& l : leaves) {
    r.grads.push_back(l.requires_grad() && l.grad().defined() ? l.grad().to_local() : Tensor());
  }
  return r;
}

// "" when the CUDA result `g` matches the CPU result `c`, else what differs. Floating: |g - c| <=
// rtol * 4 * (|c| + max|c| / 4), the rtol of gpu_test_util.h's table (the 4 as its row kernels
// take: these are short sums accumulated in a different order); the max|c| term is the floor a
// sum or difference of terms as large as the largest output keeps (its last bits are lost on
// either device). Integer and bool: exact. NaN matches NaN.
std::string close_to_cpu(const Tensor& g, const Tensor& c) {
  if (!g.defined() || !c.defined()) {
    return g.defined() == c.defined() ? "" : std::string("defined on one device only");
  }
  if (!g.device().is_cuda()) return "not on the CUDA device";
  if (!(g.sizes() == c.sizes()) || g.dtype() != c.dtype()) {
    return "cuda " + dt::shape_str(g.sizes()) + " " + std::string(dt::dtype_name(g.dtype())) +
           " vs cpu " + dt::shape_str(c.sizes()) + " " + std::string(dt::dtype_name(c.dtype()));
  }
  const std::vector<double> gv = g.to(dt::Device()).contiguous().to_vector<double>();
  const std::vector<double> cv = c.contiguous().to_vector<double>();
  const double rtol = dt::gpu_test::rtol_for(c.dtype()) * 4;
  double floor = 0;
  for (double x : cv) {
    if (std::isfinite(x)) floor = std::max(floor, std::fabs(x) / 4);
  }
  for (size_t i = 0; i < gv.size(); ++i) {
    const double a = gv[i], b = cv[i];
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
    if (std::fabs(a - b) <= rtol * (std::fabs(b) + floor)) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "element %zu: cuda %.17g vs cpu %.17g (%s)", i, a, b,
                  std::string(dt::dtype_name(c.dtype())).c_str());
    return buf;
  }
  return "";
}

std::string dtypes_str(const dt::OpSample& s) {
  std::vector<std::string> d;
  for (const dt::SampleInput& in : s.inputs) d.emplace_back(dt::dtype_name(in.meta.dtype));
  return absl::StrJoin(d, ",");
}

}  // namespace

TEST_CASE("every registered op on CUDA matches the CPU, forward and backward", "[gpu][registry]") {
  const dt::Registry& reg = dt::registered_ops();
  const dt::Device gpu = dt::gpu_test::kGpu;
  int64_t ops = 0, runs = 0, backward_runs = 0, rejected = 0;
  std::vector<std::string> failures, untested, stale;
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    const NoCuda* listed = no_cuda_entry(name);
    const std::vector<dt::OpSample> calls =
        op.samples ? op.samples(1) : std::vector<dt::OpSample>{};
    bool checked = false;
    for (size_t si = 0; si < calls.size(); ++si) {
      std::vector<dt::OpSample> variants = {calls[si]};
      bool has_floating = false;
      for (const dt::SampleInput& in : calls[si].inputs)
        has_floating |= dt::is_floating(in.meta.dtype);
      if (has_floating) {
        for (DType d : {dt::kFloat32, dt::kFloat16, dt::kBFloat16}) {
          dt::OpSample v = dt::test::with_floating_dtype(calls[si], d);
          if (dtypes_str(v) != dtypes_str(calls[si])) variants.push_back(std::move(v));
        }
      }
      for (const dt::OpSample& call : variants) {
        const std::string what =
            name + " sample " + std::to_string(si) + " (" + dtypes_str(call) + ")";
        std::vector<Tensor> x;
        for (size_t i = 0; i < call.inputs.size(); ++i) {
          x.push_back(sample_input(call.inputs[i], 1000 * si + i + 1));
        }
        const bool grad = op.differentiable && op.backward;
        Run want;
        try {
          want = run_op(op, x, call.args, dt::Device(), grad);
        } catch (const dt::Error&) {
          ++rejected;  // not a dtype the op supports
          continue;
        }
        Run got;
        try {
          got = run_op(op, x, call.args, gpu, grad);
        } catch (const std::exception& e) {
          if (listed == nullptr) failures.push_back(what + ": threw on CUDA: " + e.what());
          continue;
        }
        if (listed != nullptr) {
          stale.push_back(name);
          continue;
        }
        checked = true;
        ++runs;
        if (got.outputs.size() != want.outputs.size() || got.grads.size() != want.grads.size()) {
          failures.push_back(what + ": " + std::to_string(got.outputs.size()) + " outputs and " +
                             std::to_string(got.grads.size()) + " gradients on CUDA, " +
                             std::to_string(want.outputs.size()) + " and " +
                             std::to_string(want.grads.size()) + " on the CPU");
          continue;
        }
        for (size_t o = 0; o < want.outputs.size(); ++o) {
          const std::string diff = close_to_cpu(got.outputs[o], want.outputs[o]);
          if (!diff.empty())
            failures.push_back(what + " output " + std::to_string(o) + ": " + diff);
        }
        if (!want.grads.empty()) ++backward_runs;
        for (size_t i = 0; i < want.grads.size(); ++i) {
          const std::string diff = close_to_cpu(got.grads[i], want.grads[i]);
          if (!diff.empty())
            failures.push_back(what + " grad of input " + std::to_string(i) + ": " + diff);
        }
      }
    }
    if (checked) {
      ++ops;
    } else if (listed == nullptr) {
      untested.push_back(name);
    }
  }
  std::printf(
      "registry on CUDA: %lld of %lld ops checked, %lld runs (%lld with backward), %lld "
      "dtype variants rejected by the CPU op, %zu listed without a CUDA kernel\n",
      static_cast<long long>(ops), static_cast<long long>(reg.size()), static_cast<long long>(runs),
      static_cast<long long>(backward_runs), static_cast<long long>(rejected),
      kNoCudaKernel.size());
  INFO("failures:\n" << absl::StrJoin(failures, "\n"));
  CHECK(failures.empty());
  INFO("ops neither checked nor listed in kNoCudaKernel: " << absl::StrJoin(untested, ", "));
  CHECK(untested.empty());
  INFO("ops listed in kNoCudaKernel that ran on CUDA: " << absl::StrJoin(stale, ", "));
  CHECK(stale.empty());
}
