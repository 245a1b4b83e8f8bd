// Pooling, upsampling and padding modules with torch.nn's names, arguments and defaults
// (MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool2d, Upsample, and the 1d / 2d / 3d Zero, Constant,
// Reflection, Replication and Circular pads). They
// hold no parameters; forward calls the DTensor op of dtensor/ops/pool/pool.h, so batch- and
// channel-sharded inputs keep their shards (a spatially sharded input is gathered there).
// Sizes are given as in PyTorch: one value for every spatial dim, or one per dim; stride {}
// means the kernel size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/nn/module.h"
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

// avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  std::string type_name() const override { return "AvgPool2d"; }
  DTensor forward(const DTensor& x) override;

 private:
  Shape kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
  std::optional<int64_t> divisor_override_;
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
