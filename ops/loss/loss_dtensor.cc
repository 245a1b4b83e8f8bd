// DTensor cross entropy, with the loss-parallel path for class-sharded logits.
//
// The row-strategy engine picks input placements and then runs one local kernel; the
// class-sharded computation needs all-reduces in the middle (global max, then the sums of
// exp, of the target logit and of the logits), so cross_entropy on DTensors is a dedicated
// function rather than a registered strategy. It handles every placement:
//   - Partial logits are reduced first (all-reduce), as for any non-linear op;
//   - batch/spatial dims sharded on a mesh dim stay sharded: the target is placed alike;
//   - the class dim sharded on a mesh dim (S(1) of [N, C], S(0) of [C]) stays sharded: the
//     target is replicated over that mesh dim and the full logits are never gathered.
// Worked example, [N, C] logits with placements [S(1)] on 2 ranks, C = 5 (blocks of 3 and 2):
// each rank computes its row maxima over its 3 (or 2) classes -> all-reduce(max) gives the
// row max M; each rank sums exp(x - M) over its classes, takes x[t] when t falls in its block
// (0 otherwise) and sums x over its classes -> one all-reduce(sum) of the three [N] vectors
// gives S, x[t] and sum x; then lse = M + log S, loss = (1 - s)(lse - x[t]) + s (lse - sum x / C).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dtensor/redistribute.h"
#include "ops/loss/loss.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

constexpr const char* kOp = "cross_entropy";

Tensor doubles(const std::vector<double>& v, IntSpan shape) {
  Tensor t = empty(shape, TensorOptions(kFloat64));
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(double));
  return t;
}

// In-place all-reduce of `v` over each of `mesh_dims` in turn; the buffer travels on `device`
// (the mesh's device: NCCL communicators take CUDA tensors only).
void all_reduce_over(const DeviceMesh& mesh, absl::Span<const int64_t> mesh_dims,
                     std::vector<double>& v, ReduceOp op, Device device) {
  if (mesh_dims.empty() || v.empty()) return;
  const Tensor t = doubles(v, {static_cast<int64_t>(v.size())}).to(device);
  for (int64_t m : mesh_dims) mesh.communicator(m)->all_reduce(t, op)->wait();
  const Tensor host = t.to(Device(kCPU));
  std::memcpy(v.data(), host.data_ptr(), v.size() * sizeof(double));
}

}  // namespace

DTensor cross_entropy(const DTensor& logits, const DTensor& target, Reduction reduction,
                      int64_t ignore_index, double label_smoothing) {
  DT_CHECK(logits.defined(), "[%s] argument input is an undefined DTensor", kOp);
  DT_CHECK(target.defined(), "[%s] argument target is an undefined DTensor", kOp);
  const DeviceMesh& mesh = logits.device_mesh();
  DT_CHECK(target.device_mesh() == mesh, "[%s] inputs live on different meshes (argument target)",
           kOp);
  DT_CHECK(is_floating(logits.dtype()),
           "[%s] argument input has dtype %s, expected a floating "
           "dtype",
           kOp, dtype_name(logits.dtype()));
  DT_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32,
           "[%s] argument target has dtype %s, expected int64 or int32", kOp,
           dtype_name(target.dtype()));
  DT_CHECK(logits.dim() >= 1, "[%s] argument input is 0-d, expected [C], [N, C] or [N, C, ...]",
           kOp);
  DT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "[%s] label_smoothing must be in [0, 1], got %g", kOp, label_smoothing);
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  Shape target_shape;
  for (int64_t d = 0; d < logits.dim(); ++d) {
    if (d != class_dim) target_shape.push_back(logits.size(d));
  }
  DT_CHECK(target.shape() == target_shape,
           "[%s] argument target has shape %s, expected %s for input of shape %s", kOp,
           shape_str(target.shape()), shape_str(target_shape), shape_str(logits.shape()));
  const int64_t classes = logits.size(class_dim);

  // Placements: logits keep their shards (Partial reduced), the target follows the batch shards.
  const int64_t mesh_ndim = mesh.ndim();
  Placements lp = logits.placements(), tp(mesh_ndim, Replicate());
  absl::InlinedVector<int64_t, 4> class_dims, batch_dims;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    if (lp[m].is_partial()) lp[m] = Replicate();
    if (lp[m].is_shard(class_dim)) {
      class_dims.push_back(m);
    } else if (lp[m].is_shard()) {
      tp[m] = Shard(lp[m].dim() < class_dim ? lp[m].dim() : lp[m].dim() - 1);
      batch_dims.push_back(m);
    }
  }
  const DTensor x = lp == logits.placements() ? logits : logits.redistribute(mesh, lp);
  const DTensor tg = tp == target.placements() ? target : target.redistribute(mesh, tp);

  const DType dtype = logits.dtype();
  const bool reduce = reduction != Reduction::kNone;
  Placements out_p(mesh_ndim, Replicate());
  if (reduction == Reduction::kNone) out_p = tp;
  if (reduction == Reduction::kSum) {
    for (int64_t m : batch_dims) out_p[m] = Partial();
  }
  auto out_spec = std::make_shared<const DTensorSpec>(
      mesh, out_p, TensorMeta(reduce ? Shape{} : target_shape, dtype), kOp);
  if (!mesh.contains_me()) {
    return DTensor(
        empty(out_spec->local_shard().shape, TensorOptions(dtype, logits.to_local().device())),
        out_spec);
  }

  // Local views: logits as [outer, c, inner], target as [outer, inner].
  // The per-row math runs on the host in double (logits of any floating dtype and device).
  const Device device = x.to_local().device();
  const Tensor xl = x.to_local().to(Device(kCPU), kFloat64).contiguous();
  const Tensor tl = tg.to_local().to(Device(kCPU), kInt64).contiguous();
  const int64_t c_local = xl.size(class_dim);
  const int64_t class_offset = x.spec().local_shard().offset[class_dim];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < class_dim; ++d) outer *= xl.size(d);
  for (int64_t d = class_dim + 1; d < xl.dim(); ++d) inner *= xl.size(d);
  const int64_t n = outer * inner;
  const int64_t* t = n > 0 ? tl.data<int64_t>() : nullptr;
  const double* xp = xl.numel() > 0 ? xl.data<double>() : nullptr;
  // Targets are replicated over the class mesh dims: every rank of a class group checks the
  // same values and throws together, before any collective.
  for (int64_t i = 0; i < n; ++i) {
    DT_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < classes),
             "[nll_loss] target %d out of range for %d classes", t[i], classes);
  }
  const auto at = [&](int64_t o, int64_t c, int64_t j) {
    return xp[(o * c_local + c) * inner + j];
  };

  // Row maxima over the local classes, then over the class shards. Ranks of one class group
  // hold the same batch block, so they all skip (n == 0) or all take part.
  std::vector<double> mx(n, -std::numeric_limits<double>::infinity());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < c_local; ++c) {
      for (int64_t j = 0; j < inner; ++j)
        mx[o * inner + j] = std::max(mx[o * inner + j], at(o, c, j));
    }
  }
  all_reduce_over(mesh, class_dims, mx, ReduceOp::kMax, device);
  // [sum exp(x - max), x[target] (0 when another shard owns it), sum x] per element.
  std::vector<double> acc(3 * n, 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t i = o * inner + j;
      double se = 0, sx = 0;
      for (int64_t c = 0; c < c_local; ++c) {
        se += std::exp(at(o, c, j) - mx[i]);
        sx += at(o, c, j);
      }
      const int64_t tc = t[i] - class_offset;
      acc[i] = se;
      acc[n + i] = (t[i] != ignore_index && tc >= 0 && tc < c_local) ? at(o, tc, j) : 0.0;
      acc[2 * n + i] = sx;
    }
  }
  all_reduce_over(mesh, class_dims, acc, ReduceOp::kSum, device);
  std::vector<double> loss(n, 0.0);
  double sum = 0;
  int64_t count = 0;
  const double s = label_smoothing;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) continue;
    const double lse = mx[i] + std::log(acc[i]);
    double v = lse - acc[n + i];
    if (s != 0.0) {
      v = (1.0 - s) * v + s * (lse - acc[2 * n + i] / static_cast<double>(classes));
    }
    loss[i] = v;
    sum += v;
    ++count;
  }

  Tensor out;
  if (reduction == Reduction::kNone) {
    out = doubles(loss, tl.sizes()).to(dtype);
  } else if (reduction == Reduction::kSum) {
    out = doubles({sum}, {}).to(dtype);
  } else {
    // Exact mean for uneven shards and ignored targets: all-reduce (sum, count) over the
    // batch-sharded mesh dims, then divide.
    std::vector<double> sc = {sum, static_cast<double>(count)};
    all_reduce_over(mesh, batch_dims, sc, ReduceOp::kSum, device);
    const double mean = sc[1] > 0 ? sc[0] / sc[1] : std::numeric_limits<double>::quiet_NaN();
    out = doubles({mean}, {}).to(dtype);
  }
  return DTensor(out.to(device), out_spec);
}

}  // namespace dtensor
