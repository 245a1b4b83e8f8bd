#include "dtensor/nn/conv.h"

#include <algorithm>
#include <cmath>

#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/conv/detail/halo.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {
namespace {

Shape per_dim(IntSpan v, int64_t nd, const char* what, const char* type) {
  DT_CHECK(static_cast<int64_t>(v.size()) == 1 || static_cast<int64_t>(v.size()) == nd,
           "[%s] expected 1 or %d values for %s, got %s", type, nd, what, shape_str(v));
  return static_cast<int64_t>(v.size()) == nd ? Shape(v.begin(), v.end())
                                              : Shape(static_cast<size_t>(nd), v[0]);
}

// PyTorch's padding_mode names; "zeros" is pad's "constant".
constexpr std::string_view kPaddingModes[] = {"zeros", "reflect", "replicate", "circular"};

}  // namespace

ConvNd::ConvNd(const char* type, int64_t nd, bool transposed, int64_t in_channels,
               int64_t out_channels, IntSpan kernel_size, IntSpan stride, IntSpan padding,
               IntSpan output_padding, int64_t groups, bool bias, IntSpan dilation,
               const ModuleOptions& opts, std::string_view padding_str,
               std::string_view padding_mode)
    : type_(type),
      transposed_(transposed),
      in_(in_channels),
      out_(out_channels),
      groups_(groups),
      kernel_(per_dim(kernel_size, nd, "kernel_size", type)),
      stride_(per_dim(stride, nd, "stride", type)),
      padding_(per_dim(padding, nd, "padding", type)),
      dilation_(per_dim(dilation, nd, "dilation", type)),
      output_padding_(per_dim(output_padding, nd, "output_padding", type)),
      padding_mode_(padding_mode) {
  DT_CHECK(std::find(std::begin(kPaddingModes), std::end(kPaddingModes), padding_mode) !=
               std::end(kPaddingModes),
           "[%s] padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but "
           "got padding_mode='%s'",
           type, std::string(padding_mode));
  DT_CHECK(!transposed || padding_mode == "zeros",
           "[%s] Only \"zeros\" padding mode is supported, got '%s'", type,
           std::string(padding_mode));
  // PyTorch's string padding: per dim (left, right) = (total / 2, total - total / 2).
  Shape left = padding_, right = padding_;
  if (!padding_str.empty()) {
    DT_CHECK(padding_str == "valid" || padding_str == "same",
             "[%s] Invalid padding string '%s', should be one of {'valid', 'same'}", type,
             std::string(padding_str));
    const bool same = padding_str == "same";
    for (int64_t i = 0; i < nd; ++i) {
      DT_CHECK(!same || stride_[i] == 1,
               "[%s] padding='same' is not supported for strided convolutions (stride %s)", type,
               shape_str(stride_));
      const int64_t total = same ? dilation_[i] * (kernel_[i] - 1) : 0;
      left[i] = total / 2;
      right[i] = total - left[i];
    }
    padding_ = left;
  }
  if (padding_mode != "zeros" || left != right) {
    for (int64_t i = nd - 1; i >= 0; --i) {
      input_pads_.push_back(left[i]);
      input_pads_.push_back(right[i]);
    }
  }
  DT_CHECK(groups > 0, "[%s] groups must be a positive integer, got %d", type, groups);
  DT_CHECK(in_channels % groups == 0, "[%s] in_channels must be divisible by groups", type);
  DT_CHECK(out_channels % groups == 0, "[%s] out_channels must be divisible by groups", type);
  Shape w = transposed ? Shape{in_channels, out_channels / groups}
                       : Shape{out_channels, in_channels / groups};
  w.insert(w.end(), kernel_.begin(), kernel_.end());
  const double b = bound();
  register_parameter("weight", detail::uniform_parameter(w, b, opts));
  if (bias) register_parameter("bias", detail::uniform_parameter({out_channels}, b, opts));
}

// PyTorch: kaiming_uniform_(a = sqrt(5)) gives gain sqrt(2 / 6) times sqrt(3 / fan_in), i.e.
// 1 / sqrt(fan_in), the bias bound too; fan_in = weight.size(1) * prod(kernel).
double ConvNd::bound() const {
  int64_t fan_in = transposed_ ? out_ / groups_ : in_ / groups_;
  for (int64_t k : kernel_) fan_in *= k;
  return fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
}

void ConvNd::reset_own_parameters(Generator* gen) {
  const double b = bound();
  uniform_(param("weight"), -b, b, gen);
  if (has_param("bias")) uniform_(param("bias"), -b, b, gen);
}

DTensor ConvNd::forward(const DTensor& x) {
  DT_CHECK(x.defined(), "[%s] input is undefined (expected a DTensor)", type_);
  const DeviceMesh& mesh = x.device_mesh();
  const DTensor w = functional::on_mesh(param("weight"), mesh, type_, "weight");
  const DTensor b =
      has_param("bias") ? functional::on_mesh(param("bias"), mesh, type_, "bias") : DTensor();
  // An unbatched [C, *spatial] input runs as a batch of one, as PyTorch's modules (and
  // conv1d / conv2d / conv3d here) take it; convolution itself wants the batch dim.
  const bool unbatched = x.dim() == static_cast<int64_t>(kernel_.size()) + 1;
  const int64_t nd = static_cast<int64_t>(kernel_.size());
  DTensor in = unbatched ? x.unsqueeze(0) : x;
  if (!input_pads_.empty()) {
    DT_CHECK(in.dim() == nd + 2, "[%s] expected a %dD (unbatched) or %dD (batched) input, got %s",
             type_, nd + 1, nd + 2, shape_str(x.shape()));
    // A height-sharded input exchanges the padding mode's rows with its neighbours instead of
    // gathering the height (undefined where that path does not apply).
    if (padding_mode_ != "zeros" && !transposed_) {
      const DTensor y = ::dtensor::detail::halo_padded_convolution(
          in, w, b, input_pads_, padding_mode_, stride_, dilation_, groups_);
      if (y.defined()) return unbatched ? y.squeeze(0) : y;
    }
    in = pad(in, input_pads_, padding_mode_ == "zeros" ? "constant" : padding_mode_.c_str());
  }
  const DTensor y = convolution(
      in, w, b, stride_, input_pads_.empty() ? padding_ : Shape(kernel_.size(), 0), dilation_,
      transposed_, transposed_ ? output_padding_ : Shape(kernel_.size(), 0), groups_);
  return unbatched ? y.squeeze(0) : y;
}

// The module names PyTorch prints, by spatial dims.
constexpr const char* kConvNames[] = {"Conv1d", "Conv2d", "Conv3d"};
constexpr const char* kConvTransposeNames[] = {"ConvTranspose1d", "ConvTranspose2d",
                                               "ConvTranspose3d"};

template <int N>
Conv<N>::Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride,
              IntSpan padding, IntSpan dilation, int64_t groups, bool bias, ModeName padding_mode,
              ModuleOptions opts)
    : ConvNd(kConvNames[N - 1], N, false, in_channels, out_channels, kernel_size, stride, padding,
             {0}, groups, bias, dilation, opts, {}, padding_mode.name) {}
template <int N>
Conv<N>::Conv(StringPadding padding, int64_t in_channels, int64_t out_channels, IntSpan kernel_size,
              IntSpan stride, IntSpan dilation, int64_t groups, bool bias,
              std::string_view padding_mode, ModuleOptions opts)
    : ConvNd(kConvNames[N - 1], N, false, in_channels, out_channels, kernel_size, stride, {0}, {0},
             groups, bias, dilation, opts, padding.name, padding_mode) {}
template <int N>
ConvTranspose<N>::ConvTranspose(int64_t in_channels, int64_t out_channels, IntSpan kernel_size,
                                IntSpan stride, IntSpan padding, IntSpan output_padding,
                                int64_t groups, bool bias, IntSpan dilation, ModuleOptions opts)
    : ConvNd(kConvTransposeNames[N - 1], N, true, in_channels, out_channels, kernel_size, stride,
             padding, output_padding, groups, bias, dilation, opts) {}

template class Conv<1>;
template class Conv<2>;
template class Conv<3>;
template class ConvTranspose<1>;
template class ConvTranspose<2>;
template class ConvTranspose<3>;

}  // namespace dtensor::nn
