// Pooling, upsampling and padding modules with torch.nn's names, arguments and defaults
// (MaxPool1d/2d/3d, AvgPool1d/2d/3d, the adaptive pools, LPPool1d/2d/3d, Upsample and its
// UpsamplingNearest2d / UpsamplingBilinear2d, and the 1d / 2d / 3d Zero, Constant,
// Reflection, Replication and Circular pads). They
// hold no parameters; forward calls the DTensor op of dtensor/ops/pool/pool.h, so batch- and
// channel-sharded inputs keep their shards (a spatially sharded input is gathered there).
// Sizes are given as in PyTorch: one value for every spatial dim, or one per dim; stride {}
// means the kernel size.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/nn/module.h"
#include "dtensor/nn/two_input_module.h"
#include "dtensor/ops/reduction/reduction.h"

namespace dtensor::nn {

// The max pools over `nd` spatial dims (MaxPool1d / MaxPool2d below).
class MaxPoolNd : public Module {
 public:
  std::string type_name() const override { return name_; }
  DTensor forward(const DTensor& x) override;
  // forward with return_indices=True: the values and their flat indices in the input's plane.
  DTensorValuesIndices forward_with_indices(const DTensor& x);
  const Shape& kernel_size() const { return kernel_size_; }
  const Shape& stride() const { return stride_; }
  const Shape& padding() const { return padding_; }
  const Shape& dilation() const { return dilation_; }
  bool ceil_mode() const { return ceil_mode_; }

 protected:
  MaxPoolNd(int64_t nd, const char* name, IntSpan kernel_size, IntSpan stride, IntSpan padding,
            IntSpan dilation, bool ceil_mode);

 private:
  int64_t nd_;
  std::string name_;
  Shape kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

class MaxPool1d : public MaxPoolNd {
 public:
  explicit MaxPool1d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     IntSpan dilation = {1}, bool ceil_mode = false)
      : MaxPoolNd(1, "MaxPool1d", kernel_size, stride, padding, dilation, ceil_mode) {}
};

class MaxPool2d : public MaxPoolNd {
 public:
  explicit MaxPool2d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     IntSpan dilation = {1}, bool ceil_mode = false)
      : MaxPoolNd(2, "MaxPool2d", kernel_size, stride, padding, dilation, ceil_mode) {}
};

class MaxPool3d : public MaxPoolNd {
 public:
  explicit MaxPool3d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     IntSpan dilation = {1}, bool ceil_mode = false)
      : MaxPoolNd(3, "MaxPool3d", kernel_size, stride, padding, dilation, ceil_mode) {}
};

// avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad).
class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     bool ceil_mode = false, bool count_include_pad = true);
  std::string type_name() const override { return "AvgPool1d"; }
  DTensor forward(const DTensor& x) override;

 private:
  Shape kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
};

// avg_pool2d / avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override) (AvgPool2d / AvgPool3d below).
class AvgPoolNd : public Module {
 public:
  std::string type_name() const override { return name_; }
  DTensor forward(const DTensor& x) override;

 protected:
  AvgPoolNd(int64_t nd, const char* name, IntSpan kernel_size, IntSpan stride, IntSpan padding,
            bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override);

 private:
  int64_t nd_;
  std::string name_;
  Shape kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
  std::optional<int64_t> divisor_override_;
};

class AvgPool2d : public AvgPoolNd {
 public:
  explicit AvgPool2d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt)
      : AvgPoolNd(2, "AvgPool2d", kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override) {}
};

class AvgPool3d : public AvgPoolNd {
 public:
  explicit AvgPool3d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt)
      : AvgPoolNd(3, "AvgPool3d", kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override) {}
};

// adaptive_avg_pool2d(x, output_size).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntSpan output_size)
      : output_size_(output_size.begin(), output_size.end()) {}
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  DTensor forward(const DTensor& x) override;
  const Shape& output_size() const { return output_size_; }

 private:
  Shape output_size_;
};

// The other adaptive pools (round 9): one output size for every spatial dim, or one each (no
// None entries). AdaptiveAvgPool1d and AdaptiveMaxPool2d are their ops; AdaptiveMaxPool1d is
// adaptive_max_pool2d over a (1, L) plane (its indices are then PyTorch's); AdaptiveAvgPool3d and
// AdaptiveMaxPool3d are exact separable composites (the (H, W) pool of every depth slice, then
// the depth pool: a box mean is the mean of its slices' means, a box max the max of their maxes;
// means agree with PyTorch's to rounding, maxes and their gradients exactly). (C, *spatial)
// inputs are taken, as PyTorch's.
class AdaptivePoolNd : public Module {
 public:
  std::string type_name() const override { return name_; }
  DTensor forward(const DTensor& x) override;
  const Shape& output_size() const { return output_size_; }

 protected:
  AdaptivePoolNd(int64_t nd, bool max, const char* name, IntSpan output_size);
  int64_t nd_;
  bool max_;
  std::string name_;
  Shape output_size_;
};

class AdaptiveAvgPool1d : public AdaptivePoolNd {
 public:
  explicit AdaptiveAvgPool1d(IntSpan output_size)
      : AdaptivePoolNd(1, false, "AdaptiveAvgPool1d", output_size) {}
};
class AdaptiveAvgPool3d : public AdaptivePoolNd {
 public:
  explicit AdaptiveAvgPool3d(IntSpan output_size)
      : AdaptivePoolNd(3, false, "AdaptiveAvgPool3d", output_size) {}
};
// AdaptiveMaxPool1d / 2d also give return_indices=True's indices (flat in the input's plane).
class AdaptiveMaxPool1d : public AdaptivePoolNd {
 public:
  explicit AdaptiveMaxPool1d(IntSpan output_size)
      : AdaptivePoolNd(1, true, "AdaptiveMaxPool1d", output_size) {}
  DTensorValuesIndices forward_with_indices(const DTensor& x);
};
class AdaptiveMaxPool2d : public AdaptivePoolNd {
 public:
  explicit AdaptiveMaxPool2d(IntSpan output_size)
      : AdaptivePoolNd(2, true, "AdaptiveMaxPool2d", output_size) {}
  DTensorValuesIndices forward_with_indices(const DTensor& x);
};
class AdaptiveMaxPool3d : public AdaptivePoolNd {
 public:
  explicit AdaptiveMaxPool3d(IntSpan output_size)
      : AdaptivePoolNd(3, true, "AdaptiveMaxPool3d", output_size) {}
};

// LPPool1d / 2d / 3d(norm_type, kernel_size, stride, ceil_mode): PyTorch's composite,
// (sign(a) relu(|a|) * prod(kernel_size))^(1 / norm_type) with a = avg_pool(x^norm_type,
// kernel_size, stride, padding 0, ceil_mode), so values and gradients follow PyTorch's (NaN where
// a negative power sum meets a fractional root, as there).
class LPPoolNd : public Module {
 public:
  std::string type_name() const override { return name_; }
  DTensor forward(const DTensor& x) override;
  double norm_type() const { return norm_type_; }

 protected:
  LPPoolNd(int64_t nd, const char* name, double norm_type, IntSpan kernel_size, IntSpan stride,
           bool ceil_mode);

 private:
  int64_t nd_;
  std::string name_;
  double norm_type_;
  Shape kernel_size_, stride_;
  bool ceil_mode_;
};

class LPPool1d : public LPPoolNd {
 public:
  LPPool1d(double norm_type, IntSpan kernel_size, IntSpan stride = {}, bool ceil_mode = false)
      : LPPoolNd(1, "LPPool1d", norm_type, kernel_size, stride, ceil_mode) {}
};
class LPPool2d : public LPPoolNd {
 public:
  LPPool2d(double norm_type, IntSpan kernel_size, IntSpan stride = {}, bool ceil_mode = false)
      : LPPoolNd(2, "LPPool2d", norm_type, kernel_size, stride, ceil_mode) {}
};
class LPPool3d : public LPPoolNd {
 public:
  LPPool3d(double norm_type, IntSpan kernel_size, IntSpan stride = {}, bool ceil_mode = false)
      : LPPoolNd(3, "LPPool3d", norm_type, kernel_size, stride, ceil_mode) {}
};

// interpolate(x, size, scale_factor, mode, align_corners); mode "nearest" by default.
class Upsample : public Module {
 public:
  explicit Upsample(IntSpan size = {}, std::vector<double> scale_factor = {},
                    std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt)
      : size_(size.begin(), size.end()),
        scale_factor_(std::move(scale_factor)),
        mode_(std::move(mode)),
        align_corners_(align_corners) {}
  std::string type_name() const override { return "Upsample"; }
  DTensor forward(const DTensor& x) override;

 private:
  Shape size_;
  std::vector<double> scale_factor_;
  std::string mode_;
  std::optional<bool> align_corners_;
};

// UpsamplingNearest2d(size, scale_factor) = Upsample(size, scale_factor, "nearest");
// UpsamplingBilinear2d = Upsample(.., "bilinear", align_corners=true), as PyTorch's.
class UpsamplingNearest2d : public Upsample {
 public:
  explicit UpsamplingNearest2d(IntSpan size = {}, std::vector<double> scale_factor = {})
      : Upsample(size, std::move(scale_factor), "nearest") {}
  std::string type_name() const override { return "UpsamplingNearest2d"; }
};
class UpsamplingBilinear2d : public Upsample {
 public:
  explicit UpsamplingBilinear2d(IntSpan size = {}, std::vector<double> scale_factor = {})
      : Upsample(size, std::move(scale_factor), "bilinear", true) {}
  std::string type_name() const override { return "UpsamplingBilinear2d"; }
};

// MaxUnpool1d / 2d / 3d(kernel_size, stride (kernel_size), padding (0)): the inverse of a max
// pool given its indices (flat in each input plane, as forward_with_indices gives them):
// module(input, indices) writes every input value at its index of a zero output of spatial size
// (in - 1) stride - 2 padding + kernel_size, or forward_with_size's output_size (the last nd
// values count). (N, C, *) or (C, *) inputs. An exact composite (scatter along the flattened
// plane); the input's gradient is the output gradient gathered at the indices.
class MaxUnpoolNd : public TwoInputModule {
 public:
  std::string type_name() const override { return name_; }
  using TwoInputModule::forward;
  DTensor forward(const DTensor& x, const DTensor& indices) override {
    return forward_with_size(x, indices, {});
  }
  DTensor forward_with_size(const DTensor& x, const DTensor& indices, IntSpan output_size);
  std::array<std::string_view, 2> input_names() const override { return {"input", "indices"}; }

 protected:
  MaxUnpoolNd(int64_t nd, const char* name, IntSpan kernel_size, IntSpan stride, IntSpan padding);

 private:
  int64_t nd_;
  std::string name_;
  Shape kernel_size_, stride_, padding_;
};

class MaxUnpool1d : public MaxUnpoolNd {
 public:
  explicit MaxUnpool1d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0})
      : MaxUnpoolNd(1, "MaxUnpool1d", kernel_size, stride, padding) {}
};
class MaxUnpool2d : public MaxUnpoolNd {
 public:
  explicit MaxUnpool2d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0})
      : MaxUnpoolNd(2, "MaxUnpool2d", kernel_size, stride, padding) {}
};
class MaxUnpool3d : public MaxUnpoolNd {
 public:
  explicit MaxUnpool3d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0})
      : MaxUnpoolNd(3, "MaxUnpool3d", kernel_size, stride, padding) {}
};

// The padding modules: F.pad(x, padding, mode, value) over the last `nd` dims, padding one
// value for every side or 2 nd values (left, right[, top, bottom[, front, back]]), as PyTorch's.
// Constant padding takes any input rank; reflect, replicate and circular take (C, *spatial) or
// (N, C, *spatial) inputs, as PyTorch's. Each kind is a class template over nd with PyTorch's
// names as aliases (ZeroPad2d = ZeroPad<2>); errors name the module:
// "[ZeroPad2d] padding must be a single int or 4 ints, got 2".
class PadNd : public Module {
 public:
  std::string type_name() const override { return name_; }
  DTensor forward(const DTensor& x) override;
  // (left, right[, top, bottom[, front, back]]) as F.pad takes them, last dim first.
  const Shape& padding() const { return padding_; }
  double value() const { return value_; }

 protected:
  // `kind` ("ZeroPad", ...) and nd make the type name ("ZeroPad2d").
  PadNd(int64_t nd, std::string_view kind, const char* mode, IntSpan padding, double value = 0.0);

 private:
  std::string name_;
  const char* mode_;
  Shape padding_;
  double value_;
};

// Zeros: pad(x, padding, "constant", 0).
template <int64_t Nd>
class ZeroPad : public PadNd {
 public:
  explicit ZeroPad(IntSpan padding) : PadNd(Nd, "ZeroPad", "constant", padding) {}
};

// A constant: pad(x, padding, "constant", value).
template <int64_t Nd>
class ConstantPad : public PadNd {
 public:
  ConstantPad(IntSpan padding, double value)
      : PadNd(Nd, "ConstantPad", "constant", padding, value) {}
};

// The input reflected about its edge (edge not repeated): pad(x, padding, "reflect"); each pad
// must be smaller than its dim.
template <int64_t Nd>
class ReflectionPad : public PadNd {
 public:
  explicit ReflectionPad(IntSpan padding) : PadNd(Nd, "ReflectionPad", "reflect", padding) {}
};

// The edge value repeated: pad(x, padding, "replicate").
template <int64_t Nd>
class ReplicationPad : public PadNd {
 public:
  explicit ReplicationPad(IntSpan padding) : PadNd(Nd, "ReplicationPad", "replicate", padding) {}
};

// The input wrapped around: pad(x, padding, "circular"); each pad at most its dim.
template <int64_t Nd>
class CircularPad : public PadNd {
 public:
  explicit CircularPad(IntSpan padding) : PadNd(Nd, "CircularPad", "circular", padding) {}
};

using ZeroPad1d = ZeroPad<1>;
using ZeroPad2d = ZeroPad<2>;
using ZeroPad3d = ZeroPad<3>;
using ConstantPad1d = ConstantPad<1>;
using ConstantPad2d = ConstantPad<2>;
using ConstantPad3d = ConstantPad<3>;
using ReflectionPad1d = ReflectionPad<1>;
using ReflectionPad2d = ReflectionPad<2>;
using ReflectionPad3d = ReflectionPad<3>;
using ReplicationPad1d = ReplicationPad<1>;
using ReplicationPad2d = ReplicationPad<2>;
using ReplicationPad3d = ReplicationPad<3>;
using CircularPad1d = CircularPad<1>;
using CircularPad2d = CircularPad<2>;
using CircularPad3d = CircularPad<3>;

}  // namespace dtensor::nn
