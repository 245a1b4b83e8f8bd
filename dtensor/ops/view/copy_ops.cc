// The Tensor forms of copy_ops.h.
#include "dtensor/ops/view/detail/copy_ops.h"

#include <algorithm>

#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor {

namespace detail {

Shape distinct_dims(IntSpan dims, int64_t ndim, std::string_view op) {
  Shape out;
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, ndim, op);
    DT_CHECK(std::find(out.begin(), out.end(), n) == out.end(),
             "[%s] dim %d appears more than once in dims %s", op, n, shape_str(dims));
    out.push_back(n);
  }
  return out;
}

Shape movedim_permutation(IntSpan source, IntSpan destination, int64_t ndim) {
  DT_CHECK(source.size() == destination.size(),
           "[movedim] source %s and destination %s must have the same length", shape_str(source),
           shape_str(destination));
  const Shape src = distinct_dims(source, ndim, "movedim");
  const Shape dst = distinct_dims(destination, ndim, "movedim");
  Shape perm(ndim, -1);
  for (size_t i = 0; i < src.size(); ++i) perm[dst[i]] = src[i];
  // The remaining dims, in order, fill the remaining places.
  int64_t next = 0;
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (std::find(src.begin(), src.end(), next) != src.end()) ++next;
    p = next++;
  }
  return perm;
}

Shape unflatten_shape(IntSpan shape, int64_t dim, IntSpan sizes) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const int64_t d = normalize_dim(dim, ndim, "unflatten");
  DT_CHECK(!sizes.empty(), "[unflatten] sizes must not be empty");
  const Shape inner = infer_view_shape(sizes, shape[d], Shape{shape[d]}, "unflatten");
  Shape out(shape.begin(), shape.begin() + d);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), shape.begin() + d + 1, shape.end());
  return out;
}

Shape repeat_shape(IntSpan shape, IntSpan repeats) {
  const int64_t nr = static_cast<int64_t>(repeats.size());
  const int64_t ndim = static_cast<int64_t>(shape.size());
  DT_CHECK(nr >= ndim,
           "[repeat] repeats %s has fewer entries than the tensor has dims (%d, shape %s)",
           shape_str(repeats), ndim, shape_str(shape));
  Shape out;
  for (int64_t i = 0; i < nr; ++i) {
    DT_CHECK(repeats[i] >= 0, "[repeat] repeats %s must be >= 0", shape_str(repeats));
    out.push_back(repeats[i] * (i < nr - ndim ? 1 : shape[i - (nr - ndim)]));
  }
  return out;
}

Shape tile_repeats(IntSpan reps, int64_t ndim) {
  Shape padded(std::max<int64_t>(0, ndim - static_cast<int64_t>(reps.size())), 1);
  padded.insert(padded.end(), reps.begin(), reps.end());
  return padded;
}

void check_triangle_input(std::string_view op, IntSpan shape) {
  DT_CHECK(shape.size() >= 2, "[%s] expected a tensor with at least 2 dims, got shape %s", op,
           shape_str(shape));
}

void check_roll_args(IntSpan shifts, IntSpan dims) {
  DT_CHECK(dims.empty() ? shifts.size() == 1 : shifts.size() == dims.size(),
           "[roll] shifts %s and dims %s: expected one shift per dim (or one shift and no dims)",
           shape_str(shifts), shape_str(dims));
}

int64_t check_repeat_interleave(IntSpan shape, int64_t repeats, int64_t dim) {
  DT_CHECK(repeats >= 0, "[repeat_interleave] repeats %d must be >= 0", repeats);
  DT_CHECK(!shape.empty(),
           "[repeat_interleave] argument self is 0-d (expected at least one dim; reshape it to "
           "[1] first)");
  return normalize_dim(dim, static_cast<int64_t>(shape.size()), "repeat_interleave");
}

DiagonalDims diagonal_dims(IntSpan shape, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t n = static_cast<int64_t>(shape.size());
  DT_CHECK(n >= 2, "[diagonal] argument self has %d dims, expected at least 2", n);
  DiagonalDims d{normalize_dim(dim1, n, "diagonal"), normalize_dim(dim2, n, "diagonal"), 0};
  DT_CHECK(d.dim1 != d.dim2, "[diagonal] dim1 and dim2 are both dim %d (expected two dims)",
           d.dim1);
  const int64_t n1 = shape[d.dim1], n2 = shape[d.dim2];
  d.length =
      std::max<int64_t>(0, offset >= 0 ? std::min(n1, n2 - offset) : std::min(n1 + offset, n2));
  return d;
}

Shape diagonal_shape(IntSpan shape, int64_t offset, int64_t dim1, int64_t dim2) {
  const DiagonalDims d = diagonal_dims(shape, offset, dim1, dim2);
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i != d.dim1 && i != d.dim2) out.push_back(shape[i]);
  }
  out.push_back(d.length);
  return out;
}

}  // namespace detail

Tensor clone(const Tensor& x) {
  return x.clone();
}

Tensor contiguous(const Tensor& x) {
  return x.contiguous();
}

// One gather per flipped dim with the reversed index along it.
Tensor flip(const Tensor& x, IntSpan dims) {
  Tensor out = x;
  bool moved = false;
  for (int64_t d : detail::distinct_dims(dims, x.dim(), "flip")) {
    const int64_t n = x.size(d);
    if (n <= 1) continue;
    moved = true;
    Shape along(x.dim(), 1);
    along[d] = n;
    const Tensor index = (Scalar(n - 1) - arange(n, TensorOptions(kInt64, x.device())))
                             .view(along)
                             .expand(x.sizes());
    out = gather(out, d, index);
  }
  return moved ? out : x.clone();
}

// The tail of length `shift` moves to the front: cat(narrow(tail), narrow(head)) per dim.
Tensor roll(const Tensor& x, IntSpan shifts, IntSpan dims) {
  detail::check_roll_args(shifts, dims);
  if (dims.empty()) return roll(x.reshape({-1}), shifts, Shape{0}).view(x.sizes());
  const Shape ds = detail::distinct_dims(dims, x.dim(), "roll");
  Tensor out = x;
  bool moved = false;
  for (size_t i = 0; i < ds.size(); ++i) {
    const int64_t n = x.size(ds[i]);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    out = cat({out.narrow(ds[i], n - s, s), out.narrow(ds[i], 0, n - s)}, ds[i]);
    moved = true;
  }
  return moved ? out : x.clone();
}

// x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...] and copied into
// [r0 s0, r1 s1, ...].
Tensor repeat(const Tensor& x, IntSpan repeats) {
  const Shape out = detail::repeat_shape(x.sizes(), repeats);
  const int64_t lead = static_cast<int64_t>(repeats.size()) - x.dim();
  Shape inter, expanded;
  for (int64_t i = 0; i < static_cast<int64_t>(repeats.size()); ++i) {
    const int64_t s = i < lead ? 1 : x.size(i - lead);
    inter.insert(inter.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
  }
  // A copy even when every repeat is 1 (contiguous() would then return x's memory).
  const Tensor e = x.reshape(inter).expand(expanded);
  return (e.is_contiguous() ? e.clone() : e.contiguous()).view(out);
}

Tensor tile(const Tensor& x, IntSpan reps) {
  return repeat(x, detail::tile_repeats(reps, x.dim()));
}

// x with dim split into [n, 1], expanded to [n, repeats] and merged back.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim) {
  const int64_t d = detail::check_repeat_interleave(x.sizes(), repeats, dim);
  Shape expanded = x.sizes();
  expanded.insert(expanded.begin() + d + 1, repeats);
  Shape out = x.sizes();
  out[d] *= repeats;
  const Tensor e = x.unsqueeze(d + 1).expand(expanded);
  return (e.is_contiguous() ? e.clone() : e.contiguous()).view(out);
}

namespace {
// The diagonal of x's (dim1, dim2) plane as a strided slice of the plane flattened last:
// x permuted to [others..., dim1, dim2] (contiguous) and viewed as [others..., n1 * n2], the
// diagonal's elements sit `n2 + 1` apart from `start`. Returns that flat view of `flat_of`
// (which must have x's permuted contiguous layout).
struct DiagonalPlan {
  Shape perm;      // others..., dim1, dim2
  Shape flat;      // others..., n1 * n2
  int64_t start;   // first element in the flattened plane
  int64_t length;  // diagonal length
  int64_t step;    // n2 + 1
};
DiagonalPlan diagonal_plan(IntSpan shape, int64_t offset, int64_t dim1, int64_t dim2) {
  const detail::DiagonalDims dd = detail::diagonal_dims(shape, offset, dim1, dim2);
  DiagonalPlan p;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d != dd.dim1 && d != dd.dim2) {
      p.perm.push_back(d);
      p.flat.push_back(shape[d]);
    }
  }
  p.perm.insert(p.perm.end(), {dd.dim1, dd.dim2});
  const int64_t n1 = shape[dd.dim1], n2 = shape[dd.dim2];
  p.flat.push_back(n1 * n2);
  p.start = offset >= 0 ? offset : -offset * n2;
  p.length = dd.length;
  p.step = n2 + 1;
  return p;
}
Tensor diagonal_of(const Tensor& flat, const DiagonalPlan& p) {
  const int64_t last = flat.dim() - 1;
  if (p.length == 0) return flat.narrow(last, 0, 0);
  return flat.slice(last, p.start, p.start + (p.length - 1) * p.step + 1, p.step);
}
}  // namespace

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const DiagonalPlan p = diagonal_plan(x.sizes(), offset, dim1, dim2);
  return diagonal_of(x.permute(p.perm).contiguous().view(p.flat), p).contiguous();
}

Tensor diagonal_backward(const Tensor& grad, IntSpan input_shape, int64_t offset, int64_t dim1,
                         int64_t dim2) {
  const DiagonalPlan p = diagonal_plan(input_shape, offset, dim1, dim2);
  Shape permuted;
  for (int64_t d : p.perm) permuted.push_back(input_shape[d]);
  Tensor plane = zeros(permuted, TensorOptions(grad.dtype(), grad.device()));
  diagonal_of(plane.view(p.flat), p).copy_(grad);
  // Back from [others..., dim1, dim2] to the input's dim order.
  Shape inverse(p.perm.size());
  for (size_t i = 0; i < p.perm.size(); ++i) inverse[p.perm[i]] = static_cast<int64_t>(i);
  return plane.permute(inverse).contiguous();
}

namespace {
// Keeps (i, j) of the last two dims where j - i <= k (lower) or >= k (upper).
Tensor triangle(std::string_view op, const Tensor& x, int64_t k, bool lower) {
  detail::check_triangle_input(op, x.sizes());
  const int64_t rows = x.size(x.dim() - 2), cols = x.size(x.dim() - 1);
  const TensorOptions idx(kInt64, x.device());
  const Tensor diff = arange(cols, idx).view({1, cols}) - arange(rows, idx).view({rows, 1});
  const Tensor keep = lower ? le(diff, Scalar(k)) : ge(diff, Scalar(k));
  return where(keep, x, zeros({}, TensorOptions(x.dtype(), x.device())));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  return triangle("tril", x, diagonal, true);
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  return triangle("triu", x, diagonal, false);
}

Tensor movedim(const Tensor& x, IntSpan source, IntSpan destination) {
  return x.permute(detail::movedim_permutation(source, destination, x.dim()));
}

Tensor unflatten(const Tensor& x, int64_t dim, IntSpan sizes) {
  return x.view(detail::unflatten_shape(x.sizes(), dim, sizes));
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(x.select(d, i));
  return out;
}

}  // namespace dtensor
