// Pooling, upsampling and padding modules: each forward is one DTensor op of
// dtensor/ops/pool/pool.h.
#include "dtensor/nn/pooling.h"

#include <string>

#include "dtensor/ops/pool/pool.h"
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
  return dtensor::max_pool2d_with_indices(x, kernel_size_, stride_, padding_, dilation_,
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

AvgPool2d::AvgPool2d(IntSpan kernel_size, IntSpan stride, IntSpan padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor_override)
    : kernel_size_(shape_of(kernel_size)),
      stride_(shape_of(stride)),
      padding_(shape_of(padding)),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad),
      divisor_override_(divisor_override) {}

DTensor AvgPool2d::forward(const DTensor& x) {
  return dtensor::avg_pool2d(x, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_,
                             divisor_override_);
}

DTensor AdaptiveAvgPool2d::forward(const DTensor& x) {
  return dtensor::adaptive_avg_pool2d(x, output_size_);
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
