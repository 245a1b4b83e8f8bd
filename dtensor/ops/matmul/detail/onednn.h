// oneDNN, the CPU bfloat16 GEMM: loaded by dtensor at run time (dlopen, as OpenBLAS is:
// blas_info.h), used where its JIT runs the CPU's bf16 dot-product instructions.
//
// Why: without it a bf16 GEMM widens both operands to float32, runs an sgemm and rounds back,
// at float32's speed and with the widening passes on top. oneDNN's bf16 kernels (AVX-512 BF16's
// vdpbf16ps: two bf16 products per float32 lane) ran 2.0-2.5x faster than that on an AMD EPYC
// Zen 5 at one thread (the GEMM shapes of bench_kernels), with the same accuracy: the products of
// bf16 values are exact in float32 and both accumulate in float32. On a CPU without AVX-512 BF16,
// oneDNN 2.6 emulates it (avx512_core: 0.4x the sgemm path) or has no bf16 matmul at all (AVX2),
// so the sgemm path stays there. Internal to the ops library (oneDNN's types are only declared
// here; onednn.cc includes its C header).
#pragma once

#include <cstdint>
#include <string>

struct dnnl_primitive;
struct dnnl_memory;
struct dnnl_stream;

namespace dtensor::detail {

enum class Bf16Gemm { kSgemm, kOnednn };

// The backend of the next bfloat16 GEMM: DTENSOR_BF16_GEMM=onednn or =sgemm (read at every
// call, so a test can switch it between ops), else oneDNN when it loads and its ISA has AVX-512
// BF16, else sgemm. Raises "[matmul] ..." for another value of the variable, or for =onednn when
// oneDNN cannot be loaded.
Bf16Gemm bf16_gemm_backend();

// One line for config_str(): what runs bf16 GEMMs and why, e.g. "oneDNN 2.6.3 (ISA
// avx512_core_bf16, chosen by dtensor)" or "OpenBLAS sgemm on operands widened to float32
// (oneDNN not loaded: ...)".
std::string bf16_gemm_info_str();

// c = alpha * a @ b + beta * c for bfloat16 a [n, k], b [k, m] and a contiguous float32 c
// [n, m]; a and b are row-major views as blas_gemm reads them (trans: the transpose of a
// row-major matrix with leading dimension ld). Built once (oneDNN's primitive), run per batch.
// Raises "[matmul] oneDNN ..." on any oneDNN failure. beta == 0: c is only written.
class OnednnBf16Gemm {
 public:
  OnednnBf16Gemm(int64_t n, int64_t m, int64_t k, bool trans_a, int64_t lda, bool trans_b,
                 int64_t ldb, float alpha, float beta);
  ~OnednnBf16Gemm();
  OnednnBf16Gemm(const OnednnBf16Gemm&) = delete;
  OnednnBf16Gemm& operator=(const OnednnBf16Gemm&) = delete;

  void run(const void* a, const void* b, float* c);

 private:
  void release() noexcept;  // destroys what was created (the destructor and a failed constructor)

  dnnl_primitive* primitive_ = nullptr;
  dnnl_stream* stream_ = nullptr;
  dnnl_memory* mem_[3] = {nullptr, nullptr, nullptr};  // a, b, c
};

}  // namespace dtensor::detail
