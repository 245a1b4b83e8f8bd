// Registration of the scan family (cumsum, cumprod, cummax, cummin, sort, argsort, topk,
// kthvalue and cumprod_backward; their backward formulas are in scan_backward.cc, the DTensor
// forms in scan_dtensor.cc). Each op needs its
// dim whole on a rank (a sharded one is gathered by propagation), except cumsum / cumprod, which
// also scan a sharded dim in place (block_scan: a pipeline along the blocks, bit-identical to
// the single-device scan), and keeps every other dim sharded, the same way on every output and
// input.
#include <algorithm>
#include <functional>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/scan/detail/scan_backward.h"
#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

// The op's dim (arg `argnum`), normalised against the input's rank (0-d: a 1-element vector).
int64_t op_dim(const OpSchema& s, int64_t argnum) {
  return normalize_dim(s.arg<int64_t>(argnum), std::max<int64_t>(s.input(0).ndim(), 1), s.name());
}

// Rows for `width` tensors of the input's rank: every dim but the op's sharded alike.
StrategyFn all_but_dim(int64_t argnum, int64_t width) {
  return [argnum, width](const OpSchema& s) {
    return detail::rows_all_but(s.input(0).ndim(), op_dim(s, argnum), width);
  };
}

// Sample calls: even, uneven and empty shards of the dims the op keeps sharded, the op's dim
// first, last and in the middle; `args(dim)` completes each call's args.
std::vector<OpSample> along_samples(int64_t w, const std::function<ArgList(int64_t)>& args,
                                    DType dtype = kFloat64) {
  using detail::sample;
  return {{{sample({3 * w + 1, 5}, dtype)}, args(1)},
          {{sample({3 * w + 1, 5}, dtype)}, args(0)},
          {{sample({2, 2 * w + 1, 3}, dtype)}, args(-1)},
          {{sample({2, 2 * w + 1, 3}, dtype)}, args(1)},
          {{sample({detail::short_size(w), 5}, dtype)}, args(1)}};
}

std::vector<OpSample> joined(std::vector<OpSample> a, std::vector<OpSample> b) {
  for (OpSample& s : b) a.push_back(std::move(s));
  return a;
}

// The single-device scan `op` along dim.
Tensor local_scan(detail::ScanOp op, const Tensor& x, int64_t dim) {
  switch (op) {
    case detail::ScanOp::kSum:
      return cumsum(x, dim);
    case detail::ScanOp::kProd:
      return cumprod(x, dim);
    case detail::ScanOp::kLogSumExp:
      return logcumsumexp(x, dim);
  }
  return Tensor();
}

// ---- cumsum / cumprod / logcumsumexp along a sharded dim
// ------------------------------------------------------ Tag of the pipeline's messages (one
// communicator may carry other point-to-point traffic).
constexpr int kScanTag = 0x5CA;

// A pipeline along the blocks of `dim` in global order, which reproduces the single-device
// accumulation exactly. The mesh dims sharding `dim` (size > 1, ascending) nest as torch.chunk
// does (the inner mesh dim splits the outer one's block: compute_local_shape_and_offset), so
// the global block order is the row-major order of the coordinates along them, which is the
// rank order of their flattened communicator (the other coordinates select the group, so
// replicated copies each run their own pipeline). Block p receives from block p-1 the
// accumulator the single-device scan holds after block p-1's last element (float64, or the
// wrapping uint64 as int64 bits; block 0 starts from the identity), continues it over its own
// block (scan_totals, the same operations in the same order) and sends the result to block p+1
// BEFORE scanning its block from the received value, so only the totals pass is serial. Every
// element thus sees exactly the single-device sequence of operations: the results are bit for
// bit the single-device scan's for every dtype, inf / NaN / overflow / underflow and integer
// wrap included. An empty block passes the value through. Cost: k-1 sequential messages of one
// accumulator per row (8 bytes), no data gathered.
Tensor block_scan(const KernelContext& c, detail::ScanOp op, const Tensor& x, int64_t dim,
                  const std::vector<int64_t>& mesh_dims) {
  const CommunicatorPtr comm = c.mesh().flattened_communicator(mesh_dims);
  DT_CHECK(comm != nullptr, "[%s] no communicator for the sharded scan", c.op().name.c_str());
  const int k = comm->size(), p = comm->rank();
  Shape acc_shape(x.sizes().begin(), x.sizes().end());
  acc_shape[dim] = 1;
  Tensor start;  // undefined: the identity (block 0)
  if (p > 0) {
    start = empty(acc_shape, TensorOptions(detail::scan_acc_dtype(x.dtype()), x.device()));
    comm->recv(start, p - 1, kScanTag)->wait();
  }
  Tensor end;
  WorkPtr sent;
  if (p + 1 < k) {
    end = detail::scan_totals(op, x, dim, start).contiguous();
    sent = comm->send(end, p + 1, kScanTag);
  }
  Tensor out = start.defined() ? detail::scan_from(op, x, dim, start) : local_scan(op, x, dim);
  if (sent != nullptr) sent->wait();
  return out;
}

// cumsum / cumprod's kernel: the local scan, or the block pipeline when `dim` is sharded.
Tensor scan_kernel(const KernelContext& c, detail::ScanOp op, const Tensor& x) {
  const DTensorSpec& spec = c.input_spec(0);
  const int64_t dim =
      normalize_dim(c.arg<int64_t>(0), std::max<int64_t>(spec.ndim(), 1), c.op().name.c_str());
  std::vector<int64_t> mesh_dims;
  for (int64_t m = 0; m < spec.mesh().ndim(); ++m) {
    // A mesh dim of one rank holds the whole group: nothing to exchange there.
    if (spec.placement(m).is_shard(dim) && spec.mesh().size(m) > 1) mesh_dims.push_back(m);
  }
  if (mesh_dims.empty()) return local_scan(op, x, dim);
  return block_scan(c, op, x, dim, mesh_dims);
}

// ---- registration ------------------------------------------------------------------------------
// cumsum / cumprod: rows_all_but plus [S(dim) | S(dim)] (the block pipeline: k-1 sequential
// messages of one accumulator per row, instead of gathering the dim; bit-identical results).
void register_cumulative(Registry& r, const char* name, detail::ScanOp scan, Linearity linearity,
                         BackwardFn backward, uint32_t saved_inputs, uint32_t saved_outputs = 0) {
  OpInfo op = detail::make_op(name, {"self"}, linearity);
  op.backward = std::move(backward);
  op.saved_inputs = saved_inputs;
  op.saved_outputs = saved_outputs;
  op.meta = [scan](const OpSchema& s) {
    op_dim(s, 0);
    const DType in = s.input(0).dtype();
    if (scan == detail::ScanOp::kLogSumExp) detail::check_floating_dtype(s.name(), in);
    return OutputMetas{TensorMeta(s.input(0).shape(), is_floating(in) ? in : kInt64)};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t dim = op_dim(s, 0);
    StrategyRows rows = detail::rows_all_but(s.input(0).ndim(), dim, 2);
    rows.push_back({Shard(dim), Shard(dim)});
    return rows;
  };
  op.kernel = single_output(
      [scan](const KernelContext& c, Locals l) { return scan_kernel(c, scan, l[0]); });
  // Blocks of the scanned dim that are even, uneven and empty (3w+1, 2w+1 and w-1 elements),
  // with zeros in some rows (products through a zero) and values of magnitude up to 2.
  op.samples = [scan](int64_t w) {
    const auto args = [](int64_t d) { return ArgList{d}; };
    using detail::sample;
    const bool floating_only = scan == detail::ScanOp::kLogSumExp;
    std::vector<OpSample> out =
        joined(along_samples(w, args), along_samples(w, args, floating_only ? kFloat32 : kInt64));
    out.push_back({{sample({std::max<int64_t>(w - 1, 1), 3}, kFloat64, -2, 2)}, args(0)});
    if (!floating_only) out.push_back({{sample({4, 3 * w + 1}, kInt64, -1, 1)}, args(1)});
    return out;
  };
  r.add(std::move(op));
}

// cumprod_backward(grad, self; dim): linear in grad, sharded as cumprod.
void register_cumprod_backward(Registry& r) {
  OpInfo op = detail::gradient_op("cumprod_backward", {"grad", "self"});
  op.meta = [](const OpSchema& s) {
    op_dim(s, 0);
    DT_CHECK(s.input(0).shape() == s.input(1).shape() && s.input(0).dtype() == s.input(1).dtype(),
             "[cumprod_backward] grad %s and self %s must share a shape and dtype",
             shape_str(s.input(0).shape()), shape_str(s.input(1).shape()));
    return OutputMetas{s.input(1).meta()};
  };
  op.strategy = all_but_dim(0, 3);
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    return detail::cumprod_backward(l[0], l[1], c.arg<int64_t>(0));
  });
  op.samples = [](int64_t w) {
    using detail::sample;
    const auto call = [](Shape shape, int64_t dim) {
      return OpSample{{sample(shape), sample(shape, kFloat64, -2, 2)}, {dim}};
    };
    return std::vector<OpSample>{call({3 * w + 1, 5}, 1), call({2, 2 * w + 1, 3}, -1),
                                 call({3 * w + 1, 5}, 0), call({detail::short_size(w), 5}, 1)};
  };
  r.add(std::move(op));
}

// Values (the input's dtype) and int64 indices of `shape`.
OutputMetas values_indices(Shape shape, DType dtype) {
  return OutputMetas{TensorMeta(shape, dtype), TensorMeta(std::move(shape), kInt64)};
}

// along_samples with args (dim, flag): flag false on float64 inputs, true on int64 ones (the
// flag left out when the op has none).
std::vector<OpSample> flag_samples(int64_t w, bool has_flag) {
  const auto args = [has_flag](bool flag) {
    return [has_flag, flag](int64_t d) { return has_flag ? ArgList{d, flag} : ArgList{d}; };
  };
  return joined(along_samples(w, args(false)), along_samples(w, args(true), kInt64));
}

// (values, indices) of the input's shape along dim (args from index 0: dim, then `flag` when
// the op has one): sort (descending), cummax, cummin. The values' gradient goes back to the
// indices; sampled with both flag values (or none).
void register_values_indices(Registry& r, const char* name,
                             ValuesIndices (*local)(const Tensor&, int64_t, bool), bool has_flag) {
  OpInfo op = detail::make_op(name, {"self"});
  op.meta = [](const OpSchema& s) {
    op_dim(s, 0);
    return values_indices(s.input(0).shape(), s.input(0).dtype());
  };
  op.strategy = all_but_dim(0, 3);
  op.kernel = [local, has_flag](const KernelContext& c, Locals l, absl::Span<Tensor> out) {
    ValuesIndices v = local(l[0], c.arg<int64_t>(0), has_flag && c.arg<bool>(1));
    out[0] = std::move(v.values);
    out[1] = std::move(v.indices);
  };
  op.backward = detail::values_indices_grad;
  op.saved_inputs = 0;
  op.saved_outputs = 2u;
  op.samples = [has_flag](int64_t w) { return flag_samples(w, has_flag); };
  r.add(std::move(op));
}

// argsort(self; dim, descending) -> indices (not differentiable).
void register_argsort(Registry& r) {
  OpInfo op = detail::make_op("argsort", {"self"});
  op.differentiable = false;
  op.meta = [](const OpSchema& s) {
    op_dim(s, 0);
    return OutputMetas{TensorMeta(s.input(0).shape(), kInt64)};
  };
  op.strategy = all_but_dim(0, 2);
  op.kernel = single_output([](const KernelContext& c, Locals l) {
    return argsort(l[0], c.arg<int64_t>(0), c.arg<bool>(1));
  });
  op.samples = [](int64_t w) {
    return along_samples(w, [](int64_t d) { return ArgList{d, true}; });
  };
  r.add(std::move(op));
}

using SelectFn = ValuesIndices (*)(const Tensor&, int64_t, int64_t, bool);

// The OpInfo of topk / kthvalue (self; k, dim, flag) -> (values, indices): the kernel, the values'
// backward (topk_grad / kthvalue_grad: `flag` is kthvalue's keepdim; topk keeps its dim) and
// samples with k = k1 (flag true) and k2 (flag false).
OpInfo selection_op(const char* name, SelectFn local, BackwardFn backward, int64_t k1, int64_t k2) {
  OpInfo op = detail::make_op(name, {"self"});
  op.strategy = all_but_dim(1, 3);
  op.kernel = [local](const KernelContext& c, Locals l, absl::Span<Tensor> out) {
    ValuesIndices v = local(l[0], c.arg<int64_t>(0), c.arg<int64_t>(1), c.arg<bool>(2));
    out[0] = std::move(v.values);
    out[1] = std::move(v.indices);
  };
  op.backward = std::move(backward);
  op.saved_inputs = 0;
  op.saved_outputs = 2u;
  op.samples = [k1, k2](int64_t w) {
    return joined(along_samples(w,
                                [k1](int64_t d) {
                                  return ArgList{k1, d, true};
                                }),
                  along_samples(w, [k2](int64_t d) {
                    return ArgList{k2, d, false};
                  }));
  };
  return op;
}

// The shape of topk's / kthvalue's outputs: dim of size `size` (-1: removed); checks k.
Shape selected_shape(const OpSchema& s, int64_t k_min, int64_t size) {
  const int64_t dim = op_dim(s, 1), k = s.arg<int64_t>(0);
  Shape shape = s.input(0).shape();
  const int64_t n = shape.empty() ? 1 : shape[dim];
  DT_CHECK(k >= k_min && k <= n,
           "[%s] k %d out of range for dim %d of size %d (expected %d <= k <= %d)", s.name(), k,
           dim, n, k_min, n);
  if (shape.empty()) return shape;
  if (size >= 0) {
    shape[dim] = size;
  } else {
    shape.erase(shape.begin() + dim);
  }
  return shape;
}

// topk(self; k, dim, largest) -> (values, indices), dim of size k.
void register_topk(Registry& r) {
  OpInfo op = selection_op("topk", &topk, detail::topk_grad, 2, 1);
  op.meta = [](const OpSchema& s) {
    return values_indices(selected_shape(s, 0, s.arg<int64_t>(0)), s.input(0).dtype());
  };
  r.add(std::move(op));
}

// Rows of (values, indices) along a dim reduced unless keepdim (args dim_arg, keepdim_arg): every
// other dim sharded alike, at its place in the outputs.
StrategyFn reduced_dim_rows(int64_t dim_arg, int64_t keepdim_arg) {
  return [dim_arg, keepdim_arg](const OpSchema& s) {
    const int64_t n = s.input(0).ndim(), dim = op_dim(s, dim_arg);
    const bool keepdim = s.arg<bool>(keepdim_arg);
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      if (d == dim) continue;
      const int64_t k = keepdim || d < dim ? d : d - 1;
      rows.push_back({Shard(k), Shard(k), Shard(d)});
    }
    return rows;
  };
}

// kthvalue(self; k, dim, keepdim) -> (values, indices), dim removed unless keepdim.
void register_kthvalue(Registry& r) {
  OpInfo op = selection_op("kthvalue", &kthvalue, detail::kthvalue_grad, 2, 1);
  op.meta = [](const OpSchema& s) {
    return values_indices(selected_shape(s, 1, s.arg<bool>(2) ? 1 : -1), s.input(0).dtype());
  };
  op.strategy = reduced_dim_rows(1, 2);
  r.add(std::move(op));
}

// median.dim / mode (self; dim, keepdim) -> (values, indices), dim removed unless keepdim: every
// other dim sharded alike (kthvalue's rows); the values' gradient goes back to the indices.
void register_pick(Registry& r, const char* name,
                   ValuesIndices (*local)(const Tensor&, int64_t, bool)) {
  OpInfo op = detail::make_op(name, {"self"});
  op.meta = [](const OpSchema& s) {
    const int64_t dim = op_dim(s, 0);
    Shape shape = s.input(0).shape();
    if (shape.empty()) return values_indices(shape, s.input(0).dtype());
    DT_CHECK(shape[dim] > 0, "[%s] dim %d of the input %s is empty: no %s", s.name(), dim,
             shape_str(shape), s.name());
    if (s.arg<bool>(1)) {
      shape[dim] = 1;
    } else {
      shape.erase(shape.begin() + dim);
    }
    return values_indices(shape, s.input(0).dtype());
  };
  op.strategy = reduced_dim_rows(0, 1);
  op.kernel = [local](const KernelContext& c, Locals l, absl::Span<Tensor> out) {
    const int64_t dim = c.arg<int64_t>(0);
    const bool keepdim = c.arg<bool>(1);
    if (l[0].numel() == 0) {  // the dim is whole (not empty): no output elements here
      Shape shape(l[0].sizes().begin(), l[0].sizes().end());
      const int64_t d = normalize_dim(dim, std::max<int64_t>(l[0].dim(), 1), "pick");
      if (keepdim) {
        shape[d] = 1;
      } else {
        shape.erase(shape.begin() + d);
      }
      out[0] = empty(shape, TensorOptions(l[0].dtype(), l[0].device()));
      out[1] = empty(shape, TensorOptions(kInt64, l[0].device()));
      return;
    }
    ValuesIndices v = local(l[0], dim, keepdim);
    out[0] = std::move(v.values);
    out[1] = std::move(v.indices);
  };
  op.backward = detail::pick_grad;
  op.saved_inputs = 0;
  op.saved_outputs = 2u;
  // Repeated values (ties) in the int64 samples: the tie rules are checked on every placement.
  op.samples = [](int64_t w) { return flag_samples(w, true); };
  r.add(std::move(op));
}

// median (self) -> 0-d: no rows (the input is gathered); the gradient is shared evenly among
// the elements equal to the median (PyTorch's evenly_distribute_backward).
void register_median_all(Registry& r) {
  OpInfo op = detail::make_op("median", {"self"});
  op.meta = [](const OpSchema& s) { return OutputMetas{TensorMeta(Shape{}, s.input(0).dtype())}; };
  op.strategy = [](const OpSchema&) { return StrategyRows{}; };
  op.kernel = single_output([](const KernelContext&, Locals l) { return median(l[0]); });
  op.backward = detail::median_grad;
  op.saved_inputs = 1u;
  op.saved_outputs = 1u;
  op.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 5})}, {}},
                                 {{sample({2, 2 * w + 1, 3}, kInt64)}, {}},
                                 {{sample({detail::short_size(w), 5})}, {}}};
  };
  r.add(std::move(op));
}

}  // namespace

void register_scan_ops(Registry& registry) {
  register_cumulative(registry, "cumsum", detail::ScanOp::kSum, Linearity::kLinear,
                      detail::cumsum_grad, 0);
  register_cumulative(registry, "cumprod", detail::ScanOp::kProd, Linearity::kNone,
                      detail::cumprod_grad, 1u);
  register_cumprod_backward(registry);
  register_values_indices(
      registry, "sort",
      [](const Tensor& x, int64_t dim, bool descending) { return sort(x, dim, descending); }, true);
  register_values_indices(
      registry, "cummax", [](const Tensor& x, int64_t dim, bool) { return cummax(x, dim); }, false);
  register_values_indices(
      registry, "cummin", [](const Tensor& x, int64_t dim, bool) { return cummin(x, dim); }, false);
  register_argsort(registry);
  register_topk(registry);
  register_kthvalue(registry);
  register_cumulative(registry, "logcumsumexp", detail::ScanOp::kLogSumExp, Linearity::kNone,
                      detail::logcumsumexp_grad, 1u, 1u);
  register_pick(registry, "median.dim",
                [](const Tensor& x, int64_t dim, bool keepdim) { return median(x, dim, keepdim); });
  register_pick(registry, "mode",
                [](const Tensor& x, int64_t dim, bool keepdim) { return mode(x, dim, keepdim); });
  register_median_all(registry);
}
}  // namespace dtensor
