// The rotary tables' arithmetic, shared by nn::functional::rotary_tables (computed in float64,
// then cast) and the Llama model's tables (computed in float32, as transformers computes them).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "dtensor/nn/functional.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::nn::detail {

// cos and sin of p * inv_freq[i] for positions p in [0, positions), as CPU tensors
// [positions, inv_freq.size()] of F's dtype, the angle and both functions computed in F.
template <typename F>
functional::RotaryTables rotary_cos_sin(std::span<const F> inv_freq, int64_t positions) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  std::vector<F> c(static_cast<size_t>(positions * half)), s(c.size());
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const F angle = static_cast<F>(p) * inv_freq[static_cast<size_t>(i)];
      c[static_cast<size_t>(p * half + i)] = std::cos(angle);
      s[static_cast<size_t>(p * half + i)] = std::sin(angle);
    }
  }
  const int64_t shape[] = {positions, half};
  return {from_vector<F>(c, shape), from_vector<F>(s, shape)};
}

}  // namespace dtensor::nn::detail
