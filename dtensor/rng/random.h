// Local random ops on Tensors (PyTorch names). Each op draws from `gen`, or when it is null
// from the default generator of the tensor's device, reserving words_to_reserve(spec, numel)
// words (dtensor/rng/distributions.h), so its values are element i -> words [o + i W, o + (i + 1)
// W). The same op on a DTensor (later: OffsetBasedRNGTracker) generates each shard with fill_random
// and yields exactly these values for the full tensor.
//
// Floating ops support float32, float64, float16 and bfloat16; randint also int32 and int64;
// bernoulli every dtype including bool. Bernoulli takes a scalar p (no probability tensor).
#pragma once

#include <cstdint>

#include "dtensor/rng/distributions.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

// Uniform on [0, 1): exact k * 2^-b values (b = 24 float32, 53 float64, 11 float16,
// 8 bfloat16), never 1.
Tensor rand(IntSpan shape, TensorOptions opts = {}, Generator* gen = nullptr);
// Standard normal (Box-Muller, one value per element).
Tensor randn(IntSpan shape, TensorOptions opts = {}, Generator* gen = nullptr);
// Integers uniform on [low, high) (int64 by default; int32 and floating dtypes allowed).
Tensor randint(int64_t low, int64_t high, IntSpan shape,
               TensorOptions opts = TensorOptions(DType::kInt64), Generator* gen = nullptr);
// 1 with probability p, else 0, in any dtype (float32 by default).
Tensor bernoulli(IntSpan shape, double p, TensorOptions opts = {}, Generator* gen = nullptr);

// In place (any strides); return `t`. low + (high - low) * u rounded to t's dtype, which for
// float16/bfloat16 or wide ranges can round up to `high`.
Tensor uniform_(const Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor normal_(const Tensor& t, double mean = 0.0, double stddev = 1.0, Generator* gen = nullptr);
Tensor bernoulli_(const Tensor& t, double p, Generator* gen = nullptr);
// Fills t (int32, int64 or floating) with integers in [low, high).
Tensor random_(const Tensor& t, int64_t low, int64_t high, Generator* gen = nullptr);

// Dropout: each element is kept with probability 1 - p (its unit uniform u >= p) and scaled
// by 1 / (1 - p); p == 1 gives zeros. train == false or p == 0 returns `input` itself and
// leaves the generator untouched.
// The input may have any strides; the result is a new contiguous tensor.
Tensor dropout(const Tensor& input, double p, bool train = true, Generator* gen = nullptr);

// Dropout that also returns the bool keep mask (torch.native_dropout).
struct DropoutResult {
  Tensor output;  // the input with dropped elements zeroed and the rest scaled by 1 / (1 - p)
  Tensor mask;    // true where kept (bool)
};
// dropout that also returns the keep mask (same draws as dropout).
DropoutResult dropout_with_mask(const Tensor& input, double p, bool train = true,
                                Generator* gen = nullptr);

}  // namespace dtensor
