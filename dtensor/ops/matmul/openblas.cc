// Loads OpenBLAS with its kernels chosen from the CPU's features (blas_info.h says why).
#include "dtensor/ops/matmul/detail/openblas.h"

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <dirent.h>
#include <dlfcn.h>

#include <array>
#include <cstdlib>

#include "dtensor/collectives/debug_log.h"
#include "dtensor/ops/matmul/detail/cpu_features.h"
#include "dtensor/ops/matmul/detail/onednn.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace detail {

namespace {

// The soname every distribution ships (Debian: libopenblas0-pthread / -openmp / -serial, chosen
// by update-alternatives).
constexpr const char* kLibrary = "libopenblas.so.0";

template <typename F>
F symbol(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  DT_CHECK(p != nullptr, "[blas] %s has no symbol %s (expected OpenBLAS 0.3 or later)", kLibrary,
           name);
  return reinterpret_cast<F>(p);
}

// Whether this process runs one thread: setenv is only safe then (another thread's getenv
// may read the environment while it is rewritten). Linux: /proc/self/task lists the threads.
bool single_threaded() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return false;
  int threads = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++threads;
  }
  closedir(dir);
  return threads == 1;
}

// dlopen by soname, else by the path configure found (an OpenBLAS outside the loader's path).
void* open_library(int flags, std::string& error) {
  // dlerror() is null after a failed RTLD_NOLOAD (nothing to report: it is not loaded).
  const auto last_error = [] {
    const char* e = dlerror();
    return std::string(e != nullptr ? e : "not loaded");
  };
  void* handle = dlopen(kLibrary, flags);
  if (handle != nullptr) return handle;
  error = last_error();
#ifdef DTENSOR_OPENBLAS_PATH
  handle = dlopen(DTENSOR_OPENBLAS_PATH, flags);
  if (handle == nullptr) absl::StrAppend(&error, "; ", last_error());
#endif
  return handle;
}

OpenBlas load() {
  OpenBlas lib;
  std::string error;
  // A program that links OpenBLAS itself has loaded it already: its kernels were chosen then.
  void* handle = open_library(RTLD_NOW | RTLD_NOLOAD, error);
  if (handle != nullptr) {
    lib.chosen_by = "OpenBLAS (loaded by the program before dtensor)";
  } else {
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    std::string_view core;
    if (user != nullptr) {
      lib.chosen_by = absl::StrCat("OPENBLAS_CORETYPE=", user);
    } else if (!single_threaded()) {
      // Loaded late (dtensor itself loaded into a running, threaded host): the environment
      // cannot be changed safely, so OpenBLAS decides.
      lib.chosen_by = "OpenBLAS (dtensor loaded it after the process started threads)";
    } else {
      const CpuFeatures f = detect_cpu_features();
      core = choose_openblas_core(f);
      lib.chosen_by = core.empty() ? std::string("OpenBLAS")
                      : f.avx512   ? std::string("dtensor (AVX-512)")
                                   : std::string("dtensor (AVX2)");
    }
    // Set only for the load: OpenBLAS reads it in its constructor, and child processes should
    // see the user's environment.
    if (!core.empty()) setenv("OPENBLAS_CORETYPE", std::string(core).c_str(), 1);
    handle = open_library(RTLD_NOW | RTLD_LOCAL, error);
    if (!core.empty()) unsetenv("OPENBLAS_CORETYPE");
    DT_CHECK(handle != nullptr,
             "[blas] cannot load %s (%s); dtensor's CPU GEMMs need OpenBLAS (Debian: "
             "libopenblas0, installed by scripts/install_deps.sh)",
             kLibrary, error);
  }
  lib.sgemm = symbol<decltype(lib.sgemm)>(handle, "cblas_sgemm");
  lib.dgemm = symbol<decltype(lib.dgemm)>(handle, "cblas_dgemm");
  lib.sgemv = symbol<decltype(lib.sgemv)>(handle, "cblas_sgemv");
  lib.dgemv = symbol<decltype(lib.dgemv)>(handle, "cblas_dgemv");
  lib.set_num_threads = symbol<decltype(lib.set_num_threads)>(handle, "openblas_set_num_threads");
  lib.get_num_threads = symbol<decltype(lib.get_num_threads)>(handle, "openblas_get_num_threads");
  lib.get_corename = symbol<decltype(lib.get_corename)>(handle, "openblas_get_corename");
  lib.get_config = symbol<decltype(lib.get_config)>(handle, "openblas_get_config");
  return lib;
}

// Loads the library while the process is still single-threaded (see load()), as linking it
// would; a failure is raised again at the first use.
[[maybe_unused]] const bool g_loaded_early = [] {
  try {
    (void)openblas();
  } catch (const Error&) {
  }
  return true;
}();

// Logged once when the "config" topic turns on.
[[maybe_unused]] const bool g_reporter = [] {
  add_config_reporter([] { return absl::StrCat("GEMM: ", blas_info_str()); });
  return true;
}();

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // GCC's builtins read CPUID and check that the OS saves the AVX / AVX-512 registers (XCR0).
  __builtin_cpu_init();
  f.x86 = true;
  f.amd = __builtin_cpu_is("amd");
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2_fma && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
#endif
  return f;
}

std::string_view choose_openblas_core(const CpuFeatures& f) {
  // SkylakeX's kernels need AVX-512 F/BW/VL/DQ and nothing later (Cooperlake's add only bf16
  // GEMM, which dtensor does not call). Measured on AMD Zen 5 (docs/PERFORMANCE.md): SkylakeX
  // ~2x OpenBLAS 0.3.21's own choice there (Haswell). ARM and others: OpenBLAS's detection (its
  // fallback, ARMV8, is a NEON kernel, not a scalar one).
  if (f.avx512) return "SkylakeX";
  if (f.avx2_fma) return f.amd ? "Zen" : "Haswell";
  return "";
}

bool is_generic_core(std::string_view core, const CpuFeatures& f) {
  const std::string c = absl::AsciiStrToLower(std::string(core));
  static constexpr std::array<std::string_view, 3> kAvx512 = {"skylakex", "cooperlake",
                                                              "sapphirerapids"};
  static constexpr std::array<std::string_view, 5> kAvx2 = {"haswell", "zen", "skylakex",
                                                            "cooperlake", "sapphirerapids"};
  auto in = [&](auto& set) {
    for (std::string_view s : set) {
      if (c == s) return true;
    }
    return false;
  };
  if (f.avx512) return !in(kAvx512);
  if (f.avx2_fma) return !in(kAvx2);
  return false;
}

const OpenBlas& openblas() {
  static const OpenBlas lib = load();  // a throwing load is retried at the next call
  return lib;
}

}  // namespace detail

BlasInfo blas_info() {
  const detail::OpenBlas& lib = detail::openblas();
  BlasInfo info;
  info.library = std::string(absl::StripAsciiWhitespace(lib.get_config()));
  info.core = std::string(absl::StripAsciiWhitespace(lib.get_corename()));
  info.chosen_by = lib.chosen_by;
  info.threads = lib.get_num_threads();
  info.bf16_gemm = detail::bf16_gemm_info_str();
  const detail::CpuFeatures f = detail::detect_cpu_features();
  if (detail::is_generic_core(info.core, f)) {
    const std::string best(detail::choose_openblas_core(f));
    const bool user = absl::StartsWith(info.chosen_by, "OPENBLAS_CORETYPE=");
    info.warning = absl::StrCat(
        "OpenBLAS runs its ", info.core, " kernels (chosen by ", info.chosen_by, ") on a CPU with ",
        f.avx512 ? "AVX-512" : "AVX2", ": GEMMs run several times slower than the CPU allows; ",
        user ? absl::StrCat("unset OPENBLAS_CORETYPE or set it to ", best)
             : absl::StrCat("set OPENBLAS_CORETYPE=", best,
                            " in the environment before the program starts (OpenBLAS reads it "
                            "once, when it loads)"));
  }
  return info;
}

std::string blas_info_str() {
  const BlasInfo i = blas_info();
  return absl::StrCat(i.library, ", core ", i.core, " (chosen by ", i.chosen_by, "), ", i.threads,
                      i.threads == 1 ? " thread" : " threads", ", bf16 GEMM: ", i.bf16_gemm,
                      i.warning.empty() ? "" : absl::StrCat("; WARNING: ", i.warning));
}

}  // namespace dtensor
