// The DTensor forms of the pool family (registered in pool_strategy.cc).
#include <string>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/ops/pool/pool.h"

namespace dtensor {
namespace {

using detail::WindowArgs;
using detail::WindowKind;

DTensor run(const DTensor& x, const WindowArgs& a) {
  return dispatch(ops_op(a.op), {&x}, detail::window_arg_list(a));
}

DTensorValuesIndices run_max(const DTensor& x, const WindowArgs& a) {
  DTensorList outs = dispatch_multi(ops_op(a.op), {&x}, detail::window_arg_list(a));
  return {std::move(outs[0]), std::move(outs[1])};
}

DTensorValuesIndices max_pool(int64_t nd, const DTensor& x, IntSpan k, IntSpan s, IntSpan p,
                              IntSpan d, bool ceil_mode) {
  return run_max(
      x, detail::pool_args(WindowKind::kMaxPool, nd, k, s, p, d, ceil_mode, true, std::nullopt));
}

DTensor avg_pool(int64_t nd, const DTensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                 bool count_include_pad, std::optional<int64_t> divisor_override) {
  return run(x, detail::pool_args(WindowKind::kAvgPool, nd, k, s, p, {}, ceil_mode,
                                  count_include_pad, divisor_override));
}

}  // namespace

DTensor pad(const DTensor& x, IntSpan pad, const char* mode, double value) {
  return run(x, detail::pad_args(pad, mode, value));
}

DTensor max_pool1d(const DTensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d, bool ceil_mode) {
  return max_pool(1, x, k, s, p, d, ceil_mode).values;
}
DTensor max_pool2d(const DTensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d, bool ceil_mode) {
  return max_pool(2, x, k, s, p, d, ceil_mode).values;
}
DTensor max_pool3d(const DTensor& x, IntSpan k, IntSpan s, IntSpan p, IntSpan d, bool ceil_mode) {
  return max_pool(3, x, k, s, p, d, ceil_mode).values;
}
DTensorValuesIndices max_pool1d_with_indices(const DTensor& x, IntSpan k, IntSpan s, IntSpan p,
                                             IntSpan d, bool ceil_mode) {
  return max_pool(1, x, k, s, p, d, ceil_mode);
}
DTensorValuesIndices max_pool2d_with_indices(const DTensor& x, IntSpan k, IntSpan s, IntSpan p,
                                             IntSpan d, bool ceil_mode) {
  return max_pool(2, x, k, s, p, d, ceil_mode);
}
DTensorValuesIndices max_pool3d_with_indices(const DTensor& x, IntSpan k, IntSpan s, IntSpan p,
                                             IntSpan d, bool ceil_mode) {
  return max_pool(3, x, k, s, p, d, ceil_mode);
}

DTensor avg_pool1d(const DTensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                   bool count_include_pad) {
  return avg_pool(1, x, k, s, p, ceil_mode, count_include_pad, std::nullopt);
}
DTensor avg_pool2d(const DTensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool(2, x, k, s, p, ceil_mode, count_include_pad, divisor_override);
}
DTensor avg_pool3d(const DTensor& x, IntSpan k, IntSpan s, IntSpan p, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool(3, x, k, s, p, ceil_mode, count_include_pad, divisor_override);
}

DTensor adaptive_avg_pool1d(const DTensor& x, IntSpan output_size) {
  return run(x, detail::adaptive_args(WindowKind::kAdaptiveAvg, 1, output_size));
}
DTensor adaptive_avg_pool2d(const DTensor& x, IntSpan output_size) {
  return run(x, detail::adaptive_args(WindowKind::kAdaptiveAvg, 2, output_size));
}
DTensor adaptive_max_pool2d(const DTensor& x, IntSpan output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).values;
}
DTensorValuesIndices adaptive_max_pool2d_with_indices(const DTensor& x, IntSpan output_size) {
  return run_max(x, detail::adaptive_args(WindowKind::kAdaptiveMax, 2, output_size));
}

DTensor interpolate(const DTensor& x, IntSpan size, std::vector<double> scale_factor,
                    const char* mode, std::optional<bool> align_corners) {
  return run(x, detail::interpolate_args(x.shape(), size, scale_factor, mode, align_corners));
}

}  // namespace dtensor
