// Layer normalisation and RMS normalisation over the trailing dims of a local tensor.
//
// `normalized_shape` must equal the last dims of x; every slice of that shape is normalised on
// its own. Statistics are accumulated in double (float32/float64) or float (16-bit types) and the
// result is rounded once to x's dtype. weight and bias are optional (undefined Tensor()), have
// shape normalized_shape and x's dtype. Floating dtypes only; the result is contiguous.
#pragma once

#include <optional>

#include "dtensor/distributed_tensor.h"
#include "tensor/tensor.h"

namespace dtensor {

// torch.nn.functional.layer_norm: (x - mean) / sqrt(var + eps) * weight + bias, with the biased
// variance (divide by the slice size, as PyTorch).
Tensor layer_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// torch.nn.functional.rms_norm: x / sqrt(mean(x^2) + eps) * weight. eps = nullopt behaves like
// PyTorch's eps=None: the machine epsilon of the compute type, i.e.
// std::numeric_limits<float>::epsilon() (1.19e-7) for float32, float16 and bfloat16 and
// std::numeric_limits<double>::epsilon() (2.2e-16) for float64.
Tensor rms_norm(const Tensor& x, IntSpan normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

// DTensor forms (weight/bias: an undefined DTensor() when absent; registered in
// norm_strategy.cc). The normalised dims must be whole on each rank: an input sharded along
// them is redistributed first (the engine's cheapest plan), a Partial input is reduced first;
// the leading dims keep their shard (uneven included), so SequenceParallel's S(1) activations
// need no communication. weight and bias are used whole (gathered first when sharded).
DTensor layer_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight = DTensor(),
                   const DTensor& bias = DTensor(), double eps = 1e-5);
DTensor rms_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight = DTensor(),
                 std::optional<double> eps = std::nullopt);

}  // namespace dtensor
