// DTensor forms of the view and shape ops: each looks its op up once and dispatches it
// (strategies and kernels are registered in view_strategy.cc).
#include <algorithm>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/detail/view_hooks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/common/detail/type_promotion.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// The registered op, looked up once per call site.
#define DT_VIEW_OP(name)                    \
  []() -> const OpInfo& {                   \
    static const OpInfo& op = ops_op(name); \
    return op;                              \
  }()

DTensor dispatch_one(const OpInfo& op, const DTensor& x, absl::Span<const ArgValue> args) {
  return dispatch(op, {&x}, args);
}

// cat / stack: the op over a non-empty list of tensors along dim.
DTensor dispatch_list(const OpInfo& op, const std::vector<DTensor>& tensors, int64_t dim) {
  DT_CHECK(!tensors.empty(), "[%s] expected a non-empty list of tensors", op.name);
  absl::InlinedVector<const DTensor*, 4> in;
  for (const DTensor& x : tensors) in.push_back(&x);
  const ArgValue args[] = {dim};
  return dispatch(op, in, args);
}

std::vector<DTensor> to_vector(DTensorList list) {
  return std::vector<DTensor>(std::make_move_iterator(list.begin()),
                              std::make_move_iterator(list.end()));
}

}  // namespace

DTensor view(const DTensor& x, IntSpan shape) {
  DT_CHECK(x.defined(), "[view] argument self is an undefined DTensor");
  const ArgValue args[] = {infer_view_shape(shape, x.numel(), x.shape(), "view")};
  return dispatch_one(DT_VIEW_OP("view"), x, args);
}

DTensor reshape(const DTensor& x, IntSpan shape) {
  DT_CHECK(x.defined(), "[reshape] argument self is an undefined DTensor");
  const ArgValue args[] = {infer_view_shape(shape, x.numel(), x.shape(), "reshape")};
  return dispatch_one(DT_VIEW_OP("reshape"), x, args);
}

DTensor flatten(const DTensor& x, int64_t start_dim, int64_t end_dim) {
  DT_CHECK(x.defined(), "[flatten] argument self is an undefined DTensor");
  if (x.dim() == 0) return reshape(x, {1});
  const int64_t a = normalize_dim(start_dim, x.dim(), "flatten");
  const int64_t b = normalize_dim(end_dim, x.dim(), "flatten");
  DT_CHECK(a <= b, "[flatten] start_dim %d must not come after end_dim %d", start_dim, end_dim);
  Shape shape;
  for (int64_t d = 0; d < a; ++d) shape.push_back(x.size(d));
  int64_t merged = 1;
  for (int64_t d = a; d <= b; ++d) merged *= x.size(d);
  shape.push_back(merged);
  for (int64_t d = b + 1; d < x.dim(); ++d) shape.push_back(x.size(d));
  return reshape(x, shape);
}

DTensor transpose(const DTensor& x, int64_t dim0, int64_t dim1) {
  const ArgValue args[] = {dim0, dim1};
  return dispatch_one(DT_VIEW_OP("transpose"), x, args);
}

DTensor t(const DTensor& x) {
  DT_CHECK(x.defined(), "[t] argument self is an undefined DTensor");
  DT_CHECK(x.dim() <= 2, "[t] expected a tensor with at most 2 dims, got %d-d of shape %s", x.dim(),
           shape_str(x.shape()));
  return x.dim() < 2 ? x : transpose(x, 0, 1);
}

DTensor permute(const DTensor& x, IntSpan dims) {
  const ArgValue args[] = {Shape(dims.begin(), dims.end())};
  return dispatch_one(DT_VIEW_OP("permute"), x, args);
}

DTensor unsqueeze(const DTensor& x, int64_t dim) {
  const ArgValue args[] = {dim};
  return dispatch_one(DT_VIEW_OP("unsqueeze"), x, args);
}

namespace {

// Drops exactly the global dims `dims` (ascending).
DTensor squeeze_dims(const DTensor& x, Shape dims) {
  const ArgValue args[] = {std::move(dims)};
  return dispatch_one(DT_VIEW_OP("squeeze"), x, args);
}

}  // namespace

DTensor squeeze(const DTensor& x) {
  DT_CHECK(x.defined(), "[squeeze] argument self is an undefined DTensor");
  Shape dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 1) dims.push_back(d);
  }
  return squeeze_dims(x, dims);
}

DTensor squeeze(const DTensor& x, int64_t dim) {
  DT_CHECK(x.defined(), "[squeeze] argument self is an undefined DTensor");
  const int64_t d = normalize_dim(dim, x.dim(), "squeeze");
  Shape dims;
  if (x.dim() > 0 && x.size(d) == 1) dims.push_back(d);
  return squeeze_dims(x, dims);
}

DTensor expand(const DTensor& x, IntSpan shape) {
  DT_CHECK(x.defined(), "[expand] argument self is an undefined DTensor");
  // Canonical target (no -1) so equal expansions share one cache entry.
  Shape target(shape.begin(), shape.end());
  const int64_t lead = static_cast<int64_t>(target.size()) - x.dim();
  DT_CHECK(lead >= 0, "[expand] target shape %s has fewer dims than the input's %s",
           shape_str(shape), shape_str(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (target[lead + d] == -1) target[lead + d] = x.size(d);
  }
  const ArgValue args[] = {target};
  return dispatch_one(DT_VIEW_OP("expand"), x, args);
}

DTensor narrow(const DTensor& x, int64_t dim, int64_t start, int64_t length) {
  const ArgValue args[] = {dim, start, length};
  return dispatch_one(DT_VIEW_OP("narrow"), x, args);
}

DTensor slice(const DTensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const ArgValue args[] = {dim, start, end, step};
  return dispatch_one(DT_VIEW_OP("slice"), x, args);
}

DTensor select(const DTensor& x, int64_t dim, int64_t index) {
  const ArgValue args[] = {dim, index};
  return dispatch_one(DT_VIEW_OP("select"), x, args);
}

namespace {

// PyTorch's cat / stack promote their inputs to one dtype (torch.cat([int32, float64]) is
// float64): the inputs of another dtype, cast (differentiable: their gradient is cast back).
// The list itself when the dtypes already agree (or an input is undefined: the op names it).
std::vector<DTensor> promoted(const std::vector<DTensor>& tensors) {
  if (tensors.empty() || !tensors[0].defined()) return tensors;
  DType dtype = tensors[0].dtype();
  for (const DTensor& t : tensors) {
    if (!t.defined()) return tensors;
    dtype = promote_types(dtype, t.dtype());
  }
  std::vector<DTensor> out = tensors;
  for (DTensor& t : out) {
    if (t.dtype() != dtype) t = cast(t, dtype);
  }
  return out;
}

}  // namespace

DTensor cat(const std::vector<DTensor>& tensors, int64_t dim) {
  return dispatch_list(DT_VIEW_OP("cat"), promoted(tensors), dim);
}

DTensor stack(const std::vector<DTensor>& tensors, int64_t dim) {
  return dispatch_list(DT_VIEW_OP("stack"), promoted(tensors), dim);
}

std::vector<DTensor> split(const DTensor& x, IntSpan split_sizes, int64_t dim) {
  const ArgValue args[] = {Shape(split_sizes.begin(), split_sizes.end()), dim};
  return to_vector(dispatch_multi(DT_VIEW_OP("split"), {&x}, args));
}

namespace {

Shape sizes_along(const std::vector<Tensor>& parts, int64_t dim) {
  Shape sizes;
  for (const Tensor& p : parts) sizes.push_back(p.size(dim));
  return sizes;
}

}  // namespace

std::vector<DTensor> split(const DTensor& x, int64_t split_size, int64_t dim) {
  DT_CHECK(x.defined(), "[split] argument self is an undefined DTensor");
  const std::vector<Tensor> parts =
      split(detail::meta_tensor(x.shape(), x.dtype()), split_size, dim);
  return split(x, sizes_along(parts, dim), dim);
}

std::vector<DTensor> chunk(const DTensor& x, int64_t chunks, int64_t dim) {
  DT_CHECK(x.defined(), "[chunk] argument self is an undefined DTensor");
  const std::vector<Tensor> parts = chunk(detail::meta_tensor(x.shape(), x.dtype()), chunks, dim);
  return split(x, sizes_along(parts, dim), dim);
}

// DTensor's view and copy members (x.view(...), x.clone(), ...; dtensor/core/view_members.cc)
// are these free functions: the table is installed when the ops library is loaded.
namespace {

constexpr detail::ViewHooks kViewHooks{
    .view = [](const DTensor& x, IntSpan shape) { return view(x, shape); },
    .reshape = [](const DTensor& x, IntSpan shape) { return reshape(x, shape); },
    .transpose = [](const DTensor& x, int64_t d0, int64_t d1) { return transpose(x, d0, d1); },
    .t = [](const DTensor& x) { return t(x); },
    .permute = [](const DTensor& x, IntSpan dims) { return permute(x, dims); },
    .unsqueeze = [](const DTensor& x, int64_t dim) { return unsqueeze(x, dim); },
    .squeeze_all = [](const DTensor& x) { return squeeze(x); },
    .squeeze_dim = [](const DTensor& x, int64_t dim) { return squeeze(x, dim); },
    .flatten = [](const DTensor& x, int64_t s, int64_t e) { return flatten(x, s, e); },
    .expand = [](const DTensor& x, IntSpan shape) { return expand(x, shape); },
    .narrow = [](const DTensor& x, int64_t dim, int64_t start,
                 int64_t length) { return narrow(x, dim, start, length); },
    .slice = [](const DTensor& x, int64_t dim, int64_t start, int64_t end,
                int64_t step) { return slice(x, dim, start, end, step); },
    .select = [](const DTensor& x, int64_t dim, int64_t index) { return select(x, dim, index); },
    .contiguous = [](const DTensor& x) { return contiguous(x); },
    .clone = [](const DTensor& x) { return clone(x); },
};

[[maybe_unused]] const bool kViewHooksInstalled = (detail::set_view_hooks(&kViewHooks), true);

}  // namespace

}  // namespace dtensor
