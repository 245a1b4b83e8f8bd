// The machine's floating-point ceiling for one thread: fused multiply-adds on the widest vectors
// the CPU has (AVX-512, else AVX2 + FMA, else 128-bit multiply and add), in independent chains so
// that latency does not limit them. The GEMM rows of bench_kernels are reported as a fraction of
// it.
#pragma once

namespace dtensor::bench {

// GFLOP/s of one thread (an FMA counts 2), measured for about `seconds`; `f64` for doubles.
double fma_peak_gflops(bool f64, double seconds = 0.2);
// The bfloat16 ceiling: AVX-512 BF16's dot products (two bf16 products per float32 lane and
// instruction, what oneDNN's bf16 GEMM runs), GFLOP/s of one thread; 0 without AVX-512 BF16.
double bf16_dot_peak_gflops(double seconds = 0.2);
// "AVX-512", "AVX2+FMA" or "128-bit": the vectors fma_peak_gflops used.
const char* fma_peak_isa();

}  // namespace dtensor::bench
