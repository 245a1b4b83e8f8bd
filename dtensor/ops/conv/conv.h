// Convolutions of local tensors and DTensors: conv1d / conv2d / conv3d and conv_transpose1d /
// 2d / 3d, with PyTorch's names, argument order, defaults and conventions, all served by one N-d
// implementation (convolution, as aten::convolution).
//
// input [N, C_in, *spatial] (or unbatched [C_in, *spatial], as PyTorch), weight
// [C_out, C_in / groups, *kernel] (conv) or [C_in, C_out / groups, *kernel] (conv_transpose),
// bias [C_out] optional (an undefined Tensor()). stride, padding, dilation and output_padding
// hold one value for every spatial dim or a single value used for all (PyTorch's int form).
// Output size per spatial dim: conv (in + 2 p - d (k - 1) - 1) / s + 1; conv_transpose
// (in - 1) s - 2 p + d (k - 1) + output_padding + 1. Floating dtypes; float16 / bfloat16 are
// computed in float32 and rounded once. CPU: im2col + one OpenBLAS GEMM per sample and group
// (a 1x1 kernel with stride 1 and no padding reads the input as is); CUDA: direct kernels. The
// result is contiguous.
#pragma once

#include <array>
#include <concepts>
#include <string_view>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// torch.nn.functional.conv1d / conv2d / conv3d (defaults as PyTorch: stride 1, padding 0,
// dilation 1, groups 1).
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              IntSpan stride = {1}, IntSpan padding = {0}, IntSpan dilation = {1},
              int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              IntSpan stride = {1}, IntSpan padding = {0}, IntSpan dilation = {1},
              int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              IntSpan stride = {1}, IntSpan padding = {0}, IntSpan dilation = {1},
              int64_t groups = 1);
// The string padding forms: "valid" (no padding) or "same" (output size = input size; stride
// must be 1, as PyTorch; an odd total padding puts the extra element at the end, as PyTorch).
// The strings are parsed by conv_padding (throws "[conv] invalid padding string" for others) and
// the functions take a string (templates below, so that a braced {0} stays an IntSpan padding).
enum class ConvPadding { kValid, kSame };
ConvPadding conv_padding(std::string_view padding);
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              ConvPadding padding, IntSpan dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              ConvPadding padding, IntSpan dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
              ConvPadding padding, IntSpan dilation = {1}, int64_t groups = 1);

#define DTENSOR_CONV_STRING_PADDING(T, name)                                            \
  template <typename S>                                                                 \
  requires std::convertible_to<const S&, std::string_view> T name(                      \
      const T& input, const T& weight, const T& bias, IntSpan stride, const S& padding, \
      IntSpan dilation = {1}, int64_t groups = 1) {                                     \
    return name(input, weight, bias, stride, conv_padding(padding), dilation, groups);  \
  }
DTENSOR_CONV_STRING_PADDING(Tensor, conv1d)
DTENSOR_CONV_STRING_PADDING(Tensor, conv2d)
DTENSOR_CONV_STRING_PADDING(Tensor, conv3d)

// torch.nn.functional.conv_transpose1d / 2d / 3d (PyTorch's argument order: output_padding and
// groups before dilation).
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntSpan stride = {1}, IntSpan padding = {0}, IntSpan output_padding = {0},
                        int64_t groups = 1, IntSpan dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntSpan stride = {1}, IntSpan padding = {0}, IntSpan output_padding = {0},
                        int64_t groups = 1, IntSpan dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntSpan stride = {1}, IntSpan padding = {0}, IntSpan output_padding = {0},
                        int64_t groups = 1, IntSpan dilation = {1});

// aten::convolution: the N-d op behind the functions above (batched input, N = input.dim() - 2
// spatial dims, every list of N values). output_padding is used by the transposed form only and
// must be smaller than stride or dilation (PyTorch's rule).
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, IntSpan stride,
                   IntSpan padding, IntSpan dilation, bool transposed, IntSpan output_padding,
                   int64_t groups);

// aten::convolution_backward: the gradients of convolution (same arguments) for the gradient
// grad_output of its output. grad_input is the transposed operation of grad_output (conv_transpose
// for a conv, conv for a conv_transpose), grad_weight sums over the batch, grad_bias is the sum of
// grad_output over every dim but 1. An entry is undefined when its output_mask entry is false.
struct ConvGrads {
  Tensor grad_input;   // input's shape and dtype
  Tensor grad_weight;  // weight's shape and dtype
  Tensor grad_bias;    // [C_out], grad_output's dtype
};
// convolution's gradients (rules above).
ConvGrads convolution_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                               IntSpan stride, IntSpan padding, IntSpan dilation, bool transposed,
                               IntSpan output_padding, int64_t groups,
                               std::array<bool, 3> output_mask = {true, true, true});

// ---- DTensor forms (conv_strategy.cc) ----------------------------------------------------------
// The result equals the op on the full tensors. Without communication: the batch sharded (data
// parallel: input S(0), weight R -> output S(0)); the output channels sharded (tensor parallel,
// groups 1: weight S(0) (S(1) for conv_transpose) -> output S(1), bias S(0) added locally);
// depthwise convolutions (groups = C_in = C_out) with the channels sharded (input S(1), weight
// S(0) -> output S(1)). The input channels sharded (input S(1) and weight S(1) (S(0) for
// conv_transpose), groups 1) give a Partial(sum) output. A height-sharded input (Shard(2) on one
// mesh dim, Replicate elsewhere, weight and bias replicated) of a conv with stride 1 along the
// height and size-keeping height padding (2 p = d (k - 1), e.g. 3x3 with padding 1) exchanges
// halos of p rows with its neighbours (point to point, p edge rows each way) and keeps the
// output Shard(2); other spatially sharded inputs are redistributed by the engine (gathered). The
// backward shards alike (weight gradients of the data-parallel layout are Partial until the
// optimiser's reduction). Unbatched inputs are not accepted here (a batch dim is what data
// parallelism shards).
DTensor conv1d(const DTensor& input, const DTensor& weight, const DTensor& bias = DTensor(),
               IntSpan stride = {1}, IntSpan padding = {0}, IntSpan dilation = {1},
               int64_t groups = 1);
DTensor conv2d(const DTensor& input, const DTensor& weight, const DTensor& bias = DTensor(),
               IntSpan stride = {1}, IntSpan padding = {0}, IntSpan dilation = {1},
               int64_t groups = 1);
DTensor conv3d(const DTensor& input, const DTensor& weight, const DTensor& bias = DTensor(),
               IntSpan stride = {1}, IntSpan padding = {0}, IntSpan dilation = {1},
               int64_t groups = 1);
DTensor conv1d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               ConvPadding padding, IntSpan dilation = {1}, int64_t groups = 1);
DTensor conv2d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               ConvPadding padding, IntSpan dilation = {1}, int64_t groups = 1);
DTensor conv3d(const DTensor& input, const DTensor& weight, const DTensor& bias, IntSpan stride,
               ConvPadding padding, IntSpan dilation = {1}, int64_t groups = 1);
DTENSOR_CONV_STRING_PADDING(DTensor, conv1d)
DTENSOR_CONV_STRING_PADDING(DTensor, conv2d)
DTENSOR_CONV_STRING_PADDING(DTensor, conv3d)
#undef DTENSOR_CONV_STRING_PADDING
DTensor conv_transpose1d(const DTensor& input, const DTensor& weight,
                         const DTensor& bias = DTensor(), IntSpan stride = {1},
                         IntSpan padding = {0}, IntSpan output_padding = {0}, int64_t groups = 1,
                         IntSpan dilation = {1});
DTensor conv_transpose2d(const DTensor& input, const DTensor& weight,
                         const DTensor& bias = DTensor(), IntSpan stride = {1},
                         IntSpan padding = {0}, IntSpan output_padding = {0}, int64_t groups = 1,
                         IntSpan dilation = {1});
DTensor conv_transpose3d(const DTensor& input, const DTensor& weight,
                         const DTensor& bias = DTensor(), IntSpan stride = {1},
                         IntSpan padding = {0}, IntSpan output_padding = {0}, int64_t groups = 1,
                         IntSpan dilation = {1});
// The DTensor aten::convolution (batched input; bias optional).
DTensor convolution(const DTensor& input, const DTensor& weight, const DTensor& bias,
                    IntSpan stride, IntSpan padding, IntSpan dilation, bool transposed,
                    IntSpan output_padding, int64_t groups);

}  // namespace dtensor
