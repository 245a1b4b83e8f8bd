// Registration of the reduction family: strategies (rows for ONE mesh dim; the engine expands
// them), meta functions and local kernels.
//
// A dim that is kept can stay sharded: [S(out dim) | S(d)]. A reduced dim that is sharded
// leaves each rank a partial result: sum and mean give Partial(sum) (mean's local kernel
// divides the local sum by the GLOBAL count, which is exact for uneven shards, unlike
// Partial(avg)), amax/max give Partial(max), amin/min Partial(min). argmax/argmin, max/min
// with indices and var need a reduced dim replicated (no row shards it).
// Example: sum(x[8, 4], dims {0}) rows: [P(sum) | S(0)], [S(0) | S(1)].
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/reduction_backward.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// Which dims a reduction over `dims` reduces (empty = all), from the static args.
absl::InlinedVector<bool, 6> reduced_mask(const OpSchema& s, const Shape& dims) {
  const int64_t ndim = s.input(0).ndim();
  absl::InlinedVector<bool, 6> mask(std::max<int64_t>(ndim, 0), dims.empty());
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, ndim, s.name());
    if (ndim == 0) continue;
    DT_CHECK(!mask[n], "[%s] dim %d appears more than once in dims %s", s.name(), n,
             shape_str(dims));
    mask[n] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, absl::Span<const bool> mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

StrategyRows reduction_rows(absl::Span<const bool> mask, bool keepdim,
                            std::optional<ReduceOp> partial, int num_outputs,
                            bool partial_passthrough) {
  StrategyRows rows;
  int64_t removed = 0;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (!mask[d]) {
      const int64_t out_dim = keepdim ? static_cast<int64_t>(d) : static_cast<int64_t>(d) - removed;
      Placements row(num_outputs, Shard(out_dim));
      row.push_back(Shard(static_cast<int64_t>(d)));
      rows.push_back(std::move(row));
    } else {
      ++removed;
      if (partial) {
        Placements row(num_outputs, Partial(*partial));
        row.push_back(Shard(static_cast<int64_t>(d)));
        rows.push_back(std::move(row));
      }
    }
  }
  // Partial(max) / Partial(min) inputs pass through amax / amin of the same kind.
  if (partial_passthrough && (partial == ReduceOp::kMax || partial == ReduceOp::kMin)) {
    rows.push_back(Placements(num_outputs + 1, Partial(*partial)));
  }
  return rows;
}

enum class OutDType : uint8_t { kSum, kFloatOnly, kToFloat, kSame, kInt64, kBool };

DType reduction_dtype(const OpSchema& s, OutDType rule) {
  const DType in = s.input(0).dtype();
  switch (rule) {
    case OutDType::kSum:
      return is_floating(in) ? in : DType::kInt64;
    case OutDType::kFloatOnly:
      DT_CHECK(is_floating(in),
               "[%s] expected a floating dtype (float32, float64, float16, bfloat16), got %s",
               s.name(), dtype_name(in));
      return in;
    case OutDType::kToFloat:
      return floating_result_type(in);
    case OutDType::kSame:
      return in;
    case OutDType::kInt64:
      return DType::kInt64;
    case OutDType::kBool:
      return DType::kBool;
  }
  return in;
}

// How an op reads its static args.
enum class ArgLayout : uint8_t {
  kDimsKeepdim,            // (dims, keepdim)
  kCorrectionDimsKeepdim,  // (correction [runtime], dims, keepdim)
  kAll,                    // () full reduction to a 0-d tensor
  kDimKeepdim,             // (dim, keepdim): one dim, must be given
  kOptDimKeepdim,          // (dim or None, keepdim): None = flattened
  kOrdDimsKeepdim,         // (ord, dims, keepdim): vector_norm
};

struct ReductionDef {
  const char* name;
  ArgLayout layout;
  OutDType dtype;
  std::optional<ReduceOp> partial;  // Partial kind of a sharded reduced dim, none: replicate
  KernelFn kernel;
  Linearity linearity = Linearity::kNone;
  int num_outputs = 1;
  bool needs_elements = false;  // raises on an empty reduction (max, argmax, ...)
  // Partial(max/min) inputs pass through (amax/amin/max/min only: f(max x_i) = max f(x_i)).
  bool partial_passthrough = false;
  // The Partial kind per call when it depends on the args (vector_norm's ord), else `partial`.
  std::optional<ReduceOp> (*partial_of)(const OpSchema& s) = nullptr;
  // needs_elements per call when it depends on the args (vector_norm's ord +-inf is a max).
  bool (*needs_elements_of)(const OpSchema& s) = nullptr;
  // Two outputs of the output dtype (var_mean / std_mean), not values and int64 indices.
  bool two_values = false;
};

struct Parsed {
  absl::InlinedVector<bool, 6> mask;
  bool keepdim = false;
};

Parsed parse(const OpSchema& s, ArgLayout layout) {
  Parsed p;
  switch (layout) {
    case ArgLayout::kDimsKeepdim:
      p.mask = reduced_mask(s, s.arg<Shape>(0));
      p.keepdim = s.arg<bool>(1);
      break;
    case ArgLayout::kCorrectionDimsKeepdim:
    case ArgLayout::kOrdDimsKeepdim:  // one leading arg, then (dims, keepdim)
      p.mask = reduced_mask(s, s.arg<Shape>(1));
      p.keepdim = s.arg<bool>(2);
      break;
    case ArgLayout::kAll:
      p.mask = reduced_mask(s, Shape{});
      break;
    case ArgLayout::kDimKeepdim:
      p.mask = reduced_mask(s, Shape{s.arg<int64_t>(0)});
      p.keepdim = s.arg<bool>(1);
      break;
    case ArgLayout::kOptDimKeepdim:
      p.mask = s.has_arg(0) ? reduced_mask(s, Shape{s.arg<int64_t>(0)}) : reduced_mask(s, Shape{});
      p.keepdim = s.arg<bool>(1);
      break;
  }
  return p;
}

// Samples: even, uneven and empty shards, each reduced dim sharded or not, keepdim both ways.
// GCC 12 reports -Wmaybe-uninitialized inside absl::InlinedVector's move constructor when an
// inline Shape is moved into the ArgValue variant below: the move copies the whole inline
// buffer (Storage::MemcpyFrom), unused tail included, which GCC cannot see is never read. A
// false positive; silenced for this function only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
std::vector<OpSample> reduction_samples(ArgLayout layout, int64_t w) {
  std::vector<ArgList> arg_sets;
  switch (layout) {
    case ArgLayout::kDimsKeepdim:
      arg_sets = {{Shape{0}, false}, {Shape{-1}, true}, {Shape{}, false}};
      break;
    case ArgLayout::kCorrectionDimsKeepdim:
      arg_sets = {{int64_t{1}, Shape{1}, false}, {int64_t{0}, Shape{0}, true}};
      break;
    case ArgLayout::kAll:
      arg_sets = {{}};
      break;
    case ArgLayout::kDimKeepdim:
      arg_sets = {{int64_t{0}, false}, {int64_t{1}, true}};
      break;
    case ArgLayout::kOptDimKeepdim:
      arg_sets = {{std::monostate(), false}, {int64_t{1}, true}};
      break;
    case ArgLayout::kOrdDimsKeepdim: {
      const double inf = std::numeric_limits<double>::infinity();
      arg_sets = {{2.0, Shape{0}, false},
                  {1.0, Shape{-1}, true},
                  {inf, Shape{}, false},
                  {-inf, Shape{0}, true},
                  {3.0, Shape{1}, false}};
      break;
    }
  }
  std::vector<OpSample> out;
  for (const Shape& shape : {Shape{3 * w + 1, 5}, Shape{2, 2 * w + 1, 3}, Shape{1, 3}}) {
    for (const ArgList& args : arg_sets) out.push_back({{detail::sample(shape)}, args});
  }
  return out;
}
#pragma GCC diagnostic pop

void add_reduction(Registry& reg, const ReductionDef& def) {
  OpInfo info = detail::make_op(def.name, {"self"}, def.linearity);
  if (def.layout == ArgLayout::kCorrectionDimsKeepdim) info.schema_info.static_argnum = 1;
  info.meta = [def](const OpSchema& s) {
    const Parsed p = parse(s, def.layout);
    const Shape& shape = s.input(0).shape();
    if (def.needs_elements_of ? def.needs_elements_of(s) : def.needs_elements) {
      int64_t count = 1;
      for (size_t d = 0; d < shape.size(); ++d) count *= p.mask[d] ? shape[d] : 1;
      DT_CHECK(count > 0, "[%s] cannot reduce over zero elements (input shape %s)", s.name(),
               shape_str(shape));
    }
    const TensorMeta meta(reduced_shape(shape, p.mask, p.keepdim), reduction_dtype(s, def.dtype));
    OutputMetas metas{meta};
    if (def.num_outputs == 2) {  // indices, or var_mean's mean
      metas.push_back(TensorMeta(meta.shape, def.two_values ? meta.dtype : DType::kInt64));
    }
    return metas;
  };
  info.strategy = [def](const OpSchema& s) {
    const Parsed p = parse(s, def.layout);
    return reduction_rows(p.mask, p.keepdim, def.partial_of ? def.partial_of(s) : def.partial,
                          def.num_outputs, def.partial_passthrough);
  };
  info.kernel = def.kernel;
  // argmax, argmin, any, all
  info.differentiable = def.dtype != OutDType::kInt64 && def.dtype != OutDType::kBool;
  info.samples = [layout = def.layout](int64_t w) { return reduction_samples(layout, w); };
  const detail::ReductionGrad grad = detail::reduction_grad(def.name);
  info.backward = grad.backward;
  info.saved_inputs = grad.saved_inputs;
  info.saved_outputs = grad.saved_outputs;
  reg.add(std::move(info));
}

// value_selecting_backward(grad, indices; dim, keepdim, input_shape): the gradient of max/min
// along `dim` (reduction_backward.h). Every dim but `dim` may stay sharded (grad and indices
// alike); `dim` is whole in the output. Linear in the gradient.
void register_value_selecting_backward(Registry& reg) {
  OpInfo op = detail::gradient_op("value_selecting_backward", {"grad", "indices"});
  auto grad_dim = [](const OpSchema& s, int64_t d) {
    const int64_t dim = s.arg<int64_t>(0);
    return s.arg<bool>(1) || d < dim ? d : d - 1;
  };
  op.meta = [](const OpSchema& s) {
    const Shape& shape = s.arg<Shape>(2);
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), static_cast<int64_t>(shape.size()),
                                      "value_selecting_backward");
    DT_CHECK(dim == s.arg<int64_t>(0) && s.input(0).shape() == s.input(1).shape() &&
                 s.input(1).dtype() == kInt64,
             "[value_selecting_backward] grad %s and int64 indices %s must share a shape "
             "(dim %d normalised)",
             shape_str(s.input(0).shape()), shape_str(s.input(1).shape()), s.arg<int64_t>(0));
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  op.strategy = [grad_dim](const OpSchema& s) {
    const int64_t n = static_cast<int64_t>(s.arg<Shape>(2).size());
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      if (d == s.arg<int64_t>(0)) continue;
      const int64_t k = grad_dim(s, d);
      rows.push_back({Shard(d), Shard(k), Shard(k)});
    }
    return rows;
  };
  op.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    const int64_t dim = c.arg<int64_t>(0);
    const bool keepdim = c.arg<bool>(1);
    const Tensor g = keepdim ? l[0] : l[0].unsqueeze(dim);
    const Tensor idx = keepdim ? l[1] : l[1].unsqueeze(dim);
    return scatter_add_shard(c.output_shard(0).shape, dim, idx, g, 0);
  });
  // Linear in grad: its gradient is the gather of the incoming one at the indices (create_graph).
  op.differentiable = true;
  const detail::ReductionGrad grad = detail::reduction_grad(op.name);
  op.saved_inputs = grad.saved_inputs;  // indices
  op.backward = grad.backward;
  op.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{
        {{sample({3 * w + 1}), sample({3 * w + 1}, kInt64, 0, 3)},
         {int64_t{1}, false, Shape{3 * w + 1, 4}}},
        {{sample({1, 2 * w + 1}), sample({1, 2 * w + 1}, kInt64, 0, 1)},
         {int64_t{0}, true, Shape{2, 2 * w + 1}}},
        {{sample({detail::short_size(w)}), sample({detail::short_size(w)}, kInt64, 0, 3)},
         {int64_t{1}, false, Shape{detail::short_size(w), 4}}}};
  };
  reg.add(std::move(op));
}

// ---- local kernels -----------------------------------------------------------------------------
using Locals = absl::Span<const Tensor>;

// Normalised reduced-dim mask (empty dims = all).
absl::InlinedVector<bool, 6> mask_of(IntSpan dims, int64_t ndim, std::string_view op) {
  absl::InlinedVector<bool, 6> mask(std::max<int64_t>(ndim, 0), dims.empty());
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, ndim, op);
    if (ndim > 0) mask[n] = true;
  }
  return mask;
}

// Whether the local shard has no element along the reduced dims (a rank holding an empty
// chunk of a sharded reduced dim), and the local output shape in that case.
bool empty_along(const Tensor& local, absl::Span<const bool> mask, bool keepdim, Shape* out) {
  bool empty = false;
  out->clear();
  for (int64_t d = 0; d < local.dim(); ++d) {
    if (mask[d]) {
      empty |= local.size(d) == 0;
      if (keepdim) out->push_back(1);
    } else {
      out->push_back(local.size(d));
    }
  }
  return empty;
}

// The identity of max (lowest value) or min (highest value) for `dtype`.
Scalar extreme(DType dtype, bool lowest) {
  switch (dtype) {
    case DType::kBool:
      return Scalar(!lowest);
    case DType::kInt32:
      return Scalar(lowest ? int64_t{std::numeric_limits<int32_t>::min()}
                           : int64_t{std::numeric_limits<int32_t>::max()});
    case DType::kInt64:
      return Scalar(lowest ? std::numeric_limits<int64_t>::min()
                           : std::numeric_limits<int64_t>::max());
    default:
      return Scalar(lowest ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::infinity());
  }
}

// amax/amin (and max/min over all dims) on a local shard that may be empty along a reduced
// sharded dim: such a rank contributes the identity to the Partial(max/min).
Tensor local_extreme(const Tensor& local, IntSpan dims, bool keepdim, bool is_max) {
  const auto mask = mask_of(dims, local.dim(), is_max ? "amax" : "amin");
  Shape out;
  if (empty_along(local, mask, keepdim, &out) || local.numel() == 0) {
    return full(out, extreme(local.dtype(), is_max), TensorOptions(local.dtype(), local.device()));
  }
  return is_max ? amax(local, dims, keepdim) : amin(local, dims, keepdim);
}

// The reduction of an empty local shard, built directly (the local kernels are not relied on
// for empty inputs): its elements, if any, are `fill`.
Tensor reduce_empty(const Tensor& local, IntSpan dims, bool keepdim, const Scalar& fill,
                    DType dtype) {
  Shape out;
  empty_along(local, mask_of(dims, local.dim(), "reduce"), keepdim, &out);
  return full(out, fill, TensorOptions(dtype, local.device()));
}

Tensor sum_kernel(const KernelContext& c, Locals l) {
  return sum(l[0], c.arg<Shape>(0), c.arg<bool>(1));
}

// The local sum divided by the GLOBAL number of reduced elements: exact for uneven shards
// (each rank's share of the Partial(sum) is its own sum / n), and an empty local shard sums to
// zeros (0 / n = 0; NaN when n is 0 too, as on one device).
Tensor mean_kernel(const KernelContext& c, Locals l) {
  const Shape& dims = c.arg<Shape>(0);
  const Shape& global = c.schema().input(0).shape();
  const auto mask = mask_of(dims, static_cast<int64_t>(global.size()), "mean");
  int64_t n = 1;
  for (size_t d = 0; d < global.size(); ++d) n *= mask[d] ? global[d] : 1;
  // 16-bit floats: sum and divide in float32, round once (PyTorch's CPU mean; a float16 sum
  // overflowed: the mean of [60000, 60000] was inf).
  const DType dtype = l[0].dtype();
  if (dtype == kFloat16 || dtype == kBFloat16) {
    const Tensor s = sum(l[0].to(kFloat32), dims, c.arg<bool>(1));
    return div(s, Scalar(static_cast<double>(n))).to(dtype);
  }
  return div(sum(l[0], dims, c.arg<bool>(1)), Scalar(static_cast<double>(n)));
}

Tensor var_kernel(const KernelContext& c, Locals l) {
  const Shape& dims = c.arg<Shape>(1);
  const bool keepdim = c.arg<bool>(2);
  // Reduced dims are whole here, so an empty shard has no output elements unless the global
  // reduction is over zero elements (NaN, as the local op).
  if (l[0].numel() == 0) return reduce_empty(l[0], dims, keepdim, std::nan(""), l[0].dtype());
  return var(l[0], dims, c.arg<int64_t>(0), keepdim);
}

template <bool kMax>
Tensor amax_kernel(const KernelContext& c, Locals l) {
  return local_extreme(l[0], c.arg<Shape>(0), c.arg<bool>(1), kMax);
}

template <bool kMax>
Tensor max_all_kernel(const KernelContext&, Locals l) {
  return local_extreme(l[0], {}, false, kMax);
}

// max.dim / min.dim: values and indices along one (whole) dim.
template <bool kMax>
void max_dim_kernel(const KernelContext& c, Locals l, absl::Span<Tensor> o) {
  const int64_t dim = c.arg<int64_t>(0);
  const bool keepdim = c.arg<bool>(1);
  if (l[0].numel() == 0) {  // reduced dim whole: no output elements
    const int64_t d[] = {dim};
    o[0] = reduce_empty(l[0], d, keepdim, 0, l[0].dtype());
    o[1] = reduce_empty(l[0], d, keepdim, 0, DType::kInt64);
    return;
  }
  ValuesIndices r = kMax ? max(l[0], dim, keepdim) : min(l[0], dim, keepdim);
  o[0] = std::move(r.values);
  o[1] = std::move(r.indices);
}

template <bool kMax>
Tensor argmax_kernel(const KernelContext& c, Locals l) {
  const std::optional<int64_t> dim =
      c.has_arg(0) ? std::optional<int64_t>(c.arg<int64_t>(0)) : std::nullopt;
  const bool keepdim = c.arg<bool>(1);
  if (l[0].numel() == 0) {  // reduced dim whole: no output elements
    const int64_t d[] = {dim.value_or(0)};
    return reduce_empty(l[0], dim ? IntSpan(d) : IntSpan(), keepdim, 0, DType::kInt64);
  }
  return kMax ? argmax(l[0], dim, keepdim) : argmin(l[0], dim, keepdim);
}

Tensor std_kernel(const KernelContext& c, Locals l) {
  if (l[0].numel() == 0) return var_kernel(c, l);  // NaN or no elements, as var's
  return std(l[0], c.arg<Shape>(1), c.arg<int64_t>(0), c.arg<bool>(2));
}

// var_mean / std_mean: the reduced dims are whole here (no row shards them), so the local mean
// is the global one; an empty shard is handled as var's.
template <bool kStd>
void var_mean_kernel(const KernelContext& c, Locals l, absl::Span<Tensor> o) {
  const Shape& dims = c.arg<Shape>(1);
  const bool keepdim = c.arg<bool>(2);
  o[0] = kStd ? std_kernel(c, l) : var_kernel(c, l);
  o[1] = l[0].numel() == 0 ? reduce_empty(l[0], dims, keepdim, std::nan(""), l[0].dtype())
                           : mean(l[0], dims, keepdim);
}

Tensor logsumexp_kernel(const KernelContext& c, Locals l) {
  return logsumexp(l[0], c.arg<Shape>(0), c.arg<bool>(1));
}

// ord 1 sums |x| (Partial(sum) over a sharded reduced dim), ord +-inf takes the max / min of |x|
// (Partial(max/min)); every other ord needs the reduced dims whole.
std::optional<ReduceOp> norm_partial(const OpSchema& s) {
  const double ord = s.arg<double>(0);
  if (ord == 1.0) return ReduceOp::kSum;
  if (std::isinf(ord)) return ord > 0 ? ReduceOp::kMax : ReduceOp::kMin;
  return std::nullopt;
}

// ord +-inf is a max / min of |x|: no identity for zero elements.
bool norm_needs_elements(const OpSchema& s) {
  return std::isinf(s.arg<double>(0));
}

// A rank whose shard is empty along a sharded reduced dim contributes the identity of its
// Partial: 0 for sums and for the max of |x|, +inf for the min.
Tensor vector_norm_kernel(const KernelContext& c, Locals l) {
  const double ord = c.arg<double>(0);
  const Shape& dims = c.arg<Shape>(1);
  const bool keepdim = c.arg<bool>(2);
  Shape out;
  if (std::isinf(ord) &&
      (empty_along(l[0], mask_of(dims, l[0].dim(), "vector_norm"), keepdim, &out) ||
       l[0].numel() == 0)) {
    return full(out, ord > 0 ? 0.0 : std::numeric_limits<double>::infinity(),
                TensorOptions(l[0].dtype(), l[0].device()));
  }
  return vector_norm(l[0], ord, dims, keepdim);
}

// An empty shard gives any = false and all = true: the identities of Partial(max) / (min).
template <bool kAny>
Tensor any_kernel(const KernelContext& c, Locals l) {
  return kAny ? any(l[0], c.arg<Shape>(0), c.arg<bool>(1))
              : all(l[0], c.arg<Shape>(0), c.arg<bool>(1));
}

}  // namespace

void register_reduction_ops(Registry& reg) {
  using A = ArgLayout;
  using D = OutDType;
  const auto kSum = ReduceOp::kSum, kMax = ReduceOp::kMax, kMin = ReduceOp::kMin;
  const auto none = std::nullopt;
  const auto kLinear = Linearity::kLinear, kNone = Linearity::kNone;
  // Sums and means are linear: Partial(sum)/Partial(avg) inputs pass through.
  add_reduction(reg, {"sum", A::kDimsKeepdim, D::kSum, kSum, single_output(sum_kernel), kLinear});
  add_reduction(
      reg, {"mean", A::kDimsKeepdim, D::kFloatOnly, kSum, single_output(mean_kernel), kLinear});
  add_reduction(reg,
                {"var", A::kCorrectionDimsKeepdim, D::kFloatOnly, none, single_output(var_kernel)});
  add_reduction(reg, {"amax", A::kDimsKeepdim, D::kSame, kMax, single_output(amax_kernel<true>),
                      kNone, 1, true, true});
  add_reduction(reg, {"amin", A::kDimsKeepdim, D::kSame, kMin, single_output(amax_kernel<false>),
                      kNone, 1, true, true});
  add_reduction(reg, {"max", A::kAll, D::kSame, kMax, single_output(max_all_kernel<true>), kNone, 1,
                      true, true});
  add_reduction(reg, {"min", A::kAll, D::kSame, kMin, single_output(max_all_kernel<false>), kNone,
                      1, true, true});
  add_reduction(reg,
                {"max.dim", A::kDimKeepdim, D::kSame, none, max_dim_kernel<true>, kNone, 2, true});
  add_reduction(reg,
                {"min.dim", A::kDimKeepdim, D::kSame, none, max_dim_kernel<false>, kNone, 2, true});
  add_reduction(reg, {"argmax", A::kOptDimKeepdim, D::kInt64, none,
                      single_output(argmax_kernel<true>), kNone, 1, true});
  add_reduction(reg, {"argmin", A::kOptDimKeepdim, D::kInt64, none,
                      single_output(argmax_kernel<false>), kNone, 1, true});
  // Composite reductions (reduction_math.cc).
  add_reduction(reg,
                {"std", A::kCorrectionDimsKeepdim, D::kFloatOnly, none, single_output(std_kernel)});
  // var_mean / std_mean: (var or std, mean), both needing the reduced dims whole (as var).
  add_reduction(reg, {.name = "var_mean",
                      .layout = A::kCorrectionDimsKeepdim,
                      .dtype = D::kFloatOnly,
                      .partial = none,
                      .kernel = var_mean_kernel<false>,
                      .num_outputs = 2,
                      .two_values = true});
  add_reduction(reg, {.name = "std_mean",
                      .layout = A::kCorrectionDimsKeepdim,
                      .dtype = D::kFloatOnly,
                      .partial = none,
                      .kernel = var_mean_kernel<true>,
                      .num_outputs = 2,
                      .two_values = true});
  add_reduction(reg,
                {"logsumexp", A::kDimsKeepdim, D::kToFloat, none, single_output(logsumexp_kernel)});
  add_reduction(reg, {.name = "vector_norm",
                      .layout = A::kOrdDimsKeepdim,
                      .dtype = D::kFloatOnly,
                      .partial = none,
                      .kernel = single_output(vector_norm_kernel),
                      .partial_of = norm_partial,
                      .needs_elements_of = norm_needs_elements});
  // prod: no Partial(prod), so a sharded reduced dim is gathered (kernel: dtensor/ops/scan).
  add_reduction(reg, {"prod", A::kAll, D::kSum, none,
                      single_output([](const KernelContext&, Locals l) { return prod(l[0]); })});
  add_reduction(reg, {"prod.dim_int", A::kDimKeepdim, D::kSum, none,
                      single_output([](const KernelContext& c, Locals l) {
                        return prod(l[0], c.arg<int64_t>(0), c.arg<bool>(1));
                      })});
  add_reduction(reg, {"any", A::kDimsKeepdim, D::kBool, kMax, single_output(any_kernel<true>)});
  add_reduction(reg, {"all", A::kDimsKeepdim, D::kBool, kMin, single_output(any_kernel<false>)});
  register_value_selecting_backward(reg);
}

}  // namespace dtensor
