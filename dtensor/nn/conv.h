// Convolution modules: Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
// (PyTorch names, arguments, defaults, parameter names and shapes). Parameters: "weight"
// [out, in / groups, *kernel] (Conv) or [in, out / groups, *kernel] (ConvTranspose) and "bias"
// [out] when `bias`, both uniform on [-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
// weight.size(1) * prod(kernel) — PyTorch's kaiming_uniform_(a = sqrt(5)) and its bias bound —
// drawn weight first on the CPU for the full shape (see ModuleOptions). padding_mode "zeros" only.
// kernel_size, stride, padding, dilation and output_padding take one value per spatial dim or one
// for all (PyTorch's int form).
#pragma once

#include <cstdint>

#include "dtensor/nn/module.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::nn {

// The shared N-d module (nd spatial dims; transposed: ConvTranspose).
class ConvNd : public Module {
 public:
  std::string type_name() const override { return type_; }
  DTensor forward(const DTensor& x) override;
  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  const Shape& kernel_size() const { return kernel_; }
  const Shape& stride() const { return stride_; }
  const Shape& padding() const { return padding_; }
  const Shape& dilation() const { return dilation_; }
  const Shape& output_padding() const { return output_padding_; }
  int64_t groups() const { return groups_; }

 protected:
  ConvNd(const char* type, int64_t nd, bool transposed, int64_t in_channels, int64_t out_channels,
         IntSpan kernel_size, IntSpan stride, IntSpan padding, IntSpan output_padding,
         int64_t groups, bool bias, IntSpan dilation, const ModuleOptions& opts);
  void reset_own_parameters(Generator* gen) override;

 private:
  double bound() const;
  const char* type_;
  bool transposed_;
  int64_t in_, out_, groups_;
  Shape kernel_, stride_, padding_, dilation_, output_padding_;
};

// y = conv1d/2d/3d(x, weight, bias, stride, padding, dilation, groups) over N spatial dims
// (Conv1d, Conv2d, Conv3d below; libtorch's ConvNdImpl<D> likewise).
template <int N>
class Conv : public ConvNd {
 public:
  Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride = {1},
       IntSpan padding = {0}, IntSpan dilation = {1}, int64_t groups = 1, bool bias = true,
       ModuleOptions opts = {});
};

// y = conv_transpose1d/2d/3d(x, weight, bias, stride, padding, output_padding, groups,
// dilation) over N spatial dims (PyTorch's constructor order: output_padding, groups, bias,
// dilation).
template <int N>
class ConvTranspose : public ConvNd {
 public:
  ConvTranspose(int64_t in_channels, int64_t out_channels, IntSpan kernel_size,
                IntSpan stride = {1}, IntSpan padding = {0}, IntSpan output_padding = {0},
                int64_t groups = 1, bool bias = true, IntSpan dilation = {1},
                ModuleOptions opts = {});
};

// The constructors are instantiated in conv.cc for N = 1, 2, 3 only.
using Conv1d = Conv<1>;
using Conv2d = Conv<2>;
using Conv3d = Conv<3>;
using ConvTranspose1d = ConvTranspose<1>;
using ConvTranspose2d = ConvTranspose<2>;
using ConvTranspose3d = ConvTranspose<3>;

}  // namespace dtensor::nn
