// Typed CPU loops over an ElementwiseIter. Internal to the ops layer (included by *_cpu.cc).
//
// cpu_kernel<Out, In...>(iter, op) stores op(compute_t<In>(in)...) into every output element.
// `op` is a lambda taking the inputs in their compute types (float for Half/BFloat16) and
// returning a value convertible to Out. When every operand is contiguous along the innermost
// merged dim the loop is a plain indexed loop the compiler vectorises (contiguous_row);
// otherwise it walks byte strides.
#pragma once

#include <tuple>
#include <utility>

#include "dtensor/ops/common/detail/elementwise_iter.h"
#include "dtensor/tensor/convert.h"

namespace dtensor::detail {

// The value of a compute-type result as element type Out.
template <typename Out, typename V>
DT_FORCE_INLINE Out store_as(V v) {
  return convert<Out>(v);
}

// The contiguous row, kept out of line on purpose. Inlined into the three call sites of
// ElementwiseIter::for_each, GCC 12 left this loop scalar in the binary ops (the disassembly
// reloads the bound from the stack every iteration, so the trip count is unknown to the
// vectoriser); on its own it is vectorised, with a runtime overlap check for in-place use.
// float32 [131072], one thread: add 0.44 -> 0.14 ns per element, mul 0.55 -> 0.14, div 0.84
// -> 0.21, add_ 0.50 -> 0.10, neg 0.29 -> 0.08; the call costs nothing measurable on rows as
// short as 2 elements (for_each's per-row stepping dominates there).
template <typename Out, typename... In, typename Op>
__attribute__((noinline)) void contiguous_row(Out* out, int64_t n, const Op& op, const In*... in) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = store_as<Out>(op(static_cast<compute_t<In>>(in[i])...));
  }
}

// A two-input row where one input is a single value repeated (inner stride 0: x * s[..., 1],
// x - mean[..., 1]), contiguous otherwise: the value is read once and the loop vectorises
// (float32 [8192, 32] * [8192, 1], one thread: 0.59 -> 0.32 ns per element; [16, 128, 64] *
// [16, 128, 1]: 85 -> 27 us). `kFirst` says which input repeats.
template <bool kFirst, typename Out, typename A, typename B, typename Op>
__attribute__((noinline)) void repeated_input_row(Out* out, int64_t n, const Op& op, const A* a,
                                                  const B* b) {
  if constexpr (kFirst) {
    const compute_t<A> v = static_cast<compute_t<A>>(*a);
    for (int64_t i = 0; i < n; ++i) out[i] = store_as<Out>(op(v, static_cast<compute_t<B>>(b[i])));
  } else {
    const compute_t<B> v = static_cast<compute_t<B>>(*b);
    for (int64_t i = 0; i < n; ++i) out[i] = store_as<Out>(op(static_cast<compute_t<A>>(a[i]), v));
  }
}

template <typename Out, typename... In, typename Op, size_t... I>
DT_FORCE_INLINE void cpu_row(char* const* p, const int64_t* s, int64_t n, const Op& op,
                             std::index_sequence<I...>) {
  Out* out = reinterpret_cast<Out*>(p[0]);
  if (s[0] == static_cast<int64_t>(sizeof(Out)) &&
      ((s[I + 1] == static_cast<int64_t>(sizeof(In))) && ...)) {
    contiguous_row<Out, In...>(out, n, op, reinterpret_cast<const In*>(p[I + 1])...);
    return;
  }
  if constexpr (sizeof...(In) == 2) {
    using A = std::tuple_element_t<0, std::tuple<In...>>;
    using B = std::tuple_element_t<1, std::tuple<In...>>;
    const A* a = reinterpret_cast<const A*>(p[1]);
    const B* b = reinterpret_cast<const B*>(p[2]);
    // Short rows stay on the inline strided loop below (a call costs more than it saves).
    if (s[0] == static_cast<int64_t>(sizeof(Out)) && n >= 8) {
      if (s[1] == static_cast<int64_t>(sizeof(A)) && s[2] == 0) {
        return repeated_input_row<false, Out>(out, n, op, a, b);
      }
      if (s[1] == 0 && s[2] == static_cast<int64_t>(sizeof(B))) {
        return repeated_input_row<true, Out>(out, n, op, a, b);
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(p[0] + i * s[0]) = store_as<Out>(
        op(static_cast<compute_t<In>>(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1]))...));
  }
}

template <typename Out, typename... In, typename Op>
void cpu_kernel(const ElementwiseIter& iter, const Op& op) {
  DT_CHECK(iter.noperands() == 1 + static_cast<int>(sizeof...(In)),
           "[cpu_kernel] iterator has %d operands, the kernel expects %d", iter.noperands(),
           1 + static_cast<int>(sizeof...(In)));
  iter.for_each([&](char* const* p, const int64_t* s, int64_t n) {
    cpu_row<Out, In...>(p, s, n, op, std::index_sequence_for<In...>{});
  });
}

}  // namespace dtensor::detail
