// The local dense tensor: a strided view (sizes, strides, offset in elements) into a Storage.
// Views share storage with their base; `contiguous()` and `clone()` copy. Semantics follow
// PyTorch (negative dims count from the end, 0-d tensors are scalars).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "dtensor/tensor/device.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/scalar.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/storage.h"

namespace dtensor {

// A local dense tensor: a strided view (sizes, strides, offset) of a shared Storage on one
// device. Copies share the storage; views (transpose, narrow, view, ...) do too.
class Tensor {
 public:
  // An undefined tensor (defined() == false); most methods throw on it.
  Tensor() = default;
  // A view of `storage` with the given geometry; checks that it fits the storage.
  Tensor(Storage storage, DType dtype, Shape sizes, Shape strides, int64_t storage_offset = 0);

  // ---- metadata ----------------------------------------------------------------------------
  // Metadata: whether defined, dtype, device, sizes (== shape), strides, rank, element count,
  // offset into the storage (elements), element and total byte sizes, contiguity, storage.
  bool defined() const { return storage_.defined(); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_.device(); }
  const Shape& sizes() const { return sizes_; }
  const Shape& shape() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t size(int64_t dim) const;    // negative dims allowed
  int64_t stride(int64_t dim) const;  // negative dims allowed
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }
  size_t itemsize() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * itemsize(); }
  bool is_contiguous() const;
  const Storage& storage() const { return storage_; }

  // Pointer to the first element (storage data + offset). Raw, any dtype. Null when the
  // storage has no memory (a meta tensor, a storage FSDP released).
  void* data_ptr() const;
  // Typed pointer; throws when T does not match dtype(), and on a meta tensor (a kernel that
  // reached one outside the dispatcher, which never runs kernels on meta inputs, is refused
  // instead of reading null).
  template <typename T>
  T* data() const {
    DT_CHECK(dtype_of_v<T> == dtype_, "[Tensor::data] requested %s but the tensor is %s",
             dtype_name(dtype_of_v<T>), dtype_name(dtype_));
    DT_CHECK(!device().is_meta(), "[Tensor::data] [meta] tensors have no data (shape %s)",
             shape_str(sizes_));
    return static_cast<T*>(data_ptr());
  }

  // ---- views (share storage) ---------------------------------------------------------------
  // Elements [start, start + length) along dim.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  // Python-style slice [start:end:step] along dim; start/end are clamped, step > 0.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  // Removes dim, taking index `index` (negative counts from the end).
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(IntSpan dims) const;
  // Same elements, new shape; one size may be -1. view() needs compatible strides and throws
  // otherwise; reshape() copies when a view is impossible.
  Tensor view(IntSpan shape) const;
  Tensor reshape(IntSpan shape) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;             // drops every size-1 dim
  Tensor squeeze(int64_t dim) const;  // drops dim if it has size 1
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // Broadcasts size-1 dims (stride 0) and prepends new dims; -1 keeps a size.
  Tensor expand(IntSpan shape) const;

  // ---- copies ------------------------------------------------------------------------------
  Tensor contiguous() const;  // returns *this when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  // A copy on another device / in another dtype (returns *this when already there).
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;  // no copy when both already match
  // Copies src into this tensor (broadcasting src, converting dtype and device). Into a meta
  // tensor it only checks the shapes (PyTorch's meta copy_); out of one into a tensor with
  // data it is refused ("[copy_] [meta] src has no data"). fill_ and zero_ on a meta tensor are
  // no-ops after their checks. Conversions
  // follow detail::convert (dtensor/tensor/convert.h): 16-bit floats via float, to bool: nonzero,
  // floating to integer: truncating and saturating (NaN -> 0). A src overlapping this tensor's
  // memory is read completely before anything is written. Like every in-place write, refused
  // when this tensor has expanded (stride-0) dims (check_no_internal_overlap).
  Tensor& copy_(const Tensor& src);
  // Refuses a value the dtype cannot hold (check_scalar_fits): NaN or inf into an integer
  // dtype, 1e10 into int32 or float16, as PyTorch does.
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();

  // ---- element access (tests, debugging; slow) ---------------------------------------------
  // All refuse a meta tensor: "[Tensor::item] [meta] tensor of shape [..] has no data".
  // The single element of a one-element tensor, converted to T.
  template <typename T>
  T item() const;
  // Element at a multi-index (negative entries count from the end), converted to T.
  template <typename T>
  T at(IntSpan index) const;
  // All elements in row-major order, converted to T (copies to the CPU when needed).
  template <typename T>
  std::vector<T> to_vector() const;

  std::string str() const;  // PyTorch-like printing

 private:
  // The constructor's slow path: throws the exact error for a bad geometry, or returns numel
  // when the geometry is valid after all (a zero size after an overflowing partial product).
  int64_t checked_geometry() const;

  Storage storage_;
  DType dtype_ = DType::kFloat32;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
};

// Prints the tensor (PyTorch-like layout, long dims summarised).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Before an in-place write into `t`: throws PyTorch's error "[op] unsupported operation: more
// than one element of the written-to tensor refers to a single memory location. Please clone()
// the tensor before performing the operation." when a dim of size > 1 has stride 0 (expand()),
// where the write would land on one element several times. Called by copy_, fill_, zero_ and
// the in-place ops (add_, mul_, ...).
void check_no_internal_overlap(const Tensor& t, std::string_view op);

// Whether some byte of a's elements is also one of b's (same storage, intersecting extents;
// conservative for interleaved strided views). copy_ reads an overlapping source from a copy.
bool memory_overlaps(const Tensor& a, const Tensor& b);

// Throws "[op] value nan cannot be converted to type int32 without overflow" when
// scalar_fits(value, dtype) is false (dtensor/tensor/scalar.h).
void check_scalar_fits(const Scalar& value, DType dtype, std::string_view op);

}  // namespace dtensor
