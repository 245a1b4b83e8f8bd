// The pool family's Tensor ops (pad, max / avg / adaptive pools, interpolate) and the host side
// of its window computation (detail/windows.h): the args, the output shapes, the tap tables and
// the local forward / backward, which run the kernels of pool_cpu.cc / pool_cuda.cu.
#include "dtensor/ops/pool/pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

int64_t product(IntSpan s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// A per-op size list of `nd` values: one value for all, or nd of them ({} gives `dflt`).
Shape expand(IntSpan v, int64_t nd, IntSpan dflt, const char* op, const char* what) {
  if (v.empty()) v = dflt;
  DT_CHECK(static_cast<int64_t>(v.size()) == 1 || static_cast<int64_t>(v.size()) == nd,
           "[%s] %s must be a single int or %d ints, got %d", op, what, nd,
           static_cast<int64_t>(v.size()));
  return v.size() == 1 ? Shape(static_cast<size_t>(nd), v[0]) : Shape(v.begin(), v.end());
}

// floor(a / b) for b > 0 (PyTorch's div_rtn).
int64_t div_floor(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// PyTorch's pooling_output_shape.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t out = div_floor(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

DimTaps pool_dim(const WindowArgs& a, int64_t j, int64_t in) {
  const bool is_max = a.kind == WindowKind::kMaxPool;
  const int64_t k = a.kernel[j], s = a.stride[j], p = a.padding[j];
  const int64_t d = is_max ? a.dilation[j] : 1;
  const int64_t out = pool_out(in, k, s, p, d, a.ceil_mode);
  DimTaps t;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p;
    if (is_max) {
      for (int64_t q = 0; q < k; ++q) {
        const int64_t i = start + q * d;
        if (i >= 0 && i < in) t.add(i, 1.0);
      }
    } else {
      const int64_t end = std::min(start + k, in + p);
      const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(end, in);
      const int64_t count =
          a.divisor_override > 0 ? 1 : (a.count_include_pad ? end - start : hi - lo);
      for (int64_t i = lo; i < hi; ++i) t.add(i, 1.0 / static_cast<double>(count));
    }
    t.close();
  }
  return t;
}

DimTaps adaptive_dim(const WindowArgs& a, int64_t j, int64_t in) {
  const int64_t out = a.output_size[j];
  DimTaps t;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t lo = (o * in) / out, hi = ((o + 1) * in + out - 1) / out;
    for (int64_t i = lo; i < hi; ++i) t.add(i, 1.0 / static_cast<double>(hi - lo));
    t.close();
  }
  return t;
}

// PyTorch's compute_scales_value<float> of the nearest modes: 1 / scale_factor when given, else
// in / out.
float nearest_scale(const WindowArgs& a, int64_t j, int64_t in) {
  const double sc = a.scales[j];
  return sc > 0 ? static_cast<float>(1.0 / sc)
                : static_cast<float>(in) / static_cast<float>(a.output_size[j]);
}

// PyTorch's area_pixel_compute_scale (linear and cubic modes), in double.
double area_scale(const WindowArgs& a, int64_t j, int64_t in) {
  const int64_t out = a.output_size[j];
  const double sc = a.scales[j];
  if (a.align_corners) {
    return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  }
  return sc > 0 ? 1.0 / sc : static_cast<double>(in) / static_cast<double>(out);
}

// PyTorch's nearest_idx (float arithmetic, as its kernels: floor(o * scale), with out == in and
// out == 2 in special-cased) or, `exact`, nearest_neighbor_exact_compute_source_index:
// floorf((o + 0.5) * scale), the scale the same float, the product rounded to float before the
// floor (as floorf's argument), no special cases. That is PyTorch's backward and its float32
// forward; its float64 forward takes a double scale and picks another source on 30 of the 2,301
// sizes 1..39 -> 1..59 (there its gradient is not the adjoint of its forward): the taps here
// serve the forward and the backward alike. Plain nearest likewise: PyTorch's 1-d / 3-d float64
// forwards take a double scale (7 outputs of the sweep differ), its backward the float one.
DimTaps nearest_dim(const WindowArgs& a, int64_t j, int64_t in, bool exact) {
  const int64_t out = a.output_size[j];
  const float scale = nearest_scale(a, j, in);
  DimTaps t;
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) {
      const float src = static_cast<float>((static_cast<double>(o) + 0.5) * scale);
      i = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    } else if (out == in) {
      i = o;
    } else if (out == 2 * in) {
      i = o >> 1;
    } else {
      i = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    }
    t.add(i, 1.0);
    t.close();
  }
  return t;
}

// PyTorch's bicubic (upsample_bicubic2d): source x = scale * (o + 0.5) - 0.5 (not clamped at 0;
// scale * o with align_corners), taps floor(x) - 1 .. floor(x) + 2 clamped into [0, in) with
// the cubic convolution weights of t = x - floor(x), A = -0.75; in double. A tap of weight
// exactly 0 (t = 0: a dim whose size does not change, align_corners' whole sources) is left
// out, as linear_dim's: an identity resize returns its input, an inf stays out of its neighbours.
DimTaps cubic_dim(const WindowArgs& a, int64_t j, int64_t in) {
  const int64_t out = a.output_size[j];
  const double scale = area_scale(a, j, in);
  constexpr double kA = -0.75;
  const auto near = [](double x) { return ((kA + 2) * x - (kA + 3)) * x * x + 1; };  // |x| <= 1
  const auto far = [](double x) { return ((kA * x - 5 * kA) * x + 8 * kA) * x - 4 * kA; };  // 1-2
  DimTaps t;
  for (int64_t o = 0; o < out; ++o) {
    const double src = a.align_corners ? scale * static_cast<double>(o)
                                       : scale * (static_cast<double>(o) + 0.5) - 0.5;
    const double f = std::floor(src);
    const double l = src - f;
    const int64_t i = static_cast<int64_t>(f);
    const double w[4] = {far(l + 1.0), near(l), near(1.0 - l), far(2.0 - l)};
    for (int64_t k = 0; k < 4; ++k) {
      if (w[k] != 0.0) t.add(std::clamp<int64_t>(i - 1 + k, 0, in - 1), w[k]);
    }
    t.close();
  }
  return t;
}

// PyTorch's area_pixel_compute_source_index and the linear weights (guard_index_and_lambda), in
// double. A tap of weight exactly 0 (every output of a dim whose size does not change, the first
// outputs clamped at 0, align_corners' integer sources) is left out, so an inf or NaN there
// reaches no output it does not weigh in: an identity resize returns its input, and its backward
// the gradient (PyTorch's kernel multiplies the element by 0: an inf input gives NaN).
DimTaps linear_dim(const WindowArgs& a, int64_t j, int64_t in) {
  const int64_t out = a.output_size[j];
  const double scale = area_scale(a, j, in);
  DimTaps t;
  for (int64_t o = 0; o < out; ++o) {
    const double src = a.align_corners
                           ? scale * static_cast<double>(o)
                           : std::max(scale * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const double l1 = std::clamp(src - static_cast<double>(i0), 0.0, 1.0);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    if (l1 != 1.0) t.add(i0, 1.0 - l1);
    if (l1 != 0.0) t.add(i1, l1);
    t.close();
  }
  return t;
}

// F.pad of one dim (lo, hi elements; negative crops). Circular padding wraps around what the
// negative pads leave, as PyTorch's (it crops first): pad (-1, 2) of [1, 2, 3, 4] is
// [2, 3, 4, 2, 3], not [2, 3, 4, 1, 2].
DimTaps pad_dim(PadMode mode, int64_t in, int64_t lo, int64_t hi) {
  DimTaps t;
  const int64_t out = in + lo + hi;
  const int64_t crop_lo = std::max<int64_t>(-lo, 0);
  const int64_t kept = in - crop_lo - std::max<int64_t>(-hi, 0);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i = o - lo;
    switch (mode) {
      case PadMode::kConstant:
        if (i < 0 || i >= in) i = -1;
        break;
      case PadMode::kReflect:
        if (i < 0) i = -i;
        if (i >= in) i = 2 * (in - 1) - i;
        break;
      case PadMode::kReplicate:
        i = std::clamp<int64_t>(i, 0, in - 1);
        break;
      case PadMode::kCircular:
        i = crop_lo + (((o - std::max<int64_t>(lo, 0)) % kept) + kept) % kept;
        break;
    }
    if (i >= 0) t.add(i, 1.0);
    t.close();
  }
  return t;
}

// The product of per-dim taps (row-major over the output, each tap list row-major too).
Taps product(const std::vector<DimTaps>& dims, IntSpan in) {
  const size_t nd = dims.size();
  Taps t;
  t.in_size = product(in);
  Shape stride(nd, 1);
  int64_t total = 1;
  for (size_t d = nd; d-- > 0;) {
    if (d + 1 < nd) stride[d] = stride[d + 1] * in[d + 1];
    total *= dims[d].out();
  }
  Shape o(nd, 0);
  std::function<void(size_t, int64_t, double)> add = [&](size_t d, int64_t idx, double w) {
    if (d == nd) {
      t.index.push_back(idx);
      t.weight.push_back(w);
      return;
    }
    const DimTaps& dt = dims[d];
    for (int64_t q = dt.offsets[o[d]]; q < dt.offsets[o[d] + 1]; ++q) {
      add(d + 1, idx + dt.index[q] * stride[d], w * dt.weight[q]);
    }
  };
  for (int64_t flat = 0; flat < total; ++flat) {
    add(0, 0, 1.0);
    t.offsets.push_back(static_cast<int64_t>(t.index.size()));
    for (size_t d = nd; d-- > 0;) {
      if (++o[d] < dims[d].out()) break;
      o[d] = 0;
    }
  }
  return t;
}

// The padding modes by their PyTorch names: one table for parse_pad_mode and pad_mode_name.
constexpr std::pair<PadMode, const char*> kPadModes[] = {{PadMode::kConstant, "constant"},
                                                         {PadMode::kReflect, "reflect"},
                                                         {PadMode::kReplicate, "replicate"},
                                                         {PadMode::kCircular, "circular"}};

const char* pad_mode_name(PadMode m) {
  for (const auto& [mode, name] : kPadModes) {
    if (mode == m) return name;
  }
  return "constant";
}

// Checks a pool's sizes (PyTorch's pool*_shape_check words).
void check_pool(const WindowArgs& a) {
  for (int64_t j = 0; j < a.nd; ++j) {
    DT_CHECK(a.kernel[j] > 0, "[%s] kernel size should be greater than zero, got %d", a.op,
             a.kernel[j]);
    DT_CHECK(a.stride[j] > 0, "[%s] stride should be greater than zero, got %d", a.op, a.stride[j]);
    const int64_t d = a.kind == WindowKind::kMaxPool ? a.dilation[j] : 1;
    DT_CHECK(d > 0, "[%s] dilation should be greater than zero, got %d", a.op, d);
    DT_CHECK(a.padding[j] >= 0 && a.padding[j] <= ((a.kernel[j] - 1) * d + 1) / 2,
             "[%s] pad should be at most half of effective kernel size, but got pad=%d, "
             "kernel_size=%d and dilation=%d",
             a.op, a.padding[j], a.kernel[j], d);
  }
}

}  // namespace

PadMode parse_pad_mode(std::string_view mode, const char* op) {
  for (const auto& [m, name] : kPadModes) {
    if (mode == name) return m;
  }
  DT_FAIL("[%s] unknown padding mode '%s' (expected constant, reflect, replicate or circular)", op,
          std::string(mode).c_str());
}

WindowArgs parse_window_args(WindowKind kind, int64_t nd, const char* op,
                             absl::Span<const ArgValue> args) {
  WindowArgs a;
  a.kind = kind;
  a.nd = nd;
  a.op = op;
  const auto shape = [&](size_t i) { return std::get<Shape>(args.at(i)); };
  // The pools' first args: kernel_size, stride, padding.
  const auto pool_window = [&] {
    a.kernel = shape(0);
    a.stride = shape(1);
    a.padding = shape(2);
  };
  switch (kind) {
    case WindowKind::kPad:
      a.pad = shape(0);
      a.nd = static_cast<int64_t>(a.pad.size()) / 2;
      a.mode = parse_pad_mode(std::get<std::string_view>(args.at(1)), op);
      a.value = std::get<double>(args.at(2));
      break;
    case WindowKind::kAvgPool:
      pool_window();
      a.ceil_mode = std::get<bool>(args.at(3));
      a.count_include_pad = std::get<bool>(args.at(4));
      a.divisor_override = std::get<int64_t>(args.at(5));
      break;
    case WindowKind::kMaxPool:
      pool_window();
      a.dilation = shape(3);
      a.ceil_mode = std::get<bool>(args.at(4));
      break;
    case WindowKind::kAdaptiveAvg:
    case WindowKind::kAdaptiveMax:
      a.output_size = shape(0);
      break;
    case WindowKind::kNearest:
    case WindowKind::kNearestExact:
    case WindowKind::kLinear:
    case WindowKind::kCubic: {
      a.output_size = shape(0);
      const bool corners = kind == WindowKind::kLinear || kind == WindowKind::kCubic;
      const size_t first = corners ? 2 : 1;
      if (corners) a.align_corners = std::get<bool>(args.at(1));
      for (int64_t j = 0; j < nd; ++j) a.scales.push_back(std::get<double>(args.at(first + j)));
      break;
    }
  }
  return a;
}

ArgList window_arg_list(const WindowArgs& a) {
  switch (a.kind) {
    case WindowKind::kPad:
      return {a.pad, std::string_view(pad_mode_name(a.mode)), a.value};
    case WindowKind::kAvgPool:
      return {a.kernel, a.stride, a.padding, a.ceil_mode, a.count_include_pad, a.divisor_override};
    case WindowKind::kMaxPool:
      return {a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode};
    case WindowKind::kAdaptiveAvg:
    case WindowKind::kAdaptiveMax:
      return {a.output_size};
    case WindowKind::kNearest:
    case WindowKind::kNearestExact:
    case WindowKind::kLinear:
    case WindowKind::kCubic: {
      ArgList l{a.output_size};
      if (a.kind == WindowKind::kLinear || a.kind == WindowKind::kCubic) {
        l.push_back(a.align_corners);
      }
      for (double s : a.scales) l.push_back(s);
      return l;
    }
  }
  return {};
}

Shape window_out_shape(const WindowArgs& a, IntSpan in_shape) {
  const int64_t n = static_cast<int64_t>(in_shape.size()), nd = a.nd;
  Shape out(in_shape.begin(), in_shape.end());
  if (a.kind == WindowKind::kPad) {
    DT_CHECK(a.pad.size() % 2 == 0 && nd <= n,
             "[%s] padding length must be even and at most twice the input's rank %d, got %d", a.op,
             n, static_cast<int64_t>(a.pad.size()));
    if (a.mode != PadMode::kConstant) {
      DT_CHECK(nd >= 1 && nd <= 3 && (n == nd + 1 || n == nd + 2),
               "[%s] %s padding of %d dims expects a %dD or %dD input, got %dD", a.op,
               pad_mode_name(a.mode), nd, nd + 1, nd + 2, n);
    }
    for (int64_t j = 0; j < nd; ++j) {
      const int64_t d = n - 1 - j, in = in_shape[d], lo = a.pad[2 * j], hi = a.pad[2 * j + 1];
      if (a.mode == PadMode::kReflect) {
        DT_CHECK(lo < in && hi < in,
                 "[%s] padding size should be less than the corresponding input dimension, "
                 "but got padding (%d, %d) at dimension %d of input %s",
                 a.op, lo, hi, d, shape_str(in_shape));
      } else if (a.mode == PadMode::kCircular) {
        // The wrap reads what the crop leaves, so each side's padding must fit in that (PyTorch
        // refuses more too: F.pad([1, 2, 3, 4], (-2, 3), 'circular') raises).
        const int64_t kept = in + std::min<int64_t>(lo, 0) + std::min<int64_t>(hi, 0);
        DT_CHECK(kept > 0 || in + lo + hi <= 0,
                 "[%s] circular padding (%d, %d) crops all of dimension %d of input %s and "
                 "has nothing left to wrap around",
                 a.op, lo, hi, d, shape_str(in_shape));
        DT_CHECK(lo <= kept && hi <= kept,
                 "[%s] padding value causes wrapping around more than once (padding (%d, %d) "
                 "at dimension %d of input %s)",
                 a.op, lo, hi, d, shape_str(in_shape));
      } else if (a.mode == PadMode::kReplicate) {
        DT_CHECK(in > 0, "[%s] replicate padding of an empty dim %d", a.op, d);
      }
      out[d] = in + lo + hi;
      DT_CHECK(out[d] >= 0, "[%s] the input size %d, plus negative padding %d and %d, is negative",
               a.op, in, lo, hi);
    }
    return out;
  }
  const bool pool = a.kind == WindowKind::kAvgPool || a.kind == WindowKind::kMaxPool;
  const bool interp = a.kind == WindowKind::kNearest || a.kind == WindowKind::kLinear ||
                      a.kind == WindowKind::kNearestExact || a.kind == WindowKind::kCubic;
  DT_CHECK(interp ? n == nd + 2 : (n == nd + 1 || n == nd + 2), "[%s] expected a %s input, got %s",
           a.op,
           interp ? (std::to_string(nd + 2) + "D").c_str()
                  : (std::to_string(nd + 1) + "D or " + std::to_string(nd + 2) + "D").c_str(),
           shape_str(in_shape));
  for (int64_t j = 0; j < nd; ++j) {
    const int64_t d = n - nd + j, in = in_shape[d];
    DT_CHECK(in > 0, "[%s] expected non-empty spatial dims, got input %s", a.op,
             shape_str(in_shape));
    if (pool) {
      const int64_t dil = a.kind == WindowKind::kMaxPool ? a.dilation[j] : 1;
      out[d] = pool_out(in, a.kernel[j], a.stride[j], a.padding[j], dil, a.ceil_mode);
      DT_CHECK(out[d] > 0, "[%s] given input %s, the calculated output size is too small", a.op,
               shape_str(in_shape));
    } else {
      DT_CHECK(a.output_size[j] > 0, "[%s] output size must be positive, got %d", a.op,
               a.output_size[j]);
      out[d] = a.output_size[j];
    }
  }
  if (pool) check_pool(a);
  return out;
}

std::vector<DimTaps> window_dim_taps(const WindowArgs& a, IntSpan in_spatial) {
  std::vector<DimTaps> dims;
  const int64_t nd = a.nd;
  for (int64_t j = 0; j < nd; ++j) {
    const int64_t in = in_spatial[j];
    switch (a.kind) {
      case WindowKind::kPad: {
        const int64_t k = nd - 1 - j;  // pad pairs run from the last dim
        dims.push_back(pad_dim(a.mode, in, a.pad[2 * k], a.pad[2 * k + 1]));
        break;
      }
      case WindowKind::kAvgPool:
      case WindowKind::kMaxPool:
        dims.push_back(pool_dim(a, j, in));
        break;
      case WindowKind::kAdaptiveAvg:
      case WindowKind::kAdaptiveMax:
        dims.push_back(adaptive_dim(a, j, in));
        break;
      case WindowKind::kNearest:
      case WindowKind::kNearestExact:
        dims.push_back(nearest_dim(a, j, in, /*exact=*/a.kind == WindowKind::kNearestExact));
        break;
      case WindowKind::kLinear:
        dims.push_back(linear_dim(a, j, in));
        break;
      case WindowKind::kCubic:
        dims.push_back(cubic_dim(a, j, in));
        break;
    }
  }
  return dims;
}

Taps window_taps(const WindowArgs& a, IntSpan in_spatial) {
  Taps t = product(window_dim_taps(a, in_spatial), in_spatial);
  if (a.kind == WindowKind::kAvgPool && a.divisor_override > 0) {
    for (double& w : t.weight) w /= static_cast<double>(a.divisor_override);
  }
  if (a.kind == WindowKind::kPad && a.mode == PadMode::kConstant) {
    t.fill = true;
    t.value = a.value;
  }
  t.gather = t.index.size() + 1 == t.offsets.size() &&
             std::all_of(t.weight.begin(), t.weight.end(), [](double w) { return w == 1.0; });
  return t;
}

Taps transpose_taps(const Taps& t, int64_t out_size) {
  Taps r;
  r.in_size = out_size;
  const int64_t n_in = t.in_size;
  std::vector<int64_t> count(static_cast<size_t>(n_in) + 1, 0);
  for (int64_t i : t.index) ++count[i + 1];
  for (int64_t i = 0; i < n_in; ++i) count[i + 1] += count[i];
  r.offsets = count;
  r.index.resize(t.index.size());
  r.weight.resize(t.index.size());
  for (int64_t o = 0; o + 1 < static_cast<int64_t>(t.offsets.size()); ++o) {
    for (int64_t q = t.offsets[o]; q < t.offsets[o + 1]; ++q) {
      const int64_t at = count[t.index[q]]++;
      r.index[at] = o;
      r.weight[at] = t.weight[q];
    }
  }
  return r;
}

TapTensors tap_tensors(const Taps& t, Device device) {
  TapTensors r;
  r.offsets = from_vector(t.offsets, {static_cast<int64_t>(t.offsets.size())}, device);
  r.index = from_vector(t.index, {static_cast<int64_t>(t.index.size())}, device);
  r.weight = from_vector(t.weight, {static_cast<int64_t>(t.weight.size())}, device);
  r.in_size = t.in_size;
  r.fill = t.fill;
  r.value = t.value;
  r.gather = t.gather;
  return r;
}

namespace {

// x as contiguous planes [P, I] over its last nd dims.
Tensor planes(const Tensor& x, int64_t nd) {
  const IntSpan s = x.sizes();
  const int64_t lead = static_cast<int64_t>(s.size()) - nd;
  return x.contiguous().reshape({product(s.subspan(0, lead)), product(s.subspan(lead))});
}

}  // namespace

Tensor window_forward(const Tensor& x, const WindowArgs& a) {
  if (a.kind == WindowKind::kPad && a.mode == PadMode::kConstant) {
    return dtensor::pad(x, a.pad, Scalar(a.value));
  }
  detail::check_floating_input(a.op, x);
  const Shape out_shape = window_out_shape(a, x.sizes());
  const int64_t lead = x.dim() - a.nd;
  const Tensor xp = planes(x, a.nd);
  Tensor out = empty({xp.size(0), product(IntSpan(out_shape).subspan(lead))},
                     TensorOptions(x.dtype(), x.device()));
  const IntSpan in_spatial = IntSpan(x.sizes()).subspan(static_cast<size_t>(lead));
  if (a.kind == WindowKind::kLinear &&
      linear_direct(xp, window_dim_taps(a, in_spatial), in_spatial, out)) {
    return out.reshape(out_shape);
  }
  window_sum_planes(xp, tap_tensors(window_taps(a, in_spatial), x.device()), out);
  return out.reshape(out_shape);
}

std::pair<Tensor, Tensor> window_max_forward(const Tensor& x, const WindowArgs& a) {
  detail::check_floating_input(a.op, x);
  const Shape out_shape = window_out_shape(a, x.sizes());
  const int64_t lead = x.dim() - a.nd;
  const Tensor xp = planes(x, a.nd);
  const Shape flat{xp.size(0), product(IntSpan(out_shape).subspan(lead))};
  Tensor values = empty(flat, TensorOptions(x.dtype(), x.device()));
  Tensor indices = empty(flat, TensorOptions(kInt64, x.device()));
  const IntSpan in_spatial = IntSpan(x.sizes()).subspan(static_cast<size_t>(lead));
  if (a.kind == WindowKind::kMaxPool &&
      max_pool_direct(xp, a, in_spatial, IntSpan(out_shape).subspan(lead), values, indices)) {
    return {values.reshape(out_shape), indices.reshape(out_shape)};
  }
  window_max_planes(xp, tap_tensors(window_taps(a, in_spatial), x.device()), values, indices);
  return {values.reshape(out_shape), indices.reshape(out_shape)};
}

Tensor window_backward(const Tensor& g, const WindowArgs& a, IntSpan in_shape) {
  if (a.kind == WindowKind::kPad && a.mode == PadMode::kConstant) {
    Shape crop(a.pad.begin(), a.pad.end());
    for (int64_t& p : crop) p = -p;
    return dtensor::pad(g, crop, Scalar(0));
  }
  detail::check_floating_input(a.op, g, "grad_output");
  const int64_t lead = static_cast<int64_t>(in_shape.size()) - a.nd;
  const Tensor gp = planes(g, a.nd);
  const Taps fwd = window_taps(a, in_shape.subspan(lead));
  Tensor out = empty({gp.size(0), fwd.in_size}, TensorOptions(g.dtype(), g.device()));
  window_sum_planes(gp, tap_tensors(transpose_taps(fwd, gp.size(1)), g.device()), out);
  return out.reshape(in_shape);
}

Tensor max_window_backward(const Tensor& g, const Tensor& indices, IntSpan in_shape, int64_t nd) {
  detail::check_floating_input("max_pool_backward", g, "grad_output");
  const int64_t lead = static_cast<int64_t>(in_shape.size()) - nd;
  const Tensor gp = planes(g, nd);
  Tensor out =
      zeros({gp.size(0), product(in_shape.subspan(lead))}, TensorOptions(g.dtype(), g.device()));
  index_add_planes(gp, planes(indices, nd), out);
  return out.reshape(in_shape);
}

namespace {
const char* const kMaxNames[] = {"", "max_pool1d_with_indices", "max_pool2d_with_indices",
                                 "max_pool3d_with_indices"};
const char* const kAvgNames[] = {"", "avg_pool1d", "avg_pool2d", "avg_pool3d"};
const char* const kAdaptiveAvgNames[] = {"", "adaptive_avg_pool1d", "adaptive_avg_pool2d"};
const char* const kNearestNames[] = {"", "upsample_nearest1d", "upsample_nearest2d",
                                     "upsample_nearest3d"};
const char* const kLinearNames[] = {"", "upsample_linear1d", "upsample_bilinear2d",
                                    "upsample_trilinear3d"};
const char* const kNearestExactNames[] = {"", "_upsample_nearest_exact1d",
                                          "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"};
}  // namespace

WindowArgs pool_args(WindowKind kind, int64_t nd, IntSpan kernel, IntSpan stride, IntSpan padding,
                     IntSpan dilation, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override) {
  WindowArgs a;
  a.kind = kind;
  a.nd = nd;
  a.op = kind == WindowKind::kMaxPool ? kMaxNames[nd] : kAvgNames[nd];
  a.kernel = expand(kernel, nd, {}, a.op, "kernel_size");
  a.stride = stride.empty() ? a.kernel : expand(stride, nd, {}, a.op, "stride");
  const int64_t zero[] = {0}, one[] = {1};
  a.padding = expand(padding, nd, zero, a.op, "padding");
  if (kind == WindowKind::kMaxPool) a.dilation = expand(dilation, nd, one, a.op, "dilation");
  a.ceil_mode = ceil_mode;
  a.count_include_pad = count_include_pad;
  if (divisor_override.has_value()) {
    DT_CHECK(*divisor_override != 0, "[%s] divisor must be not zero", a.op);
    a.divisor_override = *divisor_override;
  }
  return a;
}

WindowArgs adaptive_args(WindowKind kind, int64_t nd, IntSpan output_size) {
  WindowArgs a;
  a.kind = kind;
  a.nd = nd;
  a.op = kind == WindowKind::kAdaptiveMax ? "adaptive_max_pool2d" : kAdaptiveAvgNames[nd];
  a.output_size = expand(output_size, nd, {}, a.op, "output_size");
  return a;
}

WindowArgs pad_args(IntSpan pad, const char* mode, double value) {
  WindowArgs a;
  a.kind = WindowKind::kPad;
  a.op = "pad";
  // pad(x, pads, 0) picks this overload (0 is a null pointer) rather than the tensor layer's
  // pad(x, pads, Scalar): refuse it instead of reading a null mode.
  DT_CHECK(mode != nullptr,
           "[pad] mode is null (a literal 0 as the third argument?): pass a mode, e.g. "
           "pad(x, pad, \"constant\", 0.0), or Scalar(0) for the constant pad");
  a.pad = Shape(pad.begin(), pad.end());
  a.nd = static_cast<int64_t>(pad.size()) / 2;
  a.mode = parse_pad_mode(mode, "pad");
  a.value = value;
  return a;
}

WindowArgs interpolate_args(IntSpan in_shape, IntSpan size, absl::Span<const double> scale_factor,
                            const char* mode, std::optional<bool> align_corners) {
  const int64_t nd = static_cast<int64_t>(in_shape.size()) - 2;
  const std::string m = mode;
  WindowArgs a;
  a.nd = nd;
  a.op = "interpolate";
  if (m == "nearest" || m == "nearest-exact") {
    a.kind = m == "nearest" ? WindowKind::kNearest : WindowKind::kNearestExact;
    DT_CHECK(!align_corners.has_value(),
             "[interpolate] align_corners option can only be set with the interpolating modes: "
             "linear | bilinear | bicubic | trilinear");
  } else if ((m == "linear" && nd == 1) || (m == "bilinear" && nd == 2) ||
             (m == "trilinear" && nd == 3)) {
    a.kind = WindowKind::kLinear;
    a.align_corners = align_corners.value_or(false);
  } else if (m == "bicubic" && nd == 2) {
    a.kind = WindowKind::kCubic;
    a.align_corners = align_corners.value_or(false);
  } else {
    DT_FAIL(
        "[interpolate] mode '%s' is not supported for a %dD input (nearest, nearest-exact: "
        "3D-5D, linear: 3D, bilinear, bicubic: 4D, trilinear: 5D)",
        mode, static_cast<int64_t>(in_shape.size()));
  }
  DT_CHECK(nd >= 1 && nd <= 3, "[interpolate] expected a 3D, 4D or 5D input, got %s",
           shape_str(in_shape));
  a.op = a.kind == WindowKind::kNearest        ? kNearestNames[nd]
         : a.kind == WindowKind::kNearestExact ? kNearestExactNames[nd]
         : a.kind == WindowKind::kCubic        ? "upsample_bicubic2d"
                                               : kLinearNames[nd];
  DT_CHECK(size.empty() != scale_factor.empty(),
           "[interpolate] exactly one of size or scale_factor should be defined");
  if (!size.empty()) {
    a.output_size = expand(size, nd, {}, "interpolate", "size");
    a.scales.assign(static_cast<size_t>(nd), 0.0);
  } else {
    DT_CHECK(static_cast<int64_t>(scale_factor.size()) == 1 ||
                 static_cast<int64_t>(scale_factor.size()) == nd,
             "[interpolate] scale_factor must be a single value or %d values", nd);
    for (int64_t j = 0; j < nd; ++j) {
      const double s = scale_factor[scale_factor.size() == 1 ? 0 : j];
      DT_CHECK(s > 0, "[interpolate] scale_factor must be positive, got %g", s);
      a.scales.push_back(s);
      a.output_size.push_back(
          static_cast<int64_t>(std::floor(static_cast<double>(in_shape[2 + j]) * s)));
    }
  }
  return a;
}

}  // namespace detail
}  // namespace dtensor

// ---- the public Tensor functions ----------------------------------------------------------------
namespace dtensor {
namespace {

using detail::WindowKind;

ValuesIndices max_pair(const Tensor& x, const detail::WindowArgs& a) {
  auto [v, i] = detail::window_max_forward(x, a);
  return {std::move(v), std::move(i)};
}

ValuesIndices max_pool(int64_t nd, const Tensor& x, IntSpan kernel, IntSpan stride, IntSpan padding,
                       IntSpan dilation, bool ceil_mode) {
  return max_pair(x, detail::pool_args(WindowKind::kMaxPool, nd, kernel, stride, padding, dilation,
                                       ceil_mode, true, std::nullopt));
}

Tensor avg_pool(int64_t nd, const Tensor& x, IntSpan kernel, IntSpan stride, IntSpan padding,
                bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return detail::window_forward(
      x, detail::pool_args(WindowKind::kAvgPool, nd, kernel, stride, padding, {}, ceil_mode,
                           count_include_pad, divisor_override));
}

}  // namespace

Tensor pad(const Tensor& x, IntSpan pad, const char* mode, double value) {
  return detail::window_forward(x, detail::pad_args(pad, mode, value));
}

Tensor max_pool1d(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d, bool ceil_mode) {
  return max_pool(1, x, k, s, p, d, ceil_mode).values;
}
Tensor max_pool2d(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d, bool ceil_mode) {
  return max_pool(2, x, k, s, p, d, ceil_mode).values;
}
Tensor max_pool3d(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d, bool ceil_mode) {
  return max_pool(3, x, k, s, p, d, ceil_mode).values;
}
ValuesIndices max_pool1d_with_indices(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d,
                                      bool ceil_mode) {
  return max_pool(1, x, k, s, p, d, ceil_mode);
}
ValuesIndices max_pool2d_with_indices(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d,
                                      bool ceil_mode) {
  return max_pool(2, x, k, s, p, d, ceil_mode);
}
ValuesIndices max_pool3d_with_indices(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d,
                                      bool ceil_mode) {
  return max_pool(3, x, k, s, p, d, ceil_mode);
}

Tensor avg_pool1d(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                  bool count_include_pad) {
  return avg_pool(1, x, k, s, p, ceil_mode, count_include_pad, std::nullopt);
}
Tensor avg_pool2d(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool(2, x, k, s, p, ceil_mode, count_include_pad, divisor_override);
}
Tensor avg_pool3d(const Tensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool(3, x, k, s, p, ceil_mode, count_include_pad, divisor_override);
}

Tensor adaptive_avg_pool1d(const Tensor& x, IntSpan output_size) {
  return detail::window_forward(x, detail::adaptive_args(WindowKind::kAdaptiveAvg, 1, output_size));
}
Tensor adaptive_avg_pool2d(const Tensor& x, IntSpan output_size) {
  return detail::window_forward(x, detail::adaptive_args(WindowKind::kAdaptiveAvg, 2, output_size));
}
Tensor adaptive_max_pool2d(const Tensor& x, IntSpan output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).values;
}
ValuesIndices adaptive_max_pool2d_with_indices(const Tensor& x, IntSpan output_size) {
  return max_pair(x, detail::adaptive_args(WindowKind::kAdaptiveMax, 2, output_size));
}

Tensor interpolate(const Tensor& x, IntSpan size, std::vector<double> scale_factor,
                   const char* mode, std::optional<bool> align_corners) {
  DT_CHECK(x.defined(), "[interpolate] argument input is an undefined tensor");
  return detail::window_forward(
      x, detail::interpolate_args(x.sizes(), size, scale_factor, mode, align_corners));
}

}  // namespace dtensor
