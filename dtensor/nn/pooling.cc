// Pooling, upsampling and padding modules: each forward is one DTensor op of
// dtensor/ops/pool/pool.h.
#include "dtensor/nn/pooling.h"

#include <string>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {
namespace {

Shape shape_of(IntSpan s) {
  return Shape(s.begin(), s.end());
}

// A padding module's 2 nd sides (left, right[, top, bottom]) from one value or 2 nd.
Shape pad_sides(int64_t nd, IntSpan padding, const char* module) {
  const auto n = static_cast<size_t>(2 * nd);
  DT_CHECK(padding.size() == 1 || padding.size() == n,
           "[%s] padding must be a single int or %d ints, got %d", module, n,
           static_cast<int64_t>(padding.size()));
  return padding.size() == 1 ? Shape(n, padding[0]) : shape_of(padding);
}

// adaptive max pool over the last dim: adaptive_max_pool2d over a (1, L) plane, whose flat
// index is the position along L.
DTensorValuesIndices adaptive_max_1d(const DTensor& x, int64_t output_size) {
  const DTensorValuesIndices vi =
      dtensor::adaptive_max_pool2d_with_indices(unsqueeze(x, -2), {1, output_size});
  return {squeeze(vi.values, -2), squeeze(vi.indices, -2)};
}

}  // namespace

MaxPoolNd::MaxPoolNd(int64_t nd, const char* name, IntSpan kernel_size, IntSpan stride,
                     IntSpan padding, IntSpan dilation, bool ceil_mode)
    : nd_(nd),
      name_(name),
      kernel_size_(shape_of(kernel_size)),
      stride_(shape_of(stride)),
      padding_(shape_of(padding)),
      dilation_(shape_of(dilation)),
      ceil_mode_(ceil_mode) {}

DTensorValuesIndices MaxPoolNd::forward_with_indices(const DTensor& x) {
  if (nd_ == 1) {
    return dtensor::max_pool1d_with_indices(x, kernel_size_, stride_, padding_, dilation_,
                                            ceil_mode_);
  }
  if (nd_ == 2) {
    return dtensor::max_pool2d_with_indices(x, kernel_size_, stride_, padding_, dilation_,
                                            ceil_mode_);
  }
  return dtensor::max_pool3d_with_indices(x, kernel_size_, stride_, padding_, dilation_,
                                          ceil_mode_);
}

DTensor MaxPoolNd::forward(const DTensor& x) {
  return forward_with_indices(x).values;
}

AvgPool1d::AvgPool1d(IntSpan kernel_size, IntSpan stride, IntSpan padding, bool ceil_mode,
                     bool count_include_pad)
    : kernel_size_(shape_of(kernel_size)),
      stride_(shape_of(stride)),
      padding_(shape_of(padding)),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad) {}

DTensor AvgPool1d::forward(const DTensor& x) {
  return dtensor::avg_pool1d(x, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_);
}

AvgPoolNd::AvgPoolNd(int64_t nd, const char* name, IntSpan kernel_size, IntSpan stride,
                     IntSpan padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override)
    : nd_(nd),
      name_(name),
      kernel_size_(shape_of(kernel_size)),
      stride_(shape_of(stride)),
      padding_(shape_of(padding)),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad),
      divisor_override_(divisor_override) {}

DTensor AvgPoolNd::forward(const DTensor& x) {
  return nd_ == 2 ? dtensor::avg_pool2d(x, kernel_size_, stride_, padding_, ceil_mode_,
                                        count_include_pad_, divisor_override_)
                  : dtensor::avg_pool3d(x, kernel_size_, stride_, padding_, ceil_mode_,
                                        count_include_pad_, divisor_override_);
}

DTensor AdaptiveAvgPool2d::forward(const DTensor& x) {
  return dtensor::adaptive_avg_pool2d(x, output_size_);
}

AdaptivePoolNd::AdaptivePoolNd(int64_t nd, bool max, const char* name, IntSpan output_size)
    : nd_(nd), max_(max), name_(name), output_size_(shape_of(output_size)) {
  DT_CHECK(output_size.size() == 1 || static_cast<int64_t>(output_size.size()) == nd,
           "[%s] output_size must be a single int or %d ints, got %d", name, nd,
           static_cast<int64_t>(output_size.size()));
  if (output_size_.size() == 1) output_size_ = Shape(static_cast<size_t>(nd), output_size_[0]);
}

DTensorValuesIndices AdaptiveMaxPool1d::forward_with_indices(const DTensor& x) {
  return adaptive_max_1d(x, output_size_[0]);
}

DTensorValuesIndices AdaptiveMaxPool2d::forward_with_indices(const DTensor& x) {
  return dtensor::adaptive_max_pool2d_with_indices(x, output_size_);
}

DTensor AdaptivePoolNd::forward(const DTensor& x) {
  if (nd_ == 1 && !max_) return dtensor::adaptive_avg_pool1d(x, output_size_);
  if (nd_ == 1) return adaptive_max_1d(x, output_size_[0]).values;
  if (nd_ == 2) return dtensor::adaptive_max_pool2d(x, output_size_);
  DT_CHECK(x.dim() == 4 || x.dim() == 5, "[%s] expected a 4-D or 5-D input, got %dD", name_,
           x.dim());
  const bool batched = x.dim() == 5;
  const DTensor y = batched ? x : unsqueeze(x, 0);
  const int64_t n = y.size(0), c = y.size(1), d = y.size(2);
  const int64_t od = output_size_[0], oh = output_size_[1], ow = output_size_[2];
  // The (H, W) pool of every depth slice, then the depth pool over [N C, oH oW, D].
  DTensor a = reshape(y, {n, c * d, y.size(3), y.size(4)});
  a = max_ ? dtensor::adaptive_max_pool2d(a, {oh, ow}) : dtensor::adaptive_avg_pool2d(a, {oh, ow});
  a = transpose(reshape(a, {n * c, d, oh * ow}), 1, 2);
  a = max_ ? adaptive_max_1d(a, od).values : dtensor::adaptive_avg_pool1d(a, {od});
  const DTensor out = reshape(transpose(a, 1, 2), {n, c, od, oh, ow});
  return batched ? out : squeeze(out, 0);
}

LPPoolNd::LPPoolNd(int64_t nd, const char* name, double norm_type, IntSpan kernel_size,
                   IntSpan stride, bool ceil_mode)
    : nd_(nd),
      name_(name),
      norm_type_(norm_type),
      kernel_size_(shape_of(kernel_size)),
      stride_(shape_of(stride)),
      ceil_mode_(ceil_mode) {
  DT_CHECK(kernel_size.size() == 1 || static_cast<int64_t>(kernel_size.size()) == nd,
           "[%s] kernel_size must be a single int or %d ints, got %d", name, nd,
           static_cast<int64_t>(kernel_size.size()));
}

DTensor LPPoolNd::forward(const DTensor& x) {
  const DTensor p = pow(x, Scalar(norm_type_));
  const DTensor a = nd_ == 1   ? dtensor::avg_pool1d(p, kernel_size_, stride_, {0}, ceil_mode_)
                    : nd_ == 2 ? dtensor::avg_pool2d(p, kernel_size_, stride_, {0}, ceil_mode_)
                               : dtensor::avg_pool3d(p, kernel_size_, stride_, {0}, ceil_mode_);
  double window = 1.0;
  for (int64_t i = 0; i < nd_; ++i) {
    window *= static_cast<double>(kernel_size_.size() == 1 ? kernel_size_[0] : kernel_size_[i]);
  }
  return pow(mul(mul(sign(a), relu(abs(a))), Scalar(window)), Scalar(1.0 / norm_type_));
}

DTensor Upsample::forward(const DTensor& x) {
  return dtensor::interpolate(x, size_, scale_factor_, mode_.c_str(), align_corners_);
}

PadNd::PadNd(int64_t nd, std::string_view kind, const char* mode, IntSpan padding, double value)
    : name_(std::string(kind) + std::to_string(nd) + "d"),
      mode_(mode),
      padding_(pad_sides(nd, padding, name_.c_str())),
      value_(value) {}

DTensor PadNd::forward(const DTensor& x) {
  return dtensor::pad(x, padding_, mode_, value_);
}

}  // namespace dtensor::nn
