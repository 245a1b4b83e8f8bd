// The argument rules of the convolutions (defined in conv.cc), shared by the Tensor functions,
// the DTensor functions and the registration's meta.
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/ops/conv/conv.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// A per-spatial-dim list: v as is when it has nd values, nd copies of v[0] when it has one
// (PyTorch's int form); throws "[op] expected 1 or nd values for what, got [..]" otherwise.
Shape conv_expand(IntSpan v, int64_t nd, const char* what, std::string_view op);

// The output shape of convolution(input, weight, ...) from the shapes (batched input
// [N, C, *spatial], weight of input.dim() dims, every list of nd values), after checking them
// with PyTorch's rules: groups > 0 dividing the channels, the weight's channels matching the
// input's, output_padding < stride or dilation (transposed), every output size > 0.
Shape conv_output_shape(IntSpan input, IntSpan weight, IntSpan stride, IntSpan padding,
                        IntSpan dilation, bool transposed, IntSpan output_padding, int64_t groups,
                        std::string_view op);

// padding="same" / "valid" as symmetric padding: the padding of each spatial dim and, for "same"
// with an odd total d (k - 1) (PyTorch pads one more element at the end), trim[i] = 1: the
// convolution is run with one more element of padding on both sides and its output narrowed by
// one element at the start of dim i. Throws for "same" with a stride other than 1.
struct ConvStringPadding {
  Shape padding;
  Shape trim;  // 0 or 1 per spatial dim
};
ConvStringPadding conv_string_padding(ConvPadding padding, IntSpan weight, IntSpan stride,
                                      IntSpan dilation, std::string_view op);

}  // namespace dtensor::detail
