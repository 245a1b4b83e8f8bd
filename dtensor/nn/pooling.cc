// Pooling, upsampling and padding modules: each forward is one DTensor op of
// dtensor/ops/pool/pool.h.
#include "dtensor/nn/pooling.h"

#include <algorithm>
#include <string>
#include <vector>

#include "dtensor/core/factories.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
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

namespace {
// One value for every spatial dim or nd values, each >= min; `fallback` when empty.
Shape per_dim(IntSpan v, int64_t nd, const Shape& fallback, const char* module, const char* what,
              int64_t min) {
  if (v.empty()) return fallback;
  DT_CHECK((v.size() == 1 || static_cast<int64_t>(v.size()) == nd) &&
               *std::min_element(v.begin(), v.end()) >= min,
           "[%s] %s must be one or %d ints >= %d, got %s", module, what, nd, min, shape_str(v));
  return v.size() == 1 ? Shape(static_cast<size_t>(nd), v[0]) : shape_of(v);
}
}  // namespace

MaxUnpoolNd::MaxUnpoolNd(int64_t nd, const char* name, IntSpan kernel_size, IntSpan stride,
                         IntSpan padding)
    : nd_(nd), name_(name) {
  kernel_size_ = per_dim(kernel_size, nd, {}, name, "kernel_size", 1);
  DT_CHECK(!kernel_size_.empty(), "[%s] kernel_size must be given", name);
  stride_ = per_dim(stride, nd, kernel_size_, name, "stride", 1);
  padding_ = per_dim(padding, nd, Shape(static_cast<size_t>(nd), 0), name, "padding", 0);
}

DTensor MaxUnpoolNd::forward_with_size(const DTensor& x, const DTensor& indices,
                                       IntSpan output_size) {
  DT_CHECK(x.defined() && indices.defined() && x.shape() == indices.shape(),
           "[%s] input and indices must have the same shape", name_);
  DT_CHECK(x.dim() == nd_ + 1 || x.dim() == nd_ + 2, "[%s] expected a %dD or %dD input, got %dD",
           name_, nd_ + 1, nd_ + 2, x.dim());
  Shape out_size;
  for (int64_t d = 0; d < nd_; ++d) {
    out_size.push_back((x.size(x.dim() - nd_ + d) - 1) * stride_[d] - 2 * padding_[d] +
                       kernel_size_[d]);
  }
  if (!output_size.empty()) {
    // PyTorch's _unpool_output_size: nd or nd + 2 values, each strictly within default ± stride.
    const int64_t n = static_cast<int64_t>(output_size.size());
    DT_CHECK(n == nd_ || n == nd_ + 2,
             "[%s] output_size should be a sequence containing %d or %d elements, but it has a "
             "length of '%d'",
             name_, nd_, nd_ + 2, n);
    // The message names the spatial sizes only, as PyTorch's (which drops the leading two).
    std::string given = "(";
    for (int64_t i = n - nd_; i < n; ++i) {
      given += (i > n - nd_ ? ", " : "") + std::to_string(output_size[i]);
    }
    given += ")";
    for (int64_t d = 0; d < nd_; ++d) {
      const int64_t want = output_size[n - nd_ + d];
      const int64_t min_size = out_size[d] - stride_[d];
      const int64_t max_size = out_size[d] + stride_[d];
      DT_CHECK(min_size < want && want < max_size,
               "[%s] invalid output_size \"%s\" (dim %d must be between %d and %d)", name_, given,
               d, min_size, max_size);
      out_size[d] = want;
    }
  }
  const int64_t lead = x.dim() - nd_;  // the (N,) C dims
  Shape out_shape(x.shape().begin(), x.shape().begin() + lead);
  Shape flat_shape = out_shape;
  int64_t plane = 1;
  for (int64_t s : out_size) plane *= s;
  flat_shape.push_back(plane);
  out_shape.insert(out_shape.end(), out_size.begin(), out_size.end());
  const std::vector<Placement> replicate(static_cast<size_t>(x.device_mesh().ndim()), Replicate());
  const DTensor zeros = dtensor::zeros(flat_shape, x.device_mesh(), replicate, x.dtype());
  const DTensor out = scatter(zeros, lead, flatten(indices, lead), flatten(x, lead));
  return reshape(out, out_shape);
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
