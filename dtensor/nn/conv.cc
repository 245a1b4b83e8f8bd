#include "dtensor/nn/conv.h"

#include <cmath>

#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/conv/conv.h"
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

}  // namespace

ConvNd::ConvNd(const char* type, int64_t nd, bool transposed, int64_t in_channels,
               int64_t out_channels, IntSpan kernel_size, IntSpan stride, IntSpan padding,
               IntSpan output_padding, int64_t groups, bool bias, IntSpan dilation,
               const ModuleOptions& opts)
    : type_(type),
      transposed_(transposed),
      in_(in_channels),
      out_(out_channels),
      groups_(groups),
      kernel_(per_dim(kernel_size, nd, "kernel_size", type)),
      stride_(per_dim(stride, nd, "stride", type)),
      padding_(per_dim(padding, nd, "padding", type)),
      dilation_(per_dim(dilation, nd, "dilation", type)),
      output_padding_(per_dim(output_padding, nd, "output_padding", type)) {
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
  const DTensor y =
      convolution(unbatched ? x.unsqueeze(0) : x, w, b, stride_, padding_, dilation_, transposed_,
                  transposed_ ? output_padding_ : Shape(kernel_.size(), 0), groups_);
  return unbatched ? y.squeeze(0) : y;
}

// The module names PyTorch prints, by spatial dims.
constexpr const char* kConvNames[] = {"Conv1d", "Conv2d", "Conv3d"};
constexpr const char* kConvTransposeNames[] = {"ConvTranspose1d", "ConvTranspose2d",
                                               "ConvTranspose3d"};

template <int N>
Conv<N>::Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride,
              IntSpan padding, IntSpan dilation, int64_t groups, bool bias, ModuleOptions opts)
    : ConvNd(kConvNames[N - 1], N, false, in_channels, out_channels, kernel_size, stride, padding,
             {0}, groups, bias, dilation, opts) {}
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
