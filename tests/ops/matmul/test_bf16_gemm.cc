// The CPU bfloat16 GEMM backends (dtensor/ops/matmul/detail/onednn.h): oneDNN and the widen + sgemm
// path, each forced through DTENSOR_BF16_GEMM (read at every GEMM), equal a float64 reference
// within bf16's rounding at odd, transposed, strided, broadcast and empty shapes, through mm,
// matmul, bmm, addmm, baddbmm and linear; the two agree with each other within one bf16 rounding;
// config_str() names the backend that runs. Where oneDNN cannot run bf16 GEMMs (not installed,
// or an ISA without a bf16 matmul) and dtensor does not choose it, the oneDNN runs are skipped
// (the sgemm ones still run).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/ops/config_str.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/detail/onednn.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "tests/common/env_test_util.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
using dt::Tensor;
using dt::test::rand_tensor;

namespace {

// Sets DTENSOR_BF16_GEMM for the scope ("" unsets it), restoring the old value after.
class ForceBackend : public dt::test::ScopedEnv {
 public:
  explicit ForceBackend(const char* value) : ScopedEnv("DTENSOR_BF16_GEMM", value) {}
};

// Whether oneDNN runs bf16 GEMMs here: always where dtensor chooses it; else (no AVX-512 BF16)
// where it loads and has a bf16 matmul for the ISA (oneDNN 2.6 has none on AVX2).
bool onednn_usable() {
  {
    ForceBackend force("");
    if (dt::detail::bf16_gemm_backend() == dt::detail::Bf16Gemm::kOnednn) return true;
  }
  ForceBackend force("onednn");
  try {
    (void)dt::mm(rand_tensor({2, 3}, dt::kBFloat16, 1), rand_tensor({3, 2}, dt::kBFloat16, 2));
    return true;
  } catch (const dt::Error& e) {
    WARN("oneDNN cannot run bf16 GEMMs here: " << e.what());
    return false;
  }
}

// One product under test: its bf16 result and the same op on float64 copies of the operands
// (the reference), and on their absolute values (the sum of |a_ik * b_kj|, which bounds the
// rounding of a float32 accumulation).
struct Case {
  std::string name;
  std::function<Tensor(const std::function<Tensor(const Tensor&)>&)> run;  // op on mapped inputs
};

Tensor as_f64(const Tensor& x) {
  return x.to(dt::kFloat64);
}
Tensor abs_f64(const Tensor& x) {
  return dt::abs(x.to(dt::kFloat64));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const auto mm_case = [&](std::string name, Tensor a, Tensor b) {
    out.push_back({std::move(name), [a, b](const auto& f) { return dt::mm(f(a), f(b)); }});
  };
  const auto bf = dt::kBFloat16;
  mm_case("mm odd 33x77x19", rand_tensor({33, 77}, bf, 1), rand_tensor({77, 19}, bf, 2));
  mm_case("mm 1x1x1", rand_tensor({1, 1}, bf, 3), rand_tensor({1, 1}, bf, 4));
  mm_case("mm 64x300x130", rand_tensor({64, 300}, bf, 5), rand_tensor({300, 130}, bf, 6));
  mm_case("mm a transposed", rand_tensor({41, 23}, bf, 7).transpose(0, 1),
          rand_tensor({41, 17}, bf, 8));
  mm_case("mm b transposed", rand_tensor({23, 41}, bf, 9),
          rand_tensor({17, 41}, bf, 10).transpose(0, 1));
  mm_case("mm both transposed", rand_tensor({41, 23}, bf, 11).transpose(0, 1),
          rand_tensor({17, 41}, bf, 12).transpose(0, 1));
  mm_case("mm narrowed (leading dim > row)", rand_tensor({29, 50}, bf, 13).narrow(1, 3, 31),
          rand_tensor({31, 40}, bf, 14).narrow(1, 5, 21));
  mm_case("mm column stride 2 (copied)", rand_tensor({19, 40}, bf, 15).slice(1, 0, 40, 2),
          rand_tensor({20, 11}, bf, 16));
  mm_case("mm expanded row (copied)", rand_tensor({1, 13}, bf, 17).expand({9, 13}),
          rand_tensor({13, 7}, bf, 18));
  mm_case("mm K = 0", rand_tensor({5, 0}, bf, 19), rand_tensor({0, 6}, bf, 20));
  mm_case("mm M = 0", rand_tensor({0, 8}, bf, 21), rand_tensor({8, 6}, bf, 22));
  mm_case("mm N = 0", rand_tensor({5, 8}, bf, 23), rand_tensor({8, 0}, bf, 24));
  {
    const Tensor a = rand_tensor({2, 3, 9, 14}, bf, 25), b = rand_tensor({3, 14, 6}, bf, 26);
    out.push_back(
        {"matmul broadcast batch", [a, b](const auto& f) { return dt::matmul(f(a), f(b)); }});
  }
  {
    const Tensor a = rand_tensor({4, 11, 9}, bf, 27), b = rand_tensor({4, 5, 11}, bf, 28);
    out.push_back({"bmm permuted", [a, b](const auto& f) {
                     return dt::bmm(f(a).transpose(1, 2), f(b).transpose(1, 2));
                   }});
  }
  {
    const Tensor bias = rand_tensor({7}, bf, 29), a = rand_tensor({12, 10}, bf, 30),
                 b = rand_tensor({10, 7}, bf, 31);
    out.push_back({"addmm beta 0.5 alpha 2", [bias, a, b](const auto& f) {
                     return dt::addmm(f(bias), f(a), f(b), 0.5, 2.0);
                   }});
  }
  {
    const Tensor self = rand_tensor({3, 1, 6}, bf, 32), a = rand_tensor({3, 8, 5}, bf, 33),
                 b = rand_tensor({3, 5, 6}, bf, 34);
    out.push_back({"baddbmm beta 1.5 alpha 0.5", [self, a, b](const auto& f) {
                     return dt::baddbmm(f(self), f(a), f(b), 1.5, 0.5);
                   }});
  }
  {
    const Tensor x = rand_tensor({2, 5, 24}, bf, 35), w = rand_tensor({10, 24}, bf, 36),
                 bias = rand_tensor({10}, bf, 37);
    out.push_back({"linear with bias",
                   [x, w, bias](const auto& f) { return dt::linear(f(x), f(w), f(bias)); }});
  }
  return out;
}

// Runs every case under `backend` and checks it against the float64 reference; returns the
// results.
std::vector<Tensor> run_all(const char* backend) {
  ForceBackend force(backend);
  std::vector<Tensor> results;
  const auto same = [](const Tensor& x) { return x; };
  for (const Case& c : cases()) {
    INFO(backend << ": " << c.name);
    const Tensor got = c.run(same);
    REQUIRE(got.dtype() == dt::kBFloat16);
    const Tensor want = c.run(as_f64);
    REQUIRE(got.sizes() == want.sizes());
    // |got - want| <= bf16's rounding of the result (2^-8 relative) plus float32 accumulation
    // (well under 1e-5 of sum |a b| at these K); alpha, beta and bias scale the bound by <= 2.
    const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    const std::vector<double> s = c.run(abs_f64).to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      INFO("element " << i << ": got " << g[i] << ", expected " << w[i]);
      CHECK(std::fabs(g[i] - w[i]) <= 4e-3 * std::fabs(w[i]) + 2e-5 * s[i] + 1e-30);
    }
    if (c.name == "mm K = 0") {
      CHECK(g == std::vector<double>(g.size(), 0.0));
    }
    results.push_back(got);
  }
  return results;
}

}  // namespace

TEST_CASE("bf16 GEMMs through the sgemm path equal a float64 reference") {
  (void)run_all("sgemm");
}

TEST_CASE("bf16 GEMMs through oneDNN equal a float64 reference and the sgemm path") {
  if (!onednn_usable()) return;  // skipped, with a warning
  const std::vector<Tensor> onednn = run_all("onednn");
  const std::vector<Tensor> sgemm = run_all("sgemm");
  const std::vector<Case> cs = cases();
  REQUIRE(onednn.size() == sgemm.size());
  for (size_t c = 0; c < onednn.size(); ++c) {
    INFO(cs[c].name);
    const std::vector<double> x = onednn[c].to_vector<double>(), y = sgemm[c].to_vector<double>();
    REQUIRE(x.size() == y.size());
    const std::vector<double> s = cs[c].run(abs_f64).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
      // The float32 sums differ only in order, so the bf16 results by at most one rounding.
      INFO("element " << i << ": oneDNN " << x[i] << ", sgemm " << y[i]);
      CHECK(std::fabs(x[i] - y[i]) <= 8e-3 * std::fabs(y[i]) + 2e-5 * s[i] + 1e-30);
    }
  }
}

TEST_CASE("config_str names the bf16 GEMM backend that runs") {
  {
    ForceBackend force("sgemm");
    CHECK(dt::detail::bf16_gemm_backend() == dt::detail::Bf16Gemm::kSgemm);
    CHECK_THAT(dt::config_str(), Catch::Contains("bf16 GEMM: OpenBLAS sgemm on operands widened "
                                                 "to float32 (chosen by DTENSOR_BF16_GEMM)"));
  }
  {
    ForceBackend force("");
    const bool onednn = dt::detail::bf16_gemm_backend() == dt::detail::Bf16Gemm::kOnednn;
    CHECK_THAT(dt::config_str(),
               Catch::Contains(onednn ? "bf16 GEMM: oneDNN " : "bf16 GEMM: OpenBLAS sgemm"));
    CHECK_THAT(dt::config_str(), Catch::Contains("chosen by dtensor"));
#if defined(__x86_64__)
    // AVX-512 BF16 (GCC names it avx512bf16) is what oneDNN's fast kernels need (unless the
    // user capped oneDNN's ISA).
    const bool capped =
        std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr || std::getenv("DNNL_MAX_CPU_ISA") != nullptr;
    if (onednn_usable() && __builtin_cpu_supports("avx512bf16") && !capped) CHECK(onednn);
#endif
  }
  if (onednn_usable()) {
    ForceBackend force("onednn");
    CHECK_THAT(dt::config_str(), Catch::Contains("bf16 GEMM: oneDNN 2."));
    CHECK_THAT(dt::config_str(), Catch::Contains("chosen by DTENSOR_BF16_GEMM"));
  }
  {
    ForceBackend force("mkl");
    CHECK_THROWS_WITH(dt::detail::bf16_gemm_backend(),
                      Catch::Contains("DTENSOR_BF16_GEMM=mkl: expected onednn or sgemm"));
  }
}
