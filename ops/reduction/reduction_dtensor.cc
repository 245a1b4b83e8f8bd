// DTensor forms of the reductions: dispatch with the local kernels of reduction.h.
#include <cmath>
#include <limits>

#include "dtensor/propagation/dispatch.h"
#include "ops/elementwise/elementwise.h"
#include "ops/ops_registry.h"
#include "ops/reduction/reduction.h"
#include "tensor/creation.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

ArgValue dims_arg(IntSpan dims) {
  return Shape(dims.begin(), dims.end());
}

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

}  // namespace

DTensor sum(const DTensor& x, IntSpan dims, bool keepdim) {
  static const OpInfo& info = ops_op("sum");
  const ArgValue args[] = {dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args, [&](Locals l) { return sum(l[0], dims, keepdim); });
}

DTensor mean(const DTensor& x, IntSpan dims, bool keepdim) {
  static const OpInfo& info = ops_op("mean");
  const ArgValue args[] = {dims_arg(dims), keepdim};
  // Global number of reduced elements (computed after propagation validated the dims).
  auto count = [&] {
    const auto mask = mask_of(dims, x.dim(), "mean");
    int64_t n = 1;
    for (int64_t d = 0; d < x.dim(); ++d) n *= mask[d] ? x.size(d) : 1;
    return n;
  };
  // An empty local shard sums to zeros (0 / n = 0; NaN when the global count n is 0 too).
  return dispatch(info, {&x}, args, [&](Locals l) {
    return div(sum(l[0], dims, keepdim), Scalar(static_cast<double>(count())));
  });
}

DTensor var(const DTensor& x, IntSpan dims, int64_t correction, bool keepdim) {
  static const OpInfo& info = ops_op("var");
  const ArgValue args[] = {correction, dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args, [&](Locals l) {
    // Reduced dims are whole here, so an empty shard has no output elements unless the global
    // reduction is over zero elements (NaN, as the local op).
    if (l[0].numel() == 0) return reduce_empty(l[0], dims, keepdim, std::nan(""), l[0].dtype());
    return var(l[0], dims, correction, keepdim);
  });
}

DTensor amax(const DTensor& x, IntSpan dims, bool keepdim) {
  static const OpInfo& info = ops_op("amax");
  const ArgValue args[] = {dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args,
                  [&](Locals l) { return local_extreme(l[0], dims, keepdim, true); });
}

DTensor amin(const DTensor& x, IntSpan dims, bool keepdim) {
  static const OpInfo& info = ops_op("amin");
  const ArgValue args[] = {dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args,
                  [&](Locals l) { return local_extreme(l[0], dims, keepdim, false); });
}

DTensor max(const DTensor& x) {
  static const OpInfo& info = ops_op("max");
  return dispatch(info, {&x}, {}, [](Locals l) { return local_extreme(l[0], {}, false, true); });
}

DTensor min(const DTensor& x) {
  static const OpInfo& info = ops_op("min");
  return dispatch(info, {&x}, {}, [](Locals l) { return local_extreme(l[0], {}, false, false); });
}

namespace {
// max.dim / min.dim: values and indices along one dim. `local` is the local Tensor op.
DTensorValuesIndices extreme_along_dim(const OpInfo& info, const DTensor& x, int64_t dim,
                                       bool keepdim,
                                       ValuesIndices (*local)(const Tensor&, int64_t, bool)) {
  const ArgValue args[] = {dim, keepdim};
  DTensorList outs = dispatch_multi(info, {&x}, args, [&](Locals l, absl::Span<Tensor> o) {
    if (l[0].numel() == 0) {  // reduced dim whole: no output elements
      const int64_t d[] = {dim};
      o[0] = reduce_empty(l[0], d, keepdim, 0, l[0].dtype());
      o[1] = reduce_empty(l[0], d, keepdim, 0, DType::kInt64);
      return;
    }
    ValuesIndices r = local(l[0], dim, keepdim);
    o[0] = std::move(r.values);
    o[1] = std::move(r.indices);
  });
  return {std::move(outs[0]), std::move(outs[1])};
}
}  // namespace

DTensorValuesIndices max(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& info = ops_op("max.dim");
  return extreme_along_dim(info, x, dim, keepdim,
                           static_cast<ValuesIndices (*)(const Tensor&, int64_t, bool)>(&max));
}

DTensorValuesIndices min(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& info = ops_op("min.dim");
  return extreme_along_dim(info, x, dim, keepdim,
                           static_cast<ValuesIndices (*)(const Tensor&, int64_t, bool)>(&min));
}

DTensor argmax(const DTensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpInfo& info = ops_op("argmax");
  const ArgValue args[] = {dim ? ArgValue(*dim) : ArgValue(), keepdim};
  return dispatch(info, {&x}, args, [&](Locals l) {
    if (l[0].numel() == 0) {  // reduced dim whole: no output elements
      const int64_t d[] = {dim.value_or(0)};
      return reduce_empty(l[0], dim ? IntSpan(d) : IntSpan(), keepdim, 0, DType::kInt64);
    }
    return argmax(l[0], dim, keepdim);
  });
}

DTensor argmin(const DTensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpInfo& info = ops_op("argmin");
  const ArgValue args[] = {dim ? ArgValue(*dim) : ArgValue(), keepdim};
  return dispatch(info, {&x}, args, [&](Locals l) {
    if (l[0].numel() == 0) {  // reduced dim whole: no output elements
      const int64_t d[] = {dim.value_or(0)};
      return reduce_empty(l[0], dim ? IntSpan(d) : IntSpan(), keepdim, 0, DType::kInt64);
    }
    return argmin(l[0], dim, keepdim);
  });
}

}  // namespace dtensor
