// The window ops of the pool family (pad, max / avg / adaptive pools, interpolate) as one
// computation: every output element of a plane (the leading dims, batch and channels) reads a
// list of taps, (input element of the same plane, weight). A linear op sums weight * x over its
// taps (its backward sums over the transposed taps); a max op takes the largest tap and
// remembers its index. Taps of an N-d op are the product of per-dim taps, in row-major order
// (first spatial dim outermost), which is the order PyTorch's kernels scan a window in, so ties
// and NaN go where PyTorch's go. The tables are built on the host per call (pool.cc); the
// kernels run them (pool_cpu.cc, pool_cuda.cu). On the CPU, float32 / float64 max pools and
// linear interpolation skip the product table for direct kernels that give the same bits
// (pool_direct_cpu.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

enum class WindowKind : uint8_t {
  kPad,           // args: pad (Shape), mode (string_view), value (double)
  kAvgPool,       // kernel, stride, padding (Shape), ceil_mode, count_include_pad (bool),
                  // divisor_override (int64, 0: none)
  kMaxPool,       // kernel, stride, padding, dilation (Shape), ceil_mode (bool)
  kAdaptiveAvg,   // output_size (Shape)
  kAdaptiveMax,   // output_size (Shape)
  kNearest,       // output_size (Shape), then one scale (double, <= 0: none) per spatial dim
  kLinear,        // output_size (Shape), align_corners (bool), then one scale per spatial dim
  kNearestExact,  // as kNearest ("nearest-exact": floor((o + 0.5) * scale))
  kCubic,         // as kLinear ("bicubic": four taps per dim, A = -0.75, clamped at the edges)
};

enum class PadMode : uint8_t { kConstant, kReflect, kReplicate, kCircular };

// An op's parsed args; `nd` spatial dims (the last nd dims of the input).
struct WindowArgs {
  WindowKind kind = WindowKind::kPad;
  int64_t nd = 0;
  Shape kernel, stride, padding, dilation;  // pools
  bool ceil_mode = false, count_include_pad = true;
  int64_t divisor_override = 0;
  Shape output_size;           // adaptive pools, interpolate
  std::vector<double> scales;  // interpolate (<= 0: none)
  bool align_corners = false;
  Shape pad;  // F.pad order: last dim's (lo, hi) first
  PadMode mode = PadMode::kConstant;
  double value = 0;
  const char* op = "";  // the op's name, for messages
};

// The args of op `kind` (op name `op`, `nd` spatial dims; for kPad nd is pad.size() / 2) from
// the op's arg list; checked against the input's shape by window_out_shape.
WindowArgs parse_window_args(WindowKind kind, int64_t nd, const char* op,
                             absl::Span<const ArgValue> args);
// The arg list of `a` (the inverse of parse_window_args).
ArgList window_arg_list(const WindowArgs& a);
PadMode parse_pad_mode(std::string_view mode, const char* op);

// The args of the public functions, expanded and checked (pool.cc); `op` is the registered op's
// name: max_pool{1,2,3}d_with_indices, avg_pool{1,2,3}d, adaptive_avg_pool{1,2}d,
// adaptive_max_pool2d, upsample_nearest{1,2,3}d, _upsample_nearest_exact{1,2,3}d,
// upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d, upsample_bicubic2d, pad.
WindowArgs pool_args(WindowKind kind, int64_t nd, IntSpan kernel, IntSpan stride, IntSpan padding,
                     IntSpan dilation, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override);
WindowArgs adaptive_args(WindowKind kind, int64_t nd, IntSpan output_size);
WindowArgs pad_args(IntSpan pad, const char* mode, double value);
WindowArgs interpolate_args(IntSpan in_shape, IntSpan size, absl::Span<const double> scale_factor,
                            const char* mode, std::optional<bool> align_corners);

// The output's shape for an input of `in_shape` (checks the rank and the args, throwing
// "[op] ..." as PyTorch would).
Shape window_out_shape(const WindowArgs& a, IntSpan in_shape);

// Taps of one spatial dim: output o reads index[offsets[o] .. offsets[o+1]) with weight[...].
struct DimTaps {
  std::vector<int64_t> offsets{0}, index;
  std::vector<double> weight;
  void add(int64_t i, double w) {
    index.push_back(i);
    weight.push_back(w);
  }
  void close() { offsets.push_back(static_cast<int64_t>(index.size())); }
  int64_t out() const { return static_cast<int64_t>(offsets.size()) - 1; }
};
// The per-dim taps of `a` over an input plane of `in_spatial` (window_taps is their product).
std::vector<DimTaps> window_dim_taps(const WindowArgs& a, IntSpan in_spatial);

// Taps in CSR form: output element o (row-major over the output's spatial dims) reads
// index[offsets[o] .. offsets[o+1]) (flat input spatial positions) with weight[...].
struct Taps {
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> index;
  std::vector<double> weight;
  int64_t in_size = 0;  // the input plane's element count
  bool fill = false;    // outputs without taps take `value` (constant pad)
  double value = 0;
  bool gather = false;  // every output reads one tap of weight 1 (pads, nearest): a copy
};
Taps window_taps(const WindowArgs& a, IntSpan in_spatial);
// The taps of the transposed map (input element i reads the outputs that read it, same weights),
// for the backward of a linear window op; `out_size` is the output plane's element count.
Taps transpose_taps(const Taps& t, int64_t out_size);

// The taps as tensors on `device`: offsets and index int64, weight float64.
struct TapTensors {
  Tensor offsets, index, weight;
  int64_t in_size = 0;
  bool fill = false;
  double value = 0;
  bool gather = false;
};
TapTensors tap_tensors(const Taps& t, Device device);

// Kernels on contiguous planes [P, I] -> [P, O] (floating dtypes; CPU here, CUDA in
// pool_cuda.cu): out = sum of weight * x over each output's taps (accumulated in double, rounded
// once; `value` where an output has no tap and t.fill); values / indices (int64, flat input
// position) = the max over each output's taps (the first largest, NaN wins, as PyTorch); and
// out [P, I] = zeros + g [P, O] added at the indices.
void window_sum_planes(const Tensor& x, const TapTensors& t, const Tensor& out);
void window_max_planes(const Tensor& x, const TapTensors& t, const Tensor& values,
                       const Tensor& indices);
void index_add_planes(const Tensor& g, const Tensor& indices, const Tensor& out);
void window_sum_planes_cuda(const Tensor& x, const TapTensors& t, const Tensor& out);
void window_max_planes_cuda(const Tensor& x, const TapTensors& t, const Tensor& values,
                            const Tensor& indices);
void index_add_planes_cuda(const Tensor& g, const Tensor& indices, const Tensor& out);

// Direct CPU kernels of the two hot window ops (pool_direct_cpu.cc), computing bit for bit what
// the tap kernels above compute from the tables, without the tables' per-tap loads: a max pool
// (kMaxPool args; `out_spatial` from window_out_shape) scanning each window in the same order,
// and a linear interpolation from its per-dim taps (two per output: the same double weight
// products, summed in the same order). Each returns false, computing nothing, where it does not
// apply (not on the CPU, or not float32 / float64): the caller runs the tap kernel.
bool max_pool_direct(const Tensor& x, const WindowArgs& a, IntSpan in_spatial, IntSpan out_spatial,
                     const Tensor& values, const Tensor& indices);
bool linear_direct(const Tensor& x, const std::vector<DimTaps>& dims, IntSpan in_spatial,
                   const Tensor& out);

// The local ops (pool.cc): the forward of a linear window op, of a max op (values, indices), the
// backward of a linear op (g: the output's shape, to `in_shape`) and of a max op (`nd` spatial
// dims).
Tensor window_forward(const Tensor& x, const WindowArgs& a);
std::pair<Tensor, Tensor> window_max_forward(const Tensor& x, const WindowArgs& a);
Tensor window_backward(const Tensor& g, const WindowArgs& a, IntSpan in_shape);
Tensor max_window_backward(const Tensor& g, const Tensor& indices, IntSpan in_shape, int64_t nd);

}  // namespace dtensor::detail
