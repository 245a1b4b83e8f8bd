// Convolution modules: Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
// (PyTorch names, arguments, defaults, parameter names and shapes). Parameters: "weight"
// [out, in / groups, *kernel] (Conv) or [in, out / groups, *kernel] (ConvTranspose) and "bias"
// [out] when `bias`, both uniform on [-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
// weight.size(1) * prod(kernel) — PyTorch's kaiming_uniform_(a = sqrt(5)) and its bias bound —
// drawn weight first on the CPU for the full shape (see ModuleOptions).
// kernel_size, stride, padding, dilation and output_padding take one value per spatial dim or one
// for all (PyTorch's int form).
//
// Conv's padding may also be PyTorch's strings: "valid" (no padding) or "same" (stride 1 only:
// total padding dilation * (kernel - 1) per dim, total / 2 on the left and the rest, one more
// when the total is odd, on the right / bottom, as PyTorch). Conv's padding_mode is "zeros"
// (the convolution pads), or "reflect", "replicate", "circular": then, as PyTorch, the input
// goes through pad (F.pad in that mode, dtensor/ops/pool/pool.h) and the convolution runs with
// padding 0; an asymmetric "same" pads with zeros that way too. On DTensors pad keeps
// batch / channel shards and gathers a sharded spatial dim (its strategy shards leading dims
// only), so a height-sharded input with such a padding gives the same values as a replicated
// one, without the convolution's halo exchange. ConvTranspose takes "zeros" only (PyTorch too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

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
  // The numeric padding; for "same" the left (top) pads, for "valid" zeros.
  const Shape& padding() const { return padding_; }
  const Shape& dilation() const { return dilation_; }
  const Shape& output_padding() const { return output_padding_; }
  int64_t groups() const { return groups_; }
  const std::string& padding_mode() const { return padding_mode_; }

 protected:
  // padding_str: "valid" / "same" (padding is then ignored), or empty for the numeric padding.
  ConvNd(const char* type, int64_t nd, bool transposed, int64_t in_channels, int64_t out_channels,
         IntSpan kernel_size, IntSpan stride, IntSpan padding, IntSpan output_padding,
         int64_t groups, bool bias, IntSpan dilation, const ModuleOptions& opts,
         std::string_view padding_str = {}, std::string_view padding_mode = "zeros");
  void reset_own_parameters(Generator* gen) override;

 private:
  double bound() const;
  const char* type_;
  bool transposed_;
  int64_t in_, out_, groups_;
  Shape kernel_, stride_, padding_, dilation_, output_padding_;
  std::string padding_mode_;
  // F.pad's pads (last dim's (left, right) first) applied before a padding-0 convolution, empty
  // when the convolution pads (zeros, symmetric).
  Shape input_pads_;
};

// y = conv1d/2d/3d(x, weight, bias, stride, padding, dilation, groups) over N spatial dims
// (Conv1d, Conv2d, Conv3d below; libtorch's ConvNdImpl<D> likewise).
template <int N>
class Conv : public ConvNd {
 public:
  Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride = {1},
       IntSpan padding = {0}, IntSpan dilation = {1}, int64_t groups = 1, bool bias = true,
       ModuleOptions opts = {})
      : Conv(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
             ModeName{"zeros"}, opts) {}
  // padding_mode ("zeros", "reflect", "replicate", "circular") after bias, PyTorch's order. A
  // string only (a template, so that a braced {} there is the ModuleOptions of the form above, as
  // before padding_mode was an option, not an ambiguous call).
  template <class M, std::enable_if_t<std::is_convertible_v<const M&, std::string_view>, int> = 0>
  Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride,
       IntSpan padding, IntSpan dilation, int64_t groups, bool bias, const M& padding_mode,
       ModuleOptions opts = {})
      : Conv(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
             ModeName{padding_mode}, opts) {}
  // padding "valid" or "same" (a template so that a braced {0} still means the numeric form).
  template <class S, std::enable_if_t<std::is_convertible_v<const S&, std::string_view>, int> = 0>
  Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride,
       const S& padding, IntSpan dilation = {1}, int64_t groups = 1, bool bias = true,
       std::string_view padding_mode = "zeros", ModuleOptions opts = {})
      : Conv(StringPadding{padding}, in_channels, out_channels, kernel_size, stride, dilation,
             groups, bias, padding_mode, opts) {}

 private:
  struct StringPadding {
    std::string_view name;
  };
  struct ModeName {
    std::string_view name;
  };
  Conv(int64_t in_channels, int64_t out_channels, IntSpan kernel_size, IntSpan stride,
       IntSpan padding, IntSpan dilation, int64_t groups, bool bias, ModeName padding_mode,
       ModuleOptions opts);
  Conv(StringPadding padding, int64_t in_channels, int64_t out_channels, IntSpan kernel_size,
       IntSpan stride, IntSpan dilation, int64_t groups, bool bias, std::string_view padding_mode,
       ModuleOptions opts);
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
