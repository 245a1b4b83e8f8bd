// The DTensor forms of the pool family (registered in pool_strategy.cc); max and average pools
// of a height-sharded input exchange halos (conv's mechanism, ops/conv/detail/halo.h).
#include <algorithm>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/conv/detail/halo.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/detail/windows.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/view/view.h"

namespace dtensor {
namespace {

using detail::WindowArgs;
using detail::WindowKind;

// The mesh dim along which x (batched, [N, C, *spatial]) is sharded on its first spatial dim
// for the halo path, or -1: Shard(2) on one mesh dim, Replicate on the others (as conv's).
int64_t halo_mesh_dim(const DTensor& x, const WindowArgs& a) {
  if (!x.device_mesh().contains_me() || x.dim() != a.nd + 2) return -1;
  return detail::halo_mesh_dim(x, 2);
}

// A pool of x sharded along dim 2 on mesh dim m: the output keeps Shard(2) (torch.chunk layout of
// the output's height) and each rank pools the input rows its output rows read, its own rows
// and its neighbours' edges (halo_rows), whatever the stride, padding, dilation and ceil_mode:
// with stride s the output rows [o0, o1) read input rows from o0 s - p to (o1 - 1) s - p +
// d (k - 1), which need not lie within the shard +- a fixed halo (a shard's output chunk and
// input chunk drift apart by up to s rows), so the ranges are computed per rank rather than as
// (k - 1) / 2 rows each side. The local pool runs with the op's own padding on rows starting at
// g0 = (o0 - j) s, j = min(o0, ceil(p / s)): its first j output rows read the local padding and
// are dropped, the next ones are global rows o0.. with windows inside real rows (or the global
// edges, where the local padding is the global one), so divisors and ceil_mode match too. A
// rank owning no output row pools one row's window (dropped) so that every rank's graph holds
// the exchange its backward runs. Max pool indices are shifted by g0 rows into the global plane.
DTensorList halo_pool(const DTensor& x, const WindowArgs& a, int64_t m) {
  const DeviceMesh& mesh = x.device_mesh();
  const int64_t world = mesh.size(m), r = mesh.get_coordinate()[m], height = x.size(2);
  const Shape out_shape = detail::window_out_shape(a, x.shape());
  const int64_t s = a.stride[0], p = a.padding[0],
                span = (a.dilation.empty() ? 1 : a.dilation[0]) * (a.kernel[0] - 1) + 1;
  const int64_t skip = (p + s - 1) / s;
  const detail::ChunkLayout oc = detail::chunk_layout(out_shape[2], world);
  std::vector<detail::RowRange> range;
  std::vector<int64_t> first(static_cast<size_t>(world));
  for (int64_t q = 0; q < world; ++q) {
    const int64_t o0 = std::min(oc.start[q], out_shape[2] - 1),
                  n = std::max<int64_t>(oc.rows[q], 1);
    first[q] = std::min(o0, skip);
    const int64_t g0 = (o0 - first[q]) * s;
    range.push_back({g0, std::max(g0 + 1, std::min(height, (o0 + n - 1) * s - p + span))});
  }
  const DTensor ext = detail::halo_rows(x, 2, m, range);
  DTensorList outs = dispatch_multi(ops_op(a.op), {&ext}, detail::window_arg_list(a));
  int64_t plane = 1;  // input elements per row of the spatial plane (max pool indices)
  for (int64_t i = 3; i < x.dim(); ++i) plane *= x.size(i);
  for (size_t i = 0; i < outs.size(); ++i) {
    DTensor yl = narrow(outs[i], 2, first[r], oc.rows[r]);
    if (i == 1) yl = local_dtensor(add(yl.to_local(), Scalar(range[r].begin * plane)));
    Shape out = yl.shape();
    out[2] = out_shape[2];
    outs[i] = DTensor::from_local(yl, mesh, x.placements(), false, out);
  }
  return outs;
}

DTensor run(const DTensor& x, const WindowArgs& a) {
  if (a.kind == WindowKind::kAvgPool) {
    const int64_t m = halo_mesh_dim(x, a);
    if (m >= 0) return std::move(halo_pool(x, a, m)[0]);
  }
  return dispatch(ops_op(a.op), {&x}, detail::window_arg_list(a));
}

DTensorValuesIndices run_max(const DTensor& x, const WindowArgs& a) {
  const int64_t m = a.kind == WindowKind::kMaxPool ? halo_mesh_dim(x, a) : -1;
  DTensorList outs =
      m >= 0 ? halo_pool(x, a, m) : dispatch_multi(ops_op(a.op), {&x}, detail::window_arg_list(a));
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
