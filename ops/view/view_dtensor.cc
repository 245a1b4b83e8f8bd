// DTensor forms of the view and shape ops: dispatch with the strategies of view_strategy.cc.
// Kernels that change shapes take their local target shape from the chosen output spec.
#include <algorithm>

#include "dtensor/propagation/dispatch.h"
#include "ops/view/dtensor_op_util.h"
#include "ops/view/view.h"
#include "tensor/error.h"

namespace dtensor {
namespace {

using Locals = absl::Span<const Tensor>;

// The registered op, looked up once per call site.
#define DT_VIEW_OP(name)                               \
  []() -> const OpInfo& {                              \
    static const OpInfo& op = detail::family_op(name); \
    return op;                                         \
  }()

// -1 inference of view/reshape on the global shape.
Shape infer_view_shape(IntSpan shape, int64_t numel, std::string_view op) {
  Shape out(shape.begin(), shape.end());
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      DT_CHECK(infer < 0, "[%s] shape %s has more than one -1", op, shape_str(shape));
      infer = static_cast<int64_t>(d);
    } else {
      DT_CHECK(out[d] >= 0, "[%s] shape %s has a negative size", op, shape_str(shape));
      known *= out[d];
    }
  }
  if (infer >= 0) {
    DT_CHECK(known != 0 && numel % known == 0,
             "[%s] shape %s is invalid for an input of %d elements", op, shape_str(shape), numel);
    out[infer] = numel / known;
    known *= out[infer];
  }
  DT_CHECK(known == numel, "[%s] shape %s is invalid for an input of %d elements", op,
           shape_str(shape), numel);
  return out;
}

// Runs a single-output view op whose local kernel needs the local output shape.
template <typename Fn>
DTensor dispatch_shaped(const OpInfo& op, const DTensor& x, absl::Span<const ArgValue> args,
                        Fn fn) {
  const DTensor* in[] = {&x};
  const std::shared_ptr<const OutputSharding> sh = detail::sharding_for(op, in, args);
  const Shape local_shape = sh->outputs[0]->local_shard().shape;
  return dispatch(op, in, args, [&](Locals l) { return fn(l[0], IntSpan(local_shape)); });
}

std::vector<DTensor> to_vector(DTensorList list) {
  return std::vector<DTensor>(std::make_move_iterator(list.begin()),
                              std::make_move_iterator(list.end()));
}

}  // namespace

DTensor view(const DTensor& x, IntSpan shape) {
  DT_CHECK(x.defined(), "[view] argument self is an undefined DTensor");
  const ArgValue args[] = {infer_view_shape(shape, x.numel(), "view")};
  return dispatch_shaped(DT_VIEW_OP("view"), x, args,
                         [](const Tensor& l, IntSpan s) { return l.view(s); });
}

DTensor reshape(const DTensor& x, IntSpan shape) {
  DT_CHECK(x.defined(), "[reshape] argument self is an undefined DTensor");
  const ArgValue args[] = {infer_view_shape(shape, x.numel(), "reshape")};
  return dispatch_shaped(DT_VIEW_OP("reshape"), x, args,
                         [](const Tensor& l, IntSpan s) { return l.reshape(s); });
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
  const DTensor* in[] = {&x};
  const ArgValue args[] = {dim0, dim1};
  return dispatch(DT_VIEW_OP("transpose"), in, args,
                  [&](Locals l) { return l[0].transpose(dim0, dim1); });
}

DTensor t(const DTensor& x) {
  DT_CHECK(x.defined(), "[t] argument self is an undefined DTensor");
  DT_CHECK(x.dim() <= 2, "[t] expected a tensor with at most 2 dims, got %d-d of shape %s", x.dim(),
           shape_str(x.shape()));
  return x.dim() < 2 ? x : transpose(x, 0, 1);
}

DTensor permute(const DTensor& x, IntSpan dims) {
  const DTensor* in[] = {&x};
  const ArgValue args[] = {Shape(dims.begin(), dims.end())};
  return dispatch(DT_VIEW_OP("permute"), in, args, [&](Locals l) { return l[0].permute(dims); });
}

DTensor unsqueeze(const DTensor& x, int64_t dim) {
  const DTensor* in[] = {&x};
  const ArgValue args[] = {dim};
  return dispatch(DT_VIEW_OP("unsqueeze"), in, args, [&](Locals l) { return l[0].unsqueeze(dim); });
}

namespace {

// Drops exactly the global dims `dims` (ascending): a local shard may have size 0 where the
// global size is 1, and a local squeeze() would keep it.
DTensor squeeze_dims(const DTensor& x, Shape dims) {
  const DTensor* in[] = {&x};
  const ArgValue args[] = {dims};
  return dispatch(DT_VIEW_OP("squeeze"), in, args, [&](Locals l) {
    Tensor out = l[0];
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
      Shape s = out.sizes();
      s.erase(s.begin() + *it);
      out = out.reshape(s);
    }
    return out;
  });
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
  return dispatch_shaped(DT_VIEW_OP("expand"), x, args,
                         [](const Tensor& l, IntSpan s) { return l.expand(s); });
}

DTensor narrow(const DTensor& x, int64_t dim, int64_t start, int64_t length) {
  const ArgValue args[] = {dim, start, length};
  return dispatch_shaped(DT_VIEW_OP("narrow"), x, args, [&](const Tensor& l, IntSpan s) {
    const int64_t d = normalize_dim(dim, l.dim(), "narrow");
    return l.size(d) == s[d] ? l : l.narrow(d, start, length);  // untouched dim: as is
  });
}

DTensor slice(const DTensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const ArgValue args[] = {dim, start, end, step};
  return dispatch_shaped(DT_VIEW_OP("slice"), x, args, [&](const Tensor& l, IntSpan s) {
    const int64_t d = normalize_dim(dim, l.dim(), "slice");
    return l.size(d) == s[d] && step == 1 ? l : l.slice(d, start, end, step);
  });
}

DTensor select(const DTensor& x, int64_t dim, int64_t index) {
  const DTensor* in[] = {&x};
  const ArgValue args[] = {dim, index};
  return dispatch(DT_VIEW_OP("select"), in, args,
                  [&](Locals l) { return l[0].select(dim, index); });
}

DTensor cat(const std::vector<DTensor>& tensors, int64_t dim) {
  DT_CHECK(!tensors.empty(), "[cat] expected a non-empty list of tensors");
  absl::InlinedVector<const DTensor*, 4> in;
  for (const DTensor& x : tensors) in.push_back(&x);
  const ArgValue args[] = {dim};
  return dispatch(DT_VIEW_OP("cat"), in, args,
                  [&](Locals l) { return cat(std::vector<Tensor>(l.begin(), l.end()), dim); });
}

DTensor stack(const std::vector<DTensor>& tensors, int64_t dim) {
  DT_CHECK(!tensors.empty(), "[stack] expected a non-empty list of tensors");
  absl::InlinedVector<const DTensor*, 4> in;
  for (const DTensor& x : tensors) in.push_back(&x);
  const ArgValue args[] = {dim};
  return dispatch(DT_VIEW_OP("stack"), in, args,
                  [&](Locals l) { return stack(std::vector<Tensor>(l.begin(), l.end()), dim); });
}

std::vector<DTensor> split(const DTensor& x, IntSpan split_sizes, int64_t dim) {
  const DTensor* in[] = {&x};
  const ArgValue args[] = {Shape(split_sizes.begin(), split_sizes.end()), dim};
  return to_vector(
      dispatch_multi(DT_VIEW_OP("split"), in, args, [&](Locals l, absl::Span<Tensor> outs) {
        std::vector<Tensor> parts = split(l[0], split_sizes, dim);
        std::copy(parts.begin(), parts.end(), outs.begin());
      }));
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

}  // namespace dtensor
