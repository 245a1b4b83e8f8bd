#include <algorithm>
#include <optional>

#include "dtensor/tensor/tensor.h"

namespace dtensor {

namespace {

// Strides that let (sizes, strides) be viewed as `shape` without a copy, or nothing when the
// memory layout does not allow it (PyTorch's computeStride). Each run of old dims that is
// contiguous in memory may be regrouped freely into new dims of the same element count.
std::optional<Shape> view_strides(IntSpan sizes, IntSpan strides, IntSpan shape) {
  Shape out(shape.size());
  if (sizes.empty()) {  // 0-d: every new dim has size 1
    for (auto& s : out) s = 1;
    return out;
  }
  const int64_t numel = shape_numel(sizes);
  if (numel == 0) {
    if (sizes == shape) return Shape(strides.begin(), strides.end());
    return contiguous_strides(shape);
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    // End of a contiguous chunk of old dims: place new dims until they cover it.
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  DT_CHECK(defined(), "[narrow] the tensor is undefined");
  DT_CHECK(this->dim() > 0, "[narrow] cannot narrow a 0-d tensor");
  const int64_t d = normalize_dim(dim, this->dim(), "narrow");
  const int64_t n = sizes_[d];
  DT_CHECK(start >= -n && start <= n,
           "[narrow] start %d out of range for dim %d of size %d (expected %d..%d)", start, d, n,
           -n, n);
  if (start < 0) start += n;
  DT_CHECK(length >= 0 && start + length <= n,
           "[narrow] length %d at start %d does not fit dim %d of size %d (expected 0..%d)", length,
           start, d, n, n - start);
  Shape sizes = sizes_;
  sizes[d] = length;
  return Tensor(storage_, dtype_, std::move(sizes), strides_,
                offset_ + (length > 0 ? start * strides_[d] : 0));
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  DT_CHECK(defined(), "[slice] the tensor is undefined");
  DT_CHECK(this->dim() > 0, "[slice] cannot slice a 0-d tensor");
  DT_CHECK(step > 0, "[slice] step %d must be positive", step);
  const int64_t d = normalize_dim(dim, this->dim(), "slice");
  const int64_t n = sizes_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  const int64_t len = end == start ? 0 : (end - start - 1) / step + 1;  // no overflow for any step
  Shape sizes = sizes_;
  Shape strides = strides_;
  sizes[d] = len;
  // A step past the end of the dim is never taken: any stride works there (avoids overflow).
  if (len > 1) {
    DT_CHECK(detail::checked_mul(strides_[d], step, &strides[d]),
             "[slice] step %d times stride %d of dim %d overflows int64", step, strides_[d], d);
  }
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides),
                offset_ + (len > 0 ? start * strides_[d] : 0));
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  DT_CHECK(defined(), "[select] the tensor is undefined");
  DT_CHECK(this->dim() > 0, "[select] cannot select from a 0-d tensor");
  const int64_t d = normalize_dim(dim, this->dim(), "select");
  const int64_t n = sizes_[d];
  DT_CHECK(index >= -n && index < n,
           "[select] index %d out of range for dim %d of size %d (expected %d..%d)", index, d, n,
           -n, n - 1);
  if (index < 0) index += n;
  Shape sizes = sizes_;
  Shape strides = strides_;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides),
                offset_ + index * strides_[d]);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  DT_CHECK(defined(), "[transpose] the tensor is undefined");
  const int64_t a = normalize_dim(dim0, dim(), "transpose");
  const int64_t b = normalize_dim(dim1, dim(), "transpose");
  if (dim() == 0 || a == b) return *this;
  Shape sizes = sizes_;
  Shape strides = strides_;
  std::swap(sizes[a], sizes[b]);
  std::swap(strides[a], strides[b]);
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::permute(IntSpan dims) const {
  DT_CHECK(defined(), "[permute] the tensor is undefined");
  DT_CHECK(static_cast<int64_t>(dims.size()) == dim(),
           "[permute] dims %s has %d entries but the tensor is %d-d", shape_str(dims),
           static_cast<int64_t>(dims.size()), dim());
  Shape sizes(dims.size());
  Shape strides(dims.size());
  absl::InlinedVector<bool, 6> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], dim(), "permute");
    DT_CHECK(!seen[d], "[permute] dims %s repeats dim %d", shape_str(dims), d);
    seen[d] = true;
    sizes[i] = sizes_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::view(IntSpan shape) const {
  DT_CHECK(defined(), "[view] the tensor is undefined");
  Shape sizes = infer_view_shape(shape, numel_, sizes_, "view");
  std::optional<Shape> strides = view_strides(sizes_, strides_, sizes);
  DT_CHECK(strides.has_value(),
           "[view] cannot view a tensor of shape %s and strides %s as shape %s: incompatible "
           "strides (use reshape(), which copies)",
           shape_str(sizes_), shape_str(strides_), shape_str(sizes));
  return Tensor(storage_, dtype_, std::move(sizes), std::move(*strides), offset_);
}

Tensor Tensor::reshape(IntSpan shape) const {
  DT_CHECK(defined(), "[reshape] the tensor is undefined");
  Shape sizes = infer_view_shape(shape, numel_, sizes_, "reshape");
  std::optional<Shape> strides = view_strides(sizes_, strides_, sizes);
  if (strides.has_value()) {
    return Tensor(storage_, dtype_, std::move(sizes), std::move(*strides), offset_);
  }
  Tensor c = clone();
  return Tensor(c.storage_, dtype_, sizes, contiguous_strides(sizes), 0);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  DT_CHECK(defined(), "[unsqueeze] the tensor is undefined");
  const int64_t d = normalize_dim(dim, this->dim() + 1, "unsqueeze");
  Shape sizes = sizes_;
  Shape strides = strides_;
  const int64_t stride = d < this->dim() ? sizes_[d] * strides_[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::squeeze() const {
  DT_CHECK(defined(), "[squeeze] the tensor is undefined");
  Shape sizes;
  Shape strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes_[d] == 1) continue;
    sizes.push_back(sizes_[d]);
    strides.push_back(strides_[d]);
  }
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::squeeze(int64_t dim) const {
  DT_CHECK(defined(), "[squeeze] the tensor is undefined");
  const int64_t d = normalize_dim(dim, this->dim(), "squeeze");
  if (this->dim() == 0 || sizes_[d] != 1) return *this;
  Shape sizes = sizes_;
  Shape strides = strides_;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides), offset_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  DT_CHECK(defined(), "[flatten] the tensor is undefined");
  const int64_t s = normalize_dim(start_dim, dim(), "flatten");
  const int64_t e = normalize_dim(end_dim, dim(), "flatten");
  DT_CHECK(s <= e, "[flatten] start_dim %d comes after end_dim %d", start_dim, end_dim);
  if (dim() == 0) return reshape({1});
  if (s == e) return *this;
  Shape shape;
  for (int64_t d = 0; d < s; ++d) shape.push_back(sizes_[d]);
  const int64_t merged = shape_numel(IntSpan(sizes_).subspan(s, e - s + 1), "flatten");
  shape.push_back(merged);
  for (int64_t d = e + 1; d < dim(); ++d) shape.push_back(sizes_[d]);
  return reshape(shape);
}

Tensor Tensor::expand(IntSpan shape) const {
  DT_CHECK(defined(), "[expand] the tensor is undefined");
  const int64_t nd = static_cast<int64_t>(shape.size());
  DT_CHECK(nd >= dim(), "[expand] target shape %s has fewer dims than the tensor's shape %s",
           shape_str(shape), shape_str(sizes_));
  Shape sizes(nd);
  Shape strides(nd);
  const int64_t lead = nd - dim();
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t want = shape[i];
    if (i < lead) {
      DT_CHECK(want >= 0, "[expand] size %d at new leading dim %d of %s must be >= 0", want, i,
               shape_str(shape));
      sizes[i] = want;
      strides[i] = 0;
      continue;
    }
    const int64_t have = sizes_[i - lead];
    if (want == -1 || want == have) {
      sizes[i] = have;
      strides[i] = strides_[i - lead];
    } else {
      DT_CHECK(have == 1 && want >= 0,
               "[expand] cannot expand shape %s to %s: dim %d has size %d (only size-1 dims "
               "expand)",
               shape_str(sizes_), shape_str(shape), i, have);
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  return Tensor(storage_, dtype_, std::move(sizes), std::move(strides), offset_);
}

}  // namespace dtensor
