// Window ops over the trailing (spatial) dims, as torch.nn.functional defines them: padding
// (constant, reflect, replicate, circular), max / average pooling, adaptive average / max
// pooling and interpolation (nearest, nearest-exact, linear, bilinear, bicubic, trilinear).
//
// Inputs are (C, *spatial) or (N, C, *spatial) for the pools (N, C, *spatial for interpolate;
// any rank for constant padding); the leading dims are planes computed independently. Floating
// dtypes (float32, float64, bfloat16; sums accumulate in double and round once; constant `pad`
// of the local form takes every dtype). Stride {} means the kernel size; a single value applies
// to every spatial dim (PyTorch's int form). Max pool indices are int64 flat positions in the
// input's spatial plane, as PyTorch's.
//
// DTensor forms: the leading (batch, channel) dims keep their sharding, without communication.
// Max and avg pools of a batched input sharded on its first spatial dim (dim 2) on one mesh dim,
// Replicate on the others, exchange halos with the neighbours (conv's mechanism: the edge rows
// sent point to point, whatever the stride / padding / dilation) and return Shard(2); other
// spatially sharded inputs are gathered along those dims first.
// The linear ops (avg and adaptive avg pools, interpolate) also pass Partial inputs through.
// Every op is differentiable with PyTorch's formula: the linear ops through their transposed
// windows, max pools by adding the gradient at the saved indices (ties go to the index the
// forward chose, the first largest in window order, as PyTorch).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// F.pad(x, pad, mode, value): pad = {last_lo, last_hi, prev_lo, prev_hi, ...}. mode "constant"
// (any dims, negative pads crop; the tensor layer's pad), "reflect" (pads < the dim's size),
// "replicate", "circular" (pads <= the dim's size): these pad the last pad.size() / 2 dims of a
// tensor with one or two more dims, as PyTorch. pad(x, pads, 0) resolves here (0 is a null
// pointer) and raises: write pad(x, pads, Scalar(0)) or pad(x, pads, "constant", 0.0).
Tensor pad(const Tensor& x, IntSpan pad, const char* mode, double value = 0);
DTensor pad(const DTensor& x, IntSpan pad, const char* mode = "constant", double value = 0);

// F.max_pool{1,2,3}d: output size floor((in + 2p - d(k-1) - 1) / s) + 1 (ceil with ceil_mode,
// a last window starting in the right padding dropped); p <= (d(k-1)+1) / 2. The
// *_with_indices forms (return_indices=True) also return the indices.
Tensor max_pool1d(const Tensor& x, IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                  IntSpan dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                  IntSpan dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                  IntSpan dilation = {1}, bool ceil_mode = false);
ValuesIndices max_pool1d_with_indices(const Tensor& x, IntSpan kernel_size, IntSpan stride = {},
                                      IntSpan padding = {0}, IntSpan dilation = {1},
                                      bool ceil_mode = false);
ValuesIndices max_pool2d_with_indices(const Tensor& x, IntSpan kernel_size, IntSpan stride = {},
                                      IntSpan padding = {0}, IntSpan dilation = {1},
                                      bool ceil_mode = false);
ValuesIndices max_pool3d_with_indices(const Tensor& x, IntSpan kernel_size, IntSpan stride = {},
                                      IntSpan padding = {0}, IntSpan dilation = {1},
                                      bool ceil_mode = false);
DTensor max_pool1d(const DTensor& x, IntSpan kernel_size, IntSpan stride = {},
                   IntSpan padding = {0}, IntSpan dilation = {1}, bool ceil_mode = false);
DTensor max_pool2d(const DTensor& x, IntSpan kernel_size, IntSpan stride = {},
                   IntSpan padding = {0}, IntSpan dilation = {1}, bool ceil_mode = false);
DTensor max_pool3d(const DTensor& x, IntSpan kernel_size, IntSpan stride = {},
                   IntSpan padding = {0}, IntSpan dilation = {1}, bool ceil_mode = false);
DTensorValuesIndices max_pool1d_with_indices(const DTensor& x, IntSpan kernel_size,
                                             IntSpan stride = {}, IntSpan padding = {0},
                                             IntSpan dilation = {1}, bool ceil_mode = false);
DTensorValuesIndices max_pool2d_with_indices(const DTensor& x, IntSpan kernel_size,
                                             IntSpan stride = {}, IntSpan padding = {0},
                                             IntSpan dilation = {1}, bool ceil_mode = false);
DTensorValuesIndices max_pool3d_with_indices(const DTensor& x, IntSpan kernel_size,
                                             IntSpan stride = {}, IntSpan padding = {0},
                                             IntSpan dilation = {1}, bool ceil_mode = false);

// F.avg_pool{1,2,3}d: the output size of max pool (dilation 1), p <= k / 2. The divisor is the
// window's size clipped to the padded input (count_include_pad) or to the input, or
// divisor_override (not for 1-d, as PyTorch).
Tensor avg_pool1d(const Tensor& x, IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool3d(const Tensor& x, IntSpan kernel_size, IntSpan stride = {}, IntSpan padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
DTensor avg_pool1d(const DTensor& x, IntSpan kernel_size, IntSpan stride = {},
                   IntSpan padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
DTensor avg_pool2d(const DTensor& x, IntSpan kernel_size, IntSpan stride = {},
                   IntSpan padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                   std::optional<int64_t> divisor_override = std::nullopt);
DTensor avg_pool3d(const DTensor& x, IntSpan kernel_size, IntSpan stride = {},
                   IntSpan padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                   std::optional<int64_t> divisor_override = std::nullopt);

// F.adaptive_avg_pool{1,2}d / F.adaptive_max_pool2d: output element o of a dim of `in` elements
// covers [floor(o * in / out), ceil((o + 1) * in / out)).
Tensor adaptive_avg_pool1d(const Tensor& x, IntSpan output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, IntSpan output_size);
Tensor adaptive_max_pool2d(const Tensor& x, IntSpan output_size);
ValuesIndices adaptive_max_pool2d_with_indices(const Tensor& x, IntSpan output_size);
DTensor adaptive_avg_pool1d(const DTensor& x, IntSpan output_size);
DTensor adaptive_avg_pool2d(const DTensor& x, IntSpan output_size);
DTensor adaptive_max_pool2d(const DTensor& x, IntSpan output_size);
DTensorValuesIndices adaptive_max_pool2d_with_indices(const DTensor& x, IntSpan output_size);

// F.interpolate(x, size, scale_factor, mode, align_corners) on (N, C, *spatial) inputs: exactly
// one of `size` and `scale_factor` (one value for every spatial dim, or one each; the output
// size is floor(in * scale) and the scale is used as given, recompute_scale_factor=None). mode
// "nearest" (PyTorch's legacy nearest: floor(o * in / out)), "nearest-exact" (floor((o + 0.5) *
// in / out)), "linear" (3-d input), "bilinear" (4-d), "bicubic" (4-d; A = -0.75, the edge rows
// repeated, so values may overshoot the input's range as PyTorch's), "trilinear" (5-d);
// align_corners only for the linear and cubic modes (default false).
Tensor interpolate(const Tensor& x, IntSpan size = {}, std::vector<double> scale_factor = {},
                   const char* mode = "nearest", std::optional<bool> align_corners = std::nullopt);
DTensor interpolate(const DTensor& x, IntSpan size = {}, std::vector<double> scale_factor = {},
                    const char* mode = "nearest", std::optional<bool> align_corners = std::nullopt);

}  // namespace dtensor
