#include "dtensor/nn/basic_layers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

DTensor Flatten::forward(const DTensor& x) {
  return dtensor::flatten(x, start_dim_, end_dim_);
}

DTensor Unflatten::forward(const DTensor& x) {
  return dtensor::unflatten(x, dim_, sizes_);
}

Dropout::Dropout(double p, Generator* gen) : p_(p), gen_(gen) {
  DT_CHECK(p >= 0.0 && p <= 1.0,
           "[Dropout] dropout probability has to be between 0 and 1, but got %g", p);
}

DTensor Dropout::forward(const DTensor& x) {
  return dtensor::dropout(x, p_, is_training(), gen_);
}

namespace {

// x's shape with its last `n` dims dropped (the leading batch dims of a shuffle).
Shape leading(const DTensor& x, int64_t n) {
  const Shape& s = x.shape();
  return Shape(s.begin(), s.end() - n);
}
Shape concat(Shape a, IntSpan b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
// [0, n) then `tail` shifted by n: a permutation of the last dims after n leading ones.
std::vector<int64_t> permutation(int64_t n, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < n; ++i) dims.push_back(i);
  for (int64_t t : tail) dims.push_back(n + t);
  return dims;
}

// PixelShuffle / PixelUnshuffle's checks: at least 3 dims; `size` divisible by `by`.
void check_shuffle(const DTensor& x, const char* op, const char* what, int64_t dim, int64_t by) {
  DT_CHECK(x.dim() >= 3,
           "[%s] %s expects input to have at least 3 dimensions, but got input with %d "
           "dimension(s)",
           op, op, x.dim());
  DT_CHECK(x.size(dim) % by == 0,
           "[%s] %s expects %s to be divisible by %d, but input.size(%d)=%d is not divisible by %d",
           op, op, what, by, dim, x.size(dim), by);
}

void check_p(double p, const std::string& name) {
  DT_CHECK(p >= 0.0 && p <= 1.0, "[%s] dropout probability has to be between 0 and 1, but got %g",
           name, p);
}

// PyTorch's alpha dropout of y given the keep mask (1 / 0, broadcasting to y).
DTensor alpha_dropout_with(const DTensor& y, const DTensor& mask, double p) {
  constexpr double kAlpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kAlpha * kAlpha * p + 1.0) * (1.0 - p));
  const DTensor b = add(mul(add(mask, Scalar(-1.0)), Scalar(kAlpha * a)), Scalar(kAlpha * a * p));
  return add(mul(y, mul(mask, Scalar(a))), b);
}

// A Fold / Unfold size: one value for H and W or two, each > 0 (>= 0 for padding).
Shape pair(IntSpan v, const char* module, const char* what, int64_t min) {
  DT_CHECK((v.size() == 1 || v.size() == 2) && *std::min_element(v.begin(), v.end()) >= min,
           "[%s] %s must be one or two ints >= %d, got %s", module, what, min, shape_str(v));
  return v.size() == 1 ? Shape{v[0], v[0]} : Shape{v[0], v[1]};
}

// The number of blocks along one dim of size `n`.
int64_t blocks(int64_t n, int64_t k, int64_t d, int64_t p, int64_t s) {
  return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

}  // namespace

PixelShuffle::PixelShuffle(int64_t upscale_factor) : r_(upscale_factor) {
  DT_CHECK(upscale_factor > 0, "[PixelShuffle] upscale_factor must be > 0, got %d", upscale_factor);
}
DTensor PixelShuffle::forward(const DTensor& x) {
  check_shuffle(x, "pixel_shuffle", "its input's 'channel' dimension", -3, r_ * r_);
  const int64_t n = x.dim() - 3, c = x.size(-3) / (r_ * r_), h = x.size(-2), w = x.size(-1);
  const DTensor y = reshape(x, concat(leading(x, 3), {c, r_, r_, h, w}));
  return reshape(permute(y, permutation(n, {0, 3, 1, 4, 2})),
                 concat(leading(x, 3), {c, h * r_, w * r_}));
}

PixelUnshuffle::PixelUnshuffle(int64_t downscale_factor) : r_(downscale_factor) {
  DT_CHECK(downscale_factor > 0, "[PixelUnshuffle] downscale_factor must be > 0, got %d",
           downscale_factor);
}
DTensor PixelUnshuffle::forward(const DTensor& x) {
  check_shuffle(x, "pixel_unshuffle", "height", -2, r_);
  check_shuffle(x, "pixel_unshuffle", "width", -1, r_);
  const int64_t n = x.dim() - 3, c = x.size(-3), h = x.size(-2) / r_, w = x.size(-1) / r_;
  const DTensor y = reshape(x, concat(leading(x, 3), {c, h, r_, w, r_}));
  return reshape(permute(y, permutation(n, {0, 2, 4, 1, 3})),
                 concat(leading(x, 3), {c * r_ * r_, h, w}));
}

ChannelShuffle::ChannelShuffle(int64_t groups) : groups_(groups) {
  DT_CHECK(groups > 0,
           "[ChannelShuffle] Number of groups to divide channels in must be "
           "positive. Value of groups:%d",
           groups);
}
DTensor ChannelShuffle::forward(const DTensor& x) {
  DT_CHECK(x.dim() > 2, "[channel_shuffle] expects input with > 2 dims, but got %d dims", x.dim());
  const int64_t c = x.size(1);
  DT_CHECK(c % groups_ == 0,
           "[channel_shuffle] Number of channels must be divisible by groups. Got %d channels and "
           "%d groups.",
           c, groups_);
  Shape split = x.shape();
  split[1] = c / groups_;
  split.insert(split.begin() + 1, groups_);
  return reshape(transpose(reshape(x, split), 1, 2), x.shape());
}

FeatureDropoutNd::FeatureDropoutNd(int64_t nd, const char* name, double p, Generator* gen,
                                   bool alpha)
    : nd_(nd), name_(name), p_(p), gen_(gen), alpha_(alpha) {
  check_p(p, name_);
}

DTensor FeatureDropoutNd::forward(const DTensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  // Dropout1d / 3d take (C, *spatial) unbatched; the others treat dims 0, 1 as (N, C).
  const bool fixed_rank = nd_ == 1 || nd_ == 3;
  DT_CHECK(!fixed_rank || x.dim() == nd_ + 1 || x.dim() == nd_ + 2,
           "[%s] Expected %dD or %dD input, but received a %dD input", name_, nd_ + 1, nd_ + 2,
           x.dim());
  DT_CHECK(x.dim() >= 2, "[%s] Feature dropout requires at least 2 dimensions in the input", name_);
  if (p_ == 1.0) return mul(x, Scalar(0.0));
  const bool unbatched = fixed_rank && x.dim() == nd_ + 1;
  const DTensor y = unbatched ? unsqueeze(x, 0) : x;
  Shape noise(static_cast<size_t>(y.dim()), 1);
  noise[0] = y.size(0);
  noise[1] = y.size(1);
  const std::vector<Placement> replicate(static_cast<size_t>(y.device_mesh().ndim()), Replicate());
  const DTensor mask = bernoulli(noise, 1.0 - p_, y.device_mesh(), replicate, y.dtype(), gen_);
  const DTensor out =
      alpha_ ? alpha_dropout_with(y, mask, p_) : mul(y, div(mask, Scalar(1.0 - p_)));
  return unbatched ? squeeze(out, 0) : out;
}

AlphaDropout::AlphaDropout(double p, Generator* gen) : p_(p), gen_(gen) {
  check_p(p, "AlphaDropout");
}

DTensor AlphaDropout::forward(const DTensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  if (p_ == 1.0) return mul(x, Scalar(0.0));
  const DTensor mask =
      bernoulli(x.shape(), 1.0 - p_, x.device_mesh(), x.placements(), x.dtype(), gen_);
  return alpha_dropout_with(x, mask, p_);
}

Unfold::Unfold(IntSpan kernel_size, IntSpan dilation, IntSpan padding, IntSpan stride)
    : kernel_size_(pair(kernel_size, "Unfold", "kernel_size", 1)),
      dilation_(pair(dilation, "Unfold", "dilation", 1)),
      padding_(pair(padding, "Unfold", "padding", 0)),
      stride_(pair(stride, "Unfold", "stride", 1)) {}

DTensor Unfold::forward(const DTensor& x) {
  DT_CHECK(x.dim() == 3 || x.dim() == 4,
           "[Unfold] Input Error: Only 3D or 4D input Tensors are supported (got %dD)", x.dim());
  const DTensor y = x.dim() == 4 ? x : unsqueeze(x, 0);
  const int64_t kh = kernel_size_[0], kw = kernel_size_[1], dh = dilation_[0], dw = dilation_[1];
  const int64_t sh = stride_[0], sw = stride_[1];
  const int64_t oh = blocks(y.size(2), kh, dh, padding_[0], sh);
  const int64_t ow = blocks(y.size(3), kw, dw, padding_[1], sw);
  DT_CHECK(oh > 0 && ow > 0,
           "[Unfold] the input's spatial size (%d, %d) is too small for kernel_size %s, dilation "
           "%s, padding %s (blocks %d x %d)",
           y.size(2), y.size(3), shape_str(kernel_size_), shape_str(dilation_), shape_str(padding_),
           oh, ow);
  const DTensor xp = pad(y, {padding_[1], padding_[1], padding_[0], padding_[0]});
  std::vector<DTensor> cols;
  for (int64_t i = 0; i < kh; ++i) {
    const DTensor rows = slice(xp, 2, i * dh, i * dh + (oh - 1) * sh + 1, sh);
    for (int64_t j = 0; j < kw; ++j) {
      cols.push_back(slice(rows, 3, j * dw, j * dw + (ow - 1) * sw + 1, sw));
    }
  }
  const DTensor out = reshape(stack(cols, 2), {y.size(0), y.size(1) * kh * kw, oh * ow});
  return x.dim() == 4 ? out : squeeze(out, 0);
}

Fold::Fold(IntSpan output_size, IntSpan kernel_size, IntSpan dilation, IntSpan padding,
           IntSpan stride)
    : output_size_(pair(output_size, "Fold", "output_size", 1)),
      kernel_size_(pair(kernel_size, "Fold", "kernel_size", 1)),
      dilation_(pair(dilation, "Fold", "dilation", 1)),
      padding_(pair(padding, "Fold", "padding", 0)),
      stride_(pair(stride, "Fold", "stride", 1)) {}

namespace {
// b [N, C, oh, ow] with s - 1 zeros after every element along `dim` (2 or 3), the trailing
// zeros dropped: the block's entries at stride s.
DTensor spread(const DTensor& b, int64_t dim, int64_t s) {
  if (s == 1) return b;
  const int64_t n = b.size(dim);
  Shape pads = dim == 3 ? Shape{0, s - 1} : Shape{0, 0, 0, s - 1};
  Shape merged = b.shape();
  merged[static_cast<size_t>(dim)] = n * s;
  return narrow(reshape(pad(unsqueeze(b, dim + 1), pads), merged), dim, 0, (n - 1) * s + 1);
}
}  // namespace

DTensor Fold::forward(const DTensor& x) {
  DT_CHECK(x.dim() == 2 || x.dim() == 3,
           "[Fold] Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
           "(got %dD)",
           x.dim());
  const DTensor y = x.dim() == 3 ? x : unsqueeze(x, 0);
  const int64_t kh = kernel_size_[0], kw = kernel_size_[1], dh = dilation_[0], dw = dilation_[1];
  const int64_t ph = padding_[0], pw = padding_[1], h = output_size_[0], w = output_size_[1];
  const int64_t oh = blocks(h, kh, dh, ph, stride_[0]), ow = blocks(w, kw, dw, pw, stride_[1]);
  DT_CHECK(y.size(1) % (kh * kw) == 0,
           "[Fold] Expected size of input's dimension 1 to be divisible by the product of "
           "kernel_size, but got input.size(1)=%d and kernel_size=%s",
           y.size(1), shape_str(kernel_size_));
  DT_CHECK(oh > 0 && ow > 0 && y.size(2) == oh * ow,
           "[Fold] Given output_size=%s, kernel_size=%s, dilation=%s, padding=%s, stride=%s, "
           "expected size of input's dimension 2 to match the calculated number of sliding blocks "
           "%d * %d = %d, but got input.size(2)=%d",
           shape_str(output_size_), shape_str(kernel_size_), shape_str(dilation_),
           shape_str(padding_), shape_str(stride_), oh, ow, oh * ow, y.size(2));
  const int64_t n = y.size(0), c = y.size(1) / (kh * kw), hp = h + 2 * ph, wp = w + 2 * pw;
  const DTensor cols = reshape(y, {n, c, kh * kw, oh, ow});
  DTensor out;
  for (int64_t i = 0; i < kh; ++i) {
    for (int64_t j = 0; j < kw; ++j) {
      const DTensor b = spread(spread(select(cols, 2, i * kw + j), 2, stride_[0]), 3, stride_[1]);
      const int64_t top = i * dh, left = j * dw;
      const DTensor placed = pad(b, {left, wp - left - b.size(3), top, hp - top - b.size(2)});
      out = out.defined() ? add(out, placed) : placed;
    }
  }
  out = narrow(narrow(out, 2, ph, h), 3, pw, w);
  return x.dim() == 3 ? out : squeeze(out, 0);
}

}  // namespace dtensor::nn
