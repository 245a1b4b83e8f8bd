// Advanced indexing on local tensors: the shape plan, the linear index (built with elementwise
// ops, so it runs on the tensors' device), the CPU kernels and the blocks that switch between
// them and the CUDA ones (the public Tensor forms are in advanced_index.cc).
//
// Worked example: x of shape [4, 5, 6, 7] indexed by {std::nullopt, i, std::nullopt, j} with i
// and j broadcasting to B = [2, 3]. The indexed dims 1 and 3 are separated, so the result is
// [2, 3, 4, 6] and x is permuted to [5, 7, 4, 6] (indexed dims first): p = 1, m = 35, q = 24,
// lin = i * 7 + j (wrapped), n = 6, and result[b][c] = x_perm.view(35, 24)[lin[b]][c].
#include <absl/strings/str_format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/advanced_index/detail/advanced_index.h"
#include "dtensor/ops/advanced_index/detail/advanced_index_cuda.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {

AdvancedIndexPlan advanced_index_plan(const char* op, IntSpan self_shape, IntSpan dims,
                                      absl::Span<const Shape> index_shapes) {
  const int64_t ndim = static_cast<int64_t>(self_shape.size());
  const int64_t k = static_cast<int64_t>(dims.size());
  DT_CHECK(k >= 1 && static_cast<int64_t>(index_shapes.size()) == k,
           "[%s] expected one index tensor per indexed dim, got %d dims and %d tensors", op, k,
           index_shapes.size());
  AdvancedIndexPlan plan;
  plan.dims.assign(dims.begin(), dims.end());
  for (int64_t j = 0; j < k; ++j) {
    DT_CHECK(dims[j] >= 0 && dims[j] < ndim && (j == 0 || dims[j] > dims[j - 1]),
             "[%s] indexed dims %s must be increasing dims of a %d-d tensor", op, shape_str(dims),
             ndim);
  }
  // B: NumPy broadcasting of the index shapes, aligned on the right.
  for (int64_t j = 0; j < k; ++j) {
    const Shape& s = index_shapes[j];
    if (s.size() > plan.broadcast.size()) {
      plan.broadcast.insert(plan.broadcast.begin(), s.size() - plan.broadcast.size(), 1);
    }
    const size_t lead = plan.broadcast.size() - s.size();
    for (size_t a = 0; a < s.size(); ++a) {
      int64_t& b = plan.broadcast[lead + a];
      DT_CHECK(b == s[a] || b == 1 || s[a] == 1,
               "[%s] indices[%d] of shape %s cannot be broadcast with the other indices (shape "
               "%s so far)",
               op, dims[j], shape_str(s), shape_str(plan.broadcast));
      if (b == 1) b = s[a];
    }
  }
  plan.adjacent = dims.back() - dims.front() == k - 1;
  Shape pre, post;  // self dims before / after the indexed block (in the result's order)
  for (int64_t d = 0; d < ndim; ++d) {
    const bool indexed = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (indexed) continue;
    (plan.adjacent && d < dims.front() ? pre : post).push_back(d);
  }
  plan.perm = pre;
  plan.perm.insert(plan.perm.end(), dims.begin(), dims.end());
  plan.perm.insert(plan.perm.end(), post.begin(), post.end());
  plan.out_first = static_cast<int64_t>(pre.size());
  plan.out_dim_of_self.assign(ndim, -1);
  Shape pre_sizes, post_sizes, indexed_sizes;
  for (size_t i = 0; i < pre.size(); ++i) {
    pre_sizes.push_back(self_shape[pre[i]]);
    plan.out_dim_of_self[pre[i]] = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < post.size(); ++i) {
    post_sizes.push_back(self_shape[post[i]]);
    plan.out_dim_of_self[post[i]] =
        plan.out_first + static_cast<int64_t>(plan.broadcast.size() + i);
  }
  for (int64_t d : dims) indexed_sizes.push_back(self_shape[d]);
  plan.p = shape_numel(pre_sizes, op);
  plan.m = shape_numel(indexed_sizes, op);
  plan.q = shape_numel(post_sizes, op);
  plan.out = pre_sizes;
  plan.out.insert(plan.out.end(), plan.broadcast.begin(), plan.broadcast.end());
  plan.out.insert(plan.out.end(), post_sizes.begin(), post_sizes.end());
  shape_numel(plan.out, op);  // overflow check
  return plan;
}

std::string index_range_error(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  const Tensor idx = index.to(Device(kCPU), kInt64).contiguous();
  const int64_t* v = idx.numel() > 0 ? idx.data<int64_t>() : nullptr;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    if (v[i] < -size || v[i] >= size) {
      return absl::StrFormat("[%s] index %d out of range for dim %d of size %d (indices[%d])", op,
                             v[i], dim, size, dim);
    }
  }
  return "";
}

std::string index_dtype_error(const char* op, DType dtype, int64_t dim) {
  if (dtype == kInt64 || dtype == kInt32) return "";
  return absl::StrFormat("[%s] argument indices[%d] has dtype %s, expected int64 or int32%s", op,
                         dim, dtype_name(dtype),
                         dtype == kBool ? " (boolean mask indexing is not supported)" : "");
}

// The plan of a call on the local tensors.
AdvancedIndexPlan local_index_plan(const char* op, const Tensor& self, IntSpan dims,
                                   absl::Span<const Tensor> indices) {
  std::vector<Shape> shapes;
  for (const Tensor& t : indices) shapes.emplace_back(t.sizes().begin(), t.sizes().end());
  return advanced_index_plan(op, self.sizes(), dims, shapes);
}

}  // namespace detail

namespace {

using detail::AdvancedIndexPlan;

// The linear index into self's [p, m, q] view: n int64 entries, sum_j (wrapped index_j -
// offsets[j]) * (product of the local sizes of the indexed dims after j), or -1 where an index
// falls outside this block of self.
Tensor linear_index(const AdvancedIndexPlan& plan, const Tensor& self,
                    absl::Span<const Tensor> indices, IntSpan sizes, IntSpan offsets) {
  const int64_t k = static_cast<int64_t>(plan.dims.size());
  Tensor lin, inside;
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    const int64_t local = self.size(plan.dims[j]);
    Tensor r = indices[j].to(kInt64);
    r = where(lt(r, Scalar(int64_t{0})), r + Scalar(sizes[j]), r);
    if (offsets[j] != 0 || local != sizes[j]) {
      if (offsets[j] != 0) r = r - Scalar(offsets[j]);
      const Tensor in = logical_and(ge(r, Scalar(int64_t{0})), lt(r, Scalar(local)));
      inside = inside.defined() ? logical_and(inside, in) : in;
    }
    const Tensor term = stride == 1 ? r : r * Scalar(stride);
    lin = lin.defined() ? lin + term : term;
    stride *= local;
  }
  if (inside.defined()) {
    lin = where(inside, lin, full({}, Scalar(int64_t{-1}), TensorOptions(kInt64, lin.device())));
  }
  return lin.expand(plan.broadcast).contiguous().reshape({shape_numel(plan.broadcast)});
}

void index_gather_cpu(const Tensor& x, const Tensor& lin, const Tensor& out, int64_t p, int64_t m,
                      int64_t q) {
  const int64_t n = lin.numel();
  const int64_t* l = lin.data<int64_t>();
  const size_t row = static_cast<size_t>(q) * x.itemsize();
  const auto* src = static_cast<const char*>(x.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t a = 0; a < p; ++a) {
    for (int64_t i = 0; i < n; ++i) {
      char* to = dst + static_cast<size_t>(a * n + i) * row;
      if (l[i] < 0) {
        std::memset(to, 0, row);  // all-zero bits: 0 in every dtype
      } else {
        std::memcpy(to, src + static_cast<size_t>(a * m + l[i]) * row, row);
      }
    }
  }
}

// Writes (or adds) values [p, n, q] into out [p, m, q] at lin, in row-major order of (a, i): a
// slot named twice keeps the last write; integer sums wrap.
void index_put_cpu(const Tensor& out, const Tensor& lin, const Tensor& values, bool accumulate,
                   int64_t p, int64_t m, int64_t q) {
  const int64_t n = lin.numel();
  const int64_t* l = lin.data<int64_t>();
  if (!accumulate) {
    const size_t row = static_cast<size_t>(q) * out.itemsize();
    auto* dst = static_cast<char*>(out.data_ptr());
    const auto* src = static_cast<const char*>(values.data_ptr());
    for (int64_t a = 0; a < p; ++a) {
      for (int64_t i = 0; i < n; ++i) {
        if (l[i] < 0) continue;
        std::memcpy(dst + static_cast<size_t>(a * m + l[i]) * row,
                    src + static_cast<size_t>(a * n + i) * row, row);
      }
    }
    return;
  }
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    T* o = static_cast<T*>(out.data_ptr());
    const T* v = static_cast<const T*>(values.data_ptr());
    for (int64_t a = 0; a < p; ++a) {
      for (int64_t i = 0; i < n; ++i) {
        if (l[i] < 0) continue;
        T* to = o + (a * m + l[i]) * q;
        const T* from = v + (a * n + i) * q;
        for (int64_t b = 0; b < q; ++b) {
          if constexpr (std::is_same_v<T, bool>) {
            to[b] = to[b] || from[b];
          } else if constexpr (std::is_integral_v<T>) {
            // Integers wrap on overflow (as CUDA's atomicAdd), without signed-overflow UB.
            using U = std::make_unsigned_t<T>;
            to[b] = static_cast<T>(static_cast<U>(static_cast<U>(to[b]) + static_cast<U>(from[b])));
          } else {
            to[b] = static_cast<T>(static_cast<C>(to[b]) + static_cast<C>(from[b]));
          }
        }
      }
    }
  });
}

}  // namespace

namespace detail {

Tensor index_block(const Tensor& self, IntSpan dims, absl::Span<const Tensor> indices,
                   IntSpan sizes, IntSpan offsets) {
  const AdvancedIndexPlan plan = detail::local_index_plan("index", self, dims, indices);
  const Tensor x = (plan.adjacent ? self : self.permute(plan.perm)).contiguous();
  Tensor out = empty(plan.out, TensorOptions(self.dtype(), self.device()));
  if (out.numel() == 0) return out;
  const Tensor lin = linear_index(plan, self, indices, sizes, offsets);
  if (self.device().is_cuda()) {
    index_gather_cuda(x, lin, out, plan.p, plan.m, plan.q);
  } else {
    index_gather_cpu(x, lin, out, plan.p, plan.m, plan.q);
  }
  return out;
}

Tensor index_put_block(const Tensor& self, IntSpan dims, absl::Span<const Tensor> indices,
                       const Tensor& values, bool accumulate, IntSpan sizes, IntSpan offsets) {
  const AdvancedIndexPlan plan = detail::local_index_plan("index_put", self, dims, indices);
  DT_CHECK(values.defined(), "[index_put] argument values is an undefined tensor");
  DT_CHECK(values.dtype() == self.dtype(),
           "[index_put] argument values has dtype %s, expected self's dtype %s",
           dtype_name(values.dtype()), dtype_name(self.dtype()));
  DT_CHECK(values.device() == self.device(),
           "[index_put] expected self and values on one device, got %s and %s", self.device().str(),
           values.device().str());
  bool fits = values.dim() <= static_cast<int64_t>(plan.out.size());
  for (int64_t a = 0; fits && a < values.dim(); ++a) {
    const int64_t v = values.size(values.dim() - 1 - a);
    fits = v == 1 || v == plan.out[plan.out.size() - 1 - a];
  }
  DT_CHECK(fits,
           "[index_put] argument values has shape %s, expected a shape that broadcasts to "
           "the indexed shape %s",
           shape_str(values.sizes()), shape_str(plan.out));
  // 16-bit sums accumulate in float (many entries may land on one slot), then round once.
  const bool low = accumulate && (self.dtype() == kFloat16 || self.dtype() == kBFloat16);
  const Tensor base = plan.adjacent ? self : self.permute(plan.perm);
  Tensor x = low ? base.to(kFloat32).contiguous() : base.clone();
  const int64_t n = shape_numel(plan.broadcast);
  if (n > 0 && x.numel() > 0) {
    const Tensor lin = linear_index(plan, self, indices, sizes, offsets);
    const Tensor v = (low ? values.to(kFloat32) : values)
                         .expand(plan.out)
                         .contiguous()
                         .reshape({plan.p, n, plan.q});
    if (self.device().is_cuda()) {
      index_put_cuda(x, lin, v, accumulate, plan.p, plan.m, plan.q);
    } else {
      index_put_cpu(x, lin, v, accumulate, plan.p, plan.m, plan.q);
    }
  }
  if (!plan.adjacent) {
    Shape inverse(plan.perm.size());
    for (size_t i = 0; i < plan.perm.size(); ++i) inverse[plan.perm[i]] = static_cast<int64_t>(i);
    x = x.permute(inverse).contiguous();
  }
  return low ? x.to(self.dtype()) : x;
}

}  // namespace detail

}  // namespace dtensor
