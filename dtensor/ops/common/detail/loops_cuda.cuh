// Typed CUDA loops for elementwise ops (the device counterpart of cpu_loops.h). Include only
// from .cu files of the ops layer.
//
// gpu_kernel<Out, In...>(out, {&in...}, op) stores op(compute_t<In>(in)...) into every element
// of `out`; inputs must be broadcastable to out's shape (they are expanded, stride 0) and live
// on out's device. `op` is a __device__ functor or extended lambda taking the inputs in their
// compute types (float for Half/BFloat16). On cuda::current_stream(); nothing is synchronised.
//
// Two kernels: when out and every input are contiguous with out's shape and each aligned to
// kEwVec of its elements (16 bytes for float; the common case: storage is 256-byte aligned),
// each thread loads kEwVec elements of every operand with one vector access and needs no index
// math (measured on an H100: add / exp / gelu on 256 MB float32 from 0.68 / 0.48 / 0.43 of the
// device copy bandwidth to 1.01 / 0.99 / 0.97); otherwise one thread per element maps its index
// to each operand's offset (OffsetCalc), grid-stride.
#pragma once

#include <array>
#include <cstdint>
#include <cuda/std/tuple>
#include <initializer_list>
#include <utility>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/offset_calc_cuda.cuh"
#include "dtensor/tensor/stream_cuda.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

inline constexpr int kEwBlock = 256;

template <typename Out, typename... In, typename Op, size_t... I>
__device__ __forceinline__ void gpu_apply(char* const* base, const int64_t* off, const Op& op,
                                          std::index_sequence<I...>) {
  *reinterpret_cast<Out*>(base[0] + off[0]) = convert<Out>(
      op(static_cast<compute_t<In>>(*reinterpret_cast<const In*>(base[I + 1] + off[I + 1]))...));
}

template <typename Out, typename Op, typename... In>
__global__ void gpu_elementwise_kernel(std::array<char*, sizeof...(In) + 1> ptrs,
                                       OffsetCalc<sizeof...(In) + 1> calc, int64_t n, Op op) {
  constexpr int N = sizeof...(In) + 1;
  char* base[N];
#pragma unroll
  for (int k = 0; k < N; ++k) base[k] = ptrs[k];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N];
    calc.get(i, off);
    gpu_apply<Out, In...>(base, off, op, std::index_sequence_for<In...>{});
  }
}

inline constexpr int kEwVec = 4;

// kEwVec elements of T in one aligned access (16 bytes for float).
template <typename T>
struct alignas(sizeof(T) * kEwVec) EwVec {
  T v[kEwVec];
};

template <typename Out, typename Op, typename... In, size_t... I>
__device__ __forceinline__ void gpu_apply_vec(char* const* ptrs, int64_t j, const Op& op,
                                              std::index_sequence<I...>) {
  const ::cuda::std::tuple<EwVec<In>...> in{reinterpret_cast<const EwVec<In>*>(ptrs[I + 1])[j]...};
  EwVec<Out> r;
#pragma unroll
  for (int k = 0; k < kEwVec; ++k) {
    r.v[k] = convert<Out>(op(static_cast<compute_t<In>>(::cuda::std::get<I>(in).v[k])...));
  }
  reinterpret_cast<EwVec<Out>*>(ptrs[0])[j] = r;
}

// Contiguous operands: vector j covers elements [j * kEwVec, (j + 1) * kEwVec); the last
// n % kEwVec elements are done one by one.
template <typename Out, typename Op, typename... In>
__global__ void gpu_contiguous_kernel(std::array<char*, sizeof...(In) + 1> ptrs, int64_t n, Op op) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / kEwVec;
  for (int64_t j = first; j < nvec; j += step) {
    gpu_apply_vec<Out, Op, In...>(ptrs.data(), j, op, std::index_sequence_for<In...>{});
  }
  for (int64_t i = nvec * kEwVec + first; i < n; i += step) {
    const int64_t off[sizeof...(In) + 1] = {i * static_cast<int64_t>(sizeof(Out)),
                                            i * static_cast<int64_t>(sizeof(In))...};
    gpu_apply<Out, In...>(ptrs.data(), off, op, std::index_sequence_for<In...>{});
  }
}

// Geometry of out and its inputs (expanded to out's shape) for an N-operand kernel.
template <int N>
struct EwOperands {
  std::array<char*, N> ptrs{};
  OffsetCalc<N> calc;
  int64_t numel = 0;
};

template <int N>
EwOperands<N> make_ew_operands(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  EwOperands<N> r;
  std::array<Tensor, N> ex;
  ex[0] = out;
  int k = 1;
  for (const Tensor* t : inputs) ex[k++] = t->sizes() == out.sizes() ? *t : t->expand(out.sizes());
  std::array<IntSpan, N> strides;
  std::array<int64_t, N> isz;
  for (int i = 0; i < N; ++i) {
    DT_CHECK(ex[i].device() == out.device(), "[cuda] operand %d is on %s but the output is on %s",
             static_cast<int64_t>(i), ex[i].device().str(), out.device().str());
    r.ptrs[i] = static_cast<char*>(ex[i].data_ptr());
    strides[i] = IntSpan(ex[i].strides());
    isz[i] = static_cast<int64_t>(ex[i].itemsize());
  }
  r.calc = make_offset_calc<N>(out.sizes(), strides, isz);
  r.numel = out.numel();
  return r;
}

template <typename Out, typename... In, typename Op>
void gpu_kernel(const Tensor& out, std::initializer_list<const Tensor*> inputs, const Op& op) {
  constexpr int N = sizeof...(In) + 1;
  DT_CHECK(static_cast<int>(inputs.size()) == N - 1,
           "[gpu_kernel] %d inputs given, the kernel expects %d",
           static_cast<int64_t>(inputs.size()), static_cast<int64_t>(N - 1));
  if (out.numel() == 0) return;
  cuda::DeviceGuard guard(out.device().index);
  bool contiguous =
      out.is_contiguous() && reinterpret_cast<uintptr_t>(out.data_ptr()) % alignof(EwVec<Out>) == 0;
  {
    const size_t align[] = {alignof(EwVec<In>)...};
    size_t k = 0;
    for (const Tensor* t : inputs) {
      contiguous = contiguous && t->sizes() == out.sizes() && t->is_contiguous() &&
                   t->device() == out.device() &&
                   reinterpret_cast<uintptr_t>(t->data_ptr()) % align[k] == 0;
      ++k;
    }
  }
  if (contiguous) {
    std::array<char*, N> ptrs{static_cast<char*>(out.data_ptr())};
    int k = 1;
    for (const Tensor* t : inputs) ptrs[k++] = static_cast<char*>(t->data_ptr());
    const int64_t n = out.numel();
    gpu_contiguous_kernel<Out, Op, In...><<<cuda::grid_for((n + kEwVec - 1) / kEwVec, kEwBlock),
                                            kEwBlock, 0, cuda::current_stream()>>>(ptrs, n, op);
    DT_CHECK_CUDA(cudaGetLastError());
    return;
  }
  const EwOperands<N> o = make_ew_operands<N>(out, inputs);
  gpu_elementwise_kernel<Out, Op, In...>
      <<<cuda::grid_for(o.numel, kEwBlock), kEwBlock, 0, cuda::current_stream()>>>(o.ptrs, o.calc,
                                                                                   o.numel, op);
  DT_CHECK_CUDA(cudaGetLastError());
}

}  // namespace dtensor::detail
