// Internal: the plain-data interface between the Tensor-level code (distributions.cc) and the
// CUDA kernels (random_cuda.cu, or random_no_cuda.cc when CUDA is off). No library headers
// beyond the Philox ones, so the .cu file stays free of Abseil.
#pragma once

#include <cstdint>

namespace dtensor::detail {

inline constexpr int kRngMaxDims = 16;

// Element types, in the order of dtensor::DType.
enum class RngDType : int { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool };

// One launch over a contiguous block of `numel` elements (row-major in `size`): element e with
// block multi-index idx has global linear index gbase + sum(idx[d] * gstride[d]).
struct RngLaunch {
  int kind = 0;  // RandomKind, or -1 for dropout
  RngDType dtype = RngDType::kFloat32;
  int device = 0;
  void* out = nullptr;       // contiguous, numel elements
  const void* in = nullptr;  // dropout input, contiguous
  bool* mask = nullptr;      // dropout keep mask, contiguous, may be null
  int64_t numel = 0;
  int ndim = 0;
  int64_t size[kRngMaxDims] = {};
  int64_t gstride[kRngMaxDims] = {};
  uint64_t gbase = 0;
  uint64_t seed = 0, offset = 0;
  double a = 0.0, b = 0.0;  // uniform low/range, normal mean/stddev, dropout scale in a
  int64_t int_low = 0;
  uint64_t int_range = 1;
  uint64_t threshold = 0;  // bernoulli / dropout
};

// Launches the kernel on `l.device`, on this thread's current stream (dtensor::cuda::
// current_stream(): the legacy default stream unless a CUDA-graph capture set its own). Returns
// nullptr on success or a description of the CUDA error (the caller throws). The no-CUDA build
// returns an error.
const char* rng_cuda_launch(const RngLaunch& l);
bool rng_cuda_compiled();

}  // namespace dtensor::detail
