// Layer normalisation and RMS normalisation over the trailing dims of a local tensor.
//
// `normalized_shape` must equal the last dims of x; every slice of that shape is normalised on
// its own. Statistics are computed in the compute type: float for float32, float16 and bfloat16,
// double for float64, with the centred two-pass variance (mean first, then the sum of squared
// deviations), each sum over several vector accumulators (the CPU kernels are vectorised with
// Google Highway); the result is rounded once to x's dtype. float32 results agree with a double
// reference to ~1e-6 relative for slices of up to ~10^5 elements of comparable magnitude.
// weight and bias are optional (undefined Tensor()), have shape normalized_shape and x's dtype.
// Floating dtypes only; the result is contiguous.
#pragma once

#include <array>
#include <optional>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

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

// ---- forward with statistics, and backward (the local kernels training needs) ----------------
// Statistics have x's leading dims followed by a 1 per normalised dim (as
// aten::native_layer_norm), dtype float32 for float32/float16/bfloat16 inputs and float64 for
// float64, and hold per row: mean, and rstd = 1 / sqrt(var + eps) (var = mean of squares for rms
// norm).
struct LayerNormResult {
  Tensor output;  // layer_norm(x, ...)
  Tensor mean;    // per-row mean
  Tensor rstd;    // per-row 1 / sqrt(var + eps)
};
// rms_norm's output and statistics (see LayerNormResult).
struct RmsNormResult {
  Tensor output;  // rms_norm(x, ...)
  Tensor rstd;    // per-row 1 / sqrt(mean of squares + eps)
};

// layer_norm that also returns the per-row mean and rstd.
LayerNormResult native_layer_norm(const Tensor& x, IntSpan normalized_shape,
                                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                                  double eps = 1e-5);
// rms_norm that also returns the per-row rstd (eps as rms_norm).
RmsNormResult native_rms_norm(const Tensor& x, IntSpan normalized_shape,
                              const Tensor& weight = Tensor(),
                              std::optional<double> eps = std::nullopt);

// Gradients of layer_norm: an entry is undefined when its output_mask entry is false, and
// grad_weight also when weight is undefined. grad_weight = sum over rows of grad_out * xhat,
// grad_bias = sum over rows of grad_out (xhat = (x - mean) * rstd), summed over ALL leading rows
// of x: a caller holding a shard of the rows gets the partial sum of its rows (reduce across
// shards). grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per row, gw = grad_out *
// weight. grad_out has x's shape and dtype; mean and rstd are native_layer_norm's; weight as
// in the forward. Results have x's (grad_x) and weight's (grad_weight, grad_bias) shape and
// dtype; the weight and bias sums accumulate in the statistics' dtype (blocks of rows summed in
// block order, the same on any thread count: dtensor/ops/threads.h) and round once.
struct LayerNormGrads {
  Tensor grad_x;       // gradient of x
  Tensor grad_weight;  // gradient of weight (sum over the rows held)
  Tensor grad_bias;    // gradient of bias (sum over the rows held)
};
// layer_norm's gradients (rules above).
LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x,
                                   IntSpan normalized_shape, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight,
                                   std::array<bool, 3> output_mask = {true, true, true});

// Gradients of rms_norm (same rules): grad_x = rstd * (gw - xhat * mean(gw * xhat)) with
// xhat = x * rstd, grad_weight = sum over rows of grad_out * xhat (a partial sum for a shard of
// rows). output_mask = {grad_x, grad_weight}.
struct RmsNormGrads {
  Tensor grad_x;       // gradient of x
  Tensor grad_weight;  // gradient of weight (sum over the rows held)
};
// rms_norm's gradients (rules above).
RmsNormGrads rms_norm_backward(const Tensor& grad_out, const Tensor& x, IntSpan normalized_shape,
                               const Tensor& rstd, const Tensor& weight,
                               std::array<bool, 2> output_mask = {true, true});

// DTensor forms (weight/bias: an undefined DTensor() when absent; registered in
// norm_strategy.cc). The normalised dims must be whole on each rank: an input sharded along
// them is redistributed first (the engine's cheapest plan), a Partial input is reduced first;
// the leading dims keep their shard (uneven included), so SequenceParallel's S(1) activations
// need no communication. weight and bias are used whole (gathered first when sharded).
DTensor layer_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight = DTensor(),
                   const DTensor& bias = DTensor(), double eps = 1e-5);
DTensor rms_norm(const DTensor& x, IntSpan normalized_shape, const DTensor& weight = DTensor(),
                 std::optional<double> eps = std::nullopt);

// ---- normalisation layers: batch_norm, group_norm, instance_norm ----------------------------
// torch.nn.functional.batch_norm, group_norm and
// instance_norm on local tensors and DTensors, for x of shape [N, C, *] (batch, channels, any
// spatial dims).
//
// They are written with registered ops (batch_norm_sums and batch_norm_affine below, select,
// pointwise math, mean, var, reshape and layer_norm), so their backward, their CUDA path and
// their sharding rules are those ops': autograd differentiates through the batch statistics
// (training mode), which gives PyTorch's batch-norm backward grad_x = w * rstd * (g - mean(g) -
// xhat * mean(g * xhat)) (the gradient reaching the sums is sum(g) and sum(g * xhat) per channel,
// one all-reduce when the batch is sharded, as PyTorch's SyncBatchNorm).
//
// Running statistics (batch_norm, instance_norm): running_mean and running_var are optional
// (undefined when absent), of shape [C] and updated IN PLACE when training (use_input_stats)
// with PyTorch's rule running = (1 - momentum) * running + momentum * batch_stat, the batch
// variance taken unbiased (n / (n - 1)). For DTensors they are Replicate or sharded like the
// channels (Shard(0) on the mesh dims where x is Shard(1)); the update is written into each
// rank's local shard, from the globally reduced statistics, so every rank holds the same values.
// They never require grad.

// torch.nn.functional.batch_norm. training: normalise with the batch statistics over every dim
// but 1 (biased variance) and update the running statistics when given; otherwise normalise
// with running_mean and running_var (required then). weight and bias ([C]) are optional.
// Statistics come from batch_norm_sums (float64 sums of x and x^2, var = E[x^2] - E[x]^2), so a
// batch-sharded DTensor x (Shard(0), or any non-channel dim) reduces them with ONE all-reduce
// of a [2, C] tensor per call: SyncBatchNorm semantics, the result equals the batch norm of the
// full batch. A channel-sharded x (Shard(1)) needs no communication.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
DTensor batch_norm(const DTensor& input, const DTensor& running_mean, const DTensor& running_var,
                   const DTensor& weight = DTensor(), const DTensor& bias = DTensor(),
                   bool training = false, double momentum = 0.1, double eps = 1e-5);

// torch.nn.functional.group_norm: the C channels in num_groups groups of C / num_groups (C must
// divide), each (sample, group) normalised over its channels and spatial dims (layer_norm of x
// viewed [N, num_groups, -1]), then the per-channel weight and bias. A DTensor x sharded on the
// batch needs no communication; sharded on the channels, the view decides (a split that cuts
// a group is redistributed).
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
DTensor group_norm(const DTensor& input, int64_t num_groups, const DTensor& weight = DTensor(),
                   const DTensor& bias = DTensor(), double eps = 1e-5);

// torch.nn.functional.instance_norm: use_input_stats normalises every (sample, channel) over
// its spatial dims (group_norm with C groups; batch or channel sharding needs no communication)
// and, when the running statistics are given, updates them with the per-instance statistics
// averaged over the batch (an all-reduce when the batch is sharded); otherwise it normalises
// with the running statistics (batch_norm in eval mode).
Tensor instance_norm(const Tensor& input, const Tensor& running_mean = Tensor(),
                     const Tensor& running_var = Tensor(), const Tensor& weight = Tensor(),
                     const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
DTensor instance_norm(const DTensor& input, const DTensor& running_mean = DTensor(),
                      const DTensor& running_var = DTensor(), const DTensor& weight = DTensor(),
                      const DTensor& bias = DTensor(), bool use_input_stats = true,
                      double momentum = 0.1, double eps = 1e-5);

// The per-channel sums batch_norm's statistics come from (dtensor's op, not PyTorch's
// batch_norm_stats): [2, C] float64, row 0 the sums of x[:, k, ...], row 1 the sums of x^2, over
// every dim but 1 of x [N, C, *] (floating, accumulated in float64). The DTensor form of a
// batch-sharded x returns Partial sums (one all-reduce completes them), of a channel-sharded x
// sums sharded like the channels (no communication).
Tensor batch_norm_sums(const Tensor& input);
DTensor batch_norm_sums(const DTensor& input);
// Its gradient: grad_input = grad_output[0][k] + 2 * x * grad_output[1][k] on channel k's
// elements, in x's shape and dtype.
Tensor batch_norm_sums_backward(const Tensor& grad_output, const Tensor& input);

// batch_norm's normalisation and affine in one pass (dtensor's op): y = x * factors[0][k] +
// factors[1][k] on channel k of x [N, C, *] (factors [2, C]: the scale w * rstd and the shift
// b - mean * scale), the multiply rounded, then the add, in the factors' dtype: float64 for a
// float64 x, float32 otherwise (a 16-bit x is computed in float32 and rounded once); y in x's
// dtype. As the composed x * scale + shift, in one pass over x instead of two, and one in
// backward for the factors' gradients. The DTensor form keeps x's sharding: the factors are
// Replicate, or sharded like the channels where x is Shard(1).
Tensor batch_norm_affine(const Tensor& input, const Tensor& factors);
DTensor batch_norm_affine(const DTensor& input, const DTensor& factors);
// Its gradients: grad_input = grad_output * factors[0][k] in x's dtype; grad_factors [2, C] in
// the factors' dtype, row 0 the sums of grad_output * x over channel k's elements, row 1 the
// sums of grad_output (accumulated in float64).
struct BatchNormAffineGrads {
  Tensor grad_input, grad_factors;
};
BatchNormAffineGrads batch_norm_affine_backward(const Tensor& grad_output, const Tensor& input,
                                                const Tensor& factors);

}  // namespace dtensor
