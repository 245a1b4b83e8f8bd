// The CPU GEMM library's kernel choice (dtensor/ops/matmul/blas_info.h): the choice from CPU
// features as a pure function, and on this machine that the kernel in use is not a generic fallback
// for its CPU (a configuration check, never a timing). ctest runs the second case twice: as the
// environment has it, and with OPENBLAS_CORETYPE removed (blas_info_unset: dtensor's own
// choice, whatever the machine exports). The "[forced]" case runs from its own ctest entry with
// OPENBLAS_CORETYPE=Prescott: the user's setting is kept and reported as a warning.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/ops/config_str.h"
#include "dtensor/ops/matmul/blas_info.h"
#include "dtensor/ops/matmul/detail/cpu_features.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
using dt::detail::CpuFeatures;

namespace {

CpuFeatures features(bool amd, bool avx2, bool avx512) {
  CpuFeatures f;
  f.x86 = true;
  f.amd = amd;
  f.avx2_fma = avx2;
  f.avx512 = avx512;
  return f;
}

// The "config" log lines printed when the topic turns on.
std::vector<std::string> config_lines() {
  (void)dt::world_rank();  // initialises MPI: config lines wait for it (they carry the rank)
  std::vector<std::string> lines;
  const dt::LogSink old = dt::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  dt::set_log("config");
  dt::set_log("");
  dt::set_log_sink(old);
  return lines;
}

}  // namespace

TEST_CASE("the OpenBLAS core is chosen from the CPU's features") {
  CHECK(dt::detail::choose_openblas_core(features(false, true, true)) == "SkylakeX");
  CHECK(dt::detail::choose_openblas_core(features(true, true, true)) == "SkylakeX");
  CHECK(dt::detail::choose_openblas_core(features(false, true, false)) == "Haswell");
  CHECK(dt::detail::choose_openblas_core(features(true, true, false)) == "Zen");
  CHECK(dt::detail::choose_openblas_core(features(false, false, false)).empty());
  CHECK(dt::detail::choose_openblas_core(CpuFeatures()).empty());  // not x86: OpenBLAS decides
  // What OpenBLAS 0.3.21 picks on CPUs it does not know is generic for them.
  const CpuFeatures avx512 = features(false, true, true), avx2 = features(true, true, false);
  for (const char* core : {"Prescott", "Core2", "Nehalem", "Sandybridge", "Haswell", "Zen"}) {
    CAPTURE(core);
    CHECK(dt::detail::is_generic_core(core, avx512));
  }
  for (const char* core : {"SkylakeX", "COOPERLAKE", "SapphireRapids"}) {
    CAPTURE(core);
    CHECK_FALSE(dt::detail::is_generic_core(core, avx512));
    CHECK_FALSE(dt::detail::is_generic_core(core, avx2));
  }
  CHECK(dt::detail::is_generic_core("Prescott", avx2));
  CHECK_FALSE(dt::detail::is_generic_core("Haswell", avx2));
  CHECK_FALSE(dt::detail::is_generic_core("Zen", avx2));
  CHECK_FALSE(dt::detail::is_generic_core("Prescott", features(false, false, false)));
}

TEST_CASE("the GEMM kernel in use is not a generic fallback for this CPU") {
  const CpuFeatures f = dt::detail::detect_cpu_features();
  const dt::BlasInfo info = dt::blas_info();
  INFO(dt::config_str());
  CHECK(info.library.find("OpenBLAS") != std::string::npos);
  CHECK_FALSE(info.core.empty());
  CHECK(info.threads >= 1);
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user == nullptr) {
    // dtensor chose on a CPU with AVX2 / AVX-512; OpenBLAS's own detection elsewhere.
    CHECK(info.chosen_by == (f.avx512     ? "dtensor (AVX-512)"
                             : f.avx2_fma ? "dtensor (AVX2)"
                                          : "OpenBLAS"));
    CHECK_FALSE(dt::detail::is_generic_core(info.core, f));
    CHECK(info.warning.empty());
  } else {
    CHECK(info.chosen_by == std::string("OPENBLAS_CORETYPE=") + user);
    CHECK(info.warning.empty() == !dt::detail::is_generic_core(info.core, f));
  }
  // The kernel computes: a GEMM through the loaded library.
  const dt::Tensor a = dt::arange(6, dt::TensorOptions(dt::kFloat32)).reshape({2, 3});
  const dt::Tensor c = dt::matmul(a, a.transpose(0, 1));
  CHECK(c.to_vector<float>() == std::vector<float>{5, 14, 14, 50});
  // The "config" log topic names the library and kernel.
  const std::vector<std::string> lines = config_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("[dtensor rank 0 config] GEMM: OpenBLAS") == 0);
  CHECK(lines[0].find("core " + info.core) != std::string::npos);
}

TEST_CASE("a generic kernel forced by OPENBLAS_CORETYPE is kept and reported", "[.][forced]") {
  const CpuFeatures f = dt::detail::detect_cpu_features();
  if (!f.avx2_fma) {
    WARN("this CPU has no AVX2: Prescott is not a fallback for it, nothing to report");
    std::exit(77);  // ctest: skipped
  }
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  REQUIRE(user != nullptr);
  REQUIRE(std::string(user) == "Prescott");
  const dt::BlasInfo info = dt::blas_info();
  CHECK(info.core == "Prescott");  // the user's setting is respected
  CHECK(info.chosen_by == "OPENBLAS_CORETYPE=Prescott");
  CHECK(info.warning.find("Prescott kernels") != std::string::npos);
  const std::vector<std::string> lines = config_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("WARNING: OpenBLAS runs its Prescott kernels") != std::string::npos);
  CHECK(dt::config_str().find("WARNING") != std::string::npos);
}
