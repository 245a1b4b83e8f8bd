#include "dtensor/tensor/tensor.h"

#include <cstring>

#include "dtensor/tensor/convert.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/copy_cuda.h"
#include "dtensor/tensor/detail/copy_kernel.h"

namespace dtensor {

namespace {

void check_defined(const Tensor& t, const char* op) {
  DT_CHECK(t.defined(), "[%s] the tensor is undefined (default-constructed)", op);
}

// [first, last] element offsets (into the storage) that a non-empty view can touch.
struct Extent {
  int64_t first;
  int64_t last;
};
Extent extent_of(const Tensor& t) {
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
  return {t.storage_offset(), last};
}

}  // namespace

bool memory_overlaps(const Tensor& a, const Tensor& b) {
  if (!a.storage().is_same(b.storage()) || a.numel() == 0 || b.numel() == 0) return false;
  const size_t ia = a.itemsize();
  const size_t ib = b.itemsize();
  const Extent ea = extent_of(a);
  const Extent eb = extent_of(b);
  const int64_t a0 = ea.first * static_cast<int64_t>(ia);
  const int64_t a1 = (ea.last + 1) * static_cast<int64_t>(ia);
  const int64_t b0 = eb.first * static_cast<int64_t>(ib);
  const int64_t b1 = (eb.last + 1) * static_cast<int64_t>(ib);
  return a0 < b1 && b0 < a1;
}

Tensor::Tensor(Storage storage, DType dtype, Shape sizes, Shape strides, int64_t storage_offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(storage_offset) {
  DT_CHECK(storage_.defined(), "[Tensor] storage is undefined");
  DT_CHECK(sizes_.size() == strides_.size(),
           "[Tensor] sizes %s and strides %s have different lengths", shape_str(sizes_),
           shape_str(strides_));
  // One branch-free pass with checked arithmetic (this constructor runs for every view and
  // output): no negative size, stride or offset; the element count, its bytes and the offset of
  // the last element fit int64 (so nbytes() cannot wrap). Anything unusual (an error, or a zero
  // size after a partial product overflowed) goes to the slow path for the exact answer.
  const int64_t item = static_cast<int64_t>(dtype_size(dtype_));
  int64_t numel = 1;
  int64_t last = offset_;
  bool unusual = offset_ < 0;
  for (size_t d = 0; d < sizes_.size(); ++d) {
    const int64_t size = sizes_[d];
    const int64_t stride = strides_[d];
    int64_t span = 0;
    unusual |= (size < 0) | (stride < 0);
    unusual |= __builtin_mul_overflow(numel, size, &numel);
    unusual |= __builtin_mul_overflow(size > 0 ? size - 1 : 0, stride, &span);
    unusual |= __builtin_add_overflow(last, span, &last);
  }
  int64_t bytes = 0;
  unusual |= __builtin_mul_overflow(numel, item, &bytes);
  if (unusual) [[unlikely]]
    numel = checked_geometry();
  numel_ = numel;
  int64_t end = 0;
  int64_t needed = 0;
  DT_CHECK(numel_ == 0 || (!__builtin_add_overflow(last, 1, &end) &&
                           !__builtin_mul_overflow(end, item, &needed) &&
                           static_cast<uint64_t>(needed) <= storage_.nbytes()),
           "[Tensor] sizes %s, strides %s and offset %d reach past the storage's %d bytes",
           shape_str(sizes_), shape_str(strides_), offset_, storage_.nbytes());
}

int64_t Tensor::checked_geometry() const {
  DT_CHECK(offset_ >= 0, "[Tensor] storage_offset %d is negative (expected >= 0)", offset_);
  for (size_t d = 0; d < sizes_.size(); ++d) {
    DT_CHECK(sizes_[d] >= 0, "[Tensor] size %d at dim %d is negative (sizes %s)", sizes_[d],
             static_cast<int64_t>(d), shape_str(sizes_));
  }
  check_strides(sizes_, strides_, "Tensor");  // negative strides, offsets beyond int64
  int64_t last = 0;
  for (size_t d = 0; d < sizes_.size(); ++d) {
    if (sizes_[d] > 0) last += (sizes_[d] - 1) * strides_[d];  // fits: checked just above
  }
  DT_CHECK(!__builtin_add_overflow(last, offset_, &last),
           "[Tensor] sizes %s, strides %s and offset %d reach past offset 2^63 - 1",
           shape_str(sizes_), shape_str(strides_), offset_);
  shape_nbytes(sizes_, dtype_size(dtype_), "Tensor");  // the count and its bytes
  return shape_numel(sizes_, "Tensor");  // 0 when a size is 0 (a partial product overflowed)
}

int64_t Tensor::size(int64_t dim) const {
  DT_CHECK(!sizes_.empty(), "[Tensor::size] dim %d requested of a 0-d tensor (it has no dims)",
           dim);
  return sizes_[normalize_dim(dim, this->dim(), "Tensor::size")];
}

int64_t Tensor::stride(int64_t dim) const {
  DT_CHECK(!sizes_.empty(), "[Tensor::stride] dim %d requested of a 0-d tensor (it has no dims)",
           dim);
  return strides_[normalize_dim(dim, this->dim(), "Tensor::stride")];
}

bool Tensor::is_contiguous() const {
  if (numel_ == 0) return true;
  int64_t expected = 1;
  for (size_t d = sizes_.size(); d-- > 0;) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

void* Tensor::data_ptr() const {
  char* data = static_cast<char*>(storage_.data());  // null when undefined, meta or released
  if (data == nullptr) return nullptr;
  return data + offset_ * static_cast<int64_t>(itemsize());
}

// ---- copies --------------------------------------------------------------------------------

Tensor Tensor::contiguous() const {
  check_defined(*this, "Tensor::contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  check_defined(*this, "Tensor::clone");
  Tensor out = empty(sizes_, TensorOptions(dtype_, device()));
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device) const {
  return to(device, dtype_);
}
Tensor Tensor::to(DType dtype) const {
  return to(device(), dtype);
}

Tensor Tensor::to(Device device, DType dtype) const {
  check_defined(*this, "Tensor::to");
  if (device == this->device() && dtype == dtype_) return *this;
  Tensor out = empty(sizes_, TensorOptions(dtype, device));
  out.copy_(*this);
  return out;
}

Tensor& Tensor::copy_(const Tensor& src_in) {
  check_defined(*this, "copy_");
  DT_CHECK(src_in.defined(), "[copy_] src is undefined");
  check_no_internal_overlap(*this, "copy_");
  Tensor src = src_in;
  if (src.sizes() != sizes_) {
    DT_CHECK(src.dim() <= dim(),
             "[copy_] src of shape %s cannot be broadcast to the destination shape %s",
             shape_str(src.sizes()), shape_str(sizes_));
    for (int64_t i = 0; i < src.dim(); ++i) {
      const int64_t s = src.sizes()[src.dim() - 1 - i];
      const int64_t d = sizes_[dim() - 1 - i];
      DT_CHECK(s == d || s == 1,
               "[copy_] src of shape %s cannot be broadcast to the destination shape %s",
               shape_str(src.sizes()), shape_str(sizes_));
    }
    src = src.expand(sizes_);
  }
  DT_CHECK(device().is_meta() || !src.device().is_meta(),
           "[copy_] [meta] src of shape %s has no data (cannot copy out of a meta tensor into "
           "%s)",
           shape_str(src.sizes()), device().str());
  // An in-place write (autograd refuses a saved tensor written since), counted once the
  // arguments are accepted (a refused copy_ writes nothing) and on meta tensors too, so a dry
  // run refuses what the real run would.
  storage_.bump_version();
  if (device().is_meta()) return *this;  // shapes checked; there is nothing to write
  if (numel_ == 0) return *this;
  if (memory_overlaps(*this, src)) src = src.clone();

  const Device dd = device();
  const Device sd = src.device();
  if (dd.is_cpu() && sd.is_cpu()) {
    detail::copy_cpu(*this, src);
    return *this;
  }
  // At least one side is on a CUDA device: same-device copies run the CUDA copy kernel;
  // cross-device copies move contiguous bytes and convert/scatter on the side that has the
  // strided layout.
  if (dtype_ == src.dtype() && is_contiguous() && src.is_contiguous()) {
    detail::cuda_memcpy(data_ptr(), dd, src.data_ptr(), sd, nbytes());
    return *this;
  }
  if (dd == sd) {
    detail::copy_cuda(*this, src);
    return *this;
  }
  if (dd.is_cuda()) {
    // Bring src to dd as is: the span of storage it covers (so an expanded scalar stays one
    // element) when it comes from the host, a contiguous copy when from another GPU.
    Tensor staged;
    if (sd.is_cpu()) {
      const Extent e = extent_of(src);
      const size_t nb = static_cast<size_t>(e.last - e.first + 1) * src.itemsize();
      Storage dev = Storage::allocate(nb, dd);
      detail::cuda_memcpy(dev.data(), dd, src.data_ptr(), sd, nb);
      staged = Tensor(dev, src.dtype(), src.sizes(), src.strides(), 0);
    } else {
      const Tensor sc = src.contiguous();
      staged = empty(sizes_, TensorOptions(src.dtype(), dd));
      detail::cuda_memcpy(staged.data_ptr(), dd, sc.data_ptr(), sd, sc.nbytes());
    }
    detail::copy_cuda(*this, staged);
    return *this;
  }
  // CUDA -> CPU: convert and gather on the device into a contiguous tensor of dst's dtype,
  // move it, then scatter on the host when dst is strided.
  Tensor dev_tmp = empty(sizes_, TensorOptions(dtype_, sd));
  detail::copy_cuda(dev_tmp, src);
  if (is_contiguous()) {
    detail::cuda_memcpy(data_ptr(), dd, dev_tmp.data_ptr(), sd, nbytes());
    return *this;
  }
  Tensor host_tmp = empty(sizes_, TensorOptions(dtype_));
  detail::cuda_memcpy(host_tmp.data_ptr(), Device(), dev_tmp.data_ptr(), sd, nbytes());
  detail::copy_cpu(*this, host_tmp);
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  check_defined(*this, "fill_");
  check_scalar_fits(value, dtype_, "fill_");
  check_no_internal_overlap(*this, "fill_");
  if (device().is_meta()) {
    storage_.bump_version();  // a write (as copy_ counts it on meta tensors)
    return *this;
  }
  if (device().is_cuda() && itemsize() <= 8) {
    // The value as a kernel argument: no host-to-device copy (which a CUDA-graph capture of a
    // compiled step could not record). The same bytes copy_ would write.
    uint64_t bits = 0;
    dispatch_dtype(dtype_, [&]<typename T>() {
      const T v = value.to<T>();
      std::memcpy(&bits, &v, sizeof(T));
    });
    storage_.bump_version();
    detail::fill_cuda(*this, bits);
    return *this;
  }
  Tensor s = empty({}, TensorOptions(dtype_));
  dispatch_dtype(dtype_, [&]<typename T>() { *static_cast<T*>(s.data_ptr()) = value.to<T>(); });
  return copy_(s);
}

Tensor& Tensor::zero_() {
  return fill_(Scalar(0));
}

void check_no_internal_overlap(const Tensor& t, std::string_view op) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    DT_CHECK(t.strides()[d] != 0 || t.sizes()[d] <= 1,
             "[%s] unsupported operation: more than one element of the written-to tensor refers "
             "to a single memory location (shape %s, strides %s: dim %d has stride 0, as "
             "expand() makes). Please clone() the tensor before performing the operation.",
             op, shape_str(t.sizes()), shape_str(t.strides()), d);
  }
}

void check_scalar_fits(const Scalar& value, DType dtype, std::string_view op) {
  DT_CHECK(scalar_fits(value, dtype),
           "[%s] value %s cannot be converted to type %s without overflow", op, value.str(),
           dtype_name(dtype));
}

// ---- element access ------------------------------------------------------------------------

namespace {
void check_has_data(const Tensor& t, std::string_view op) {
  DT_CHECK(!t.device().is_meta(), "[%s] [meta] tensor of shape %s has no data", op,
           shape_str(t.sizes()));
}
}  // namespace

template <typename T>
T Tensor::item() const {
  check_defined(*this, "Tensor::item");
  check_has_data(*this, "Tensor::item");
  DT_CHECK(numel_ == 1, "[Tensor::item] needs a tensor with one element, got shape %s",
           shape_str(sizes_));
  Shape zero(sizes_.size(), 0);
  return at<T>(zero);
}

template <typename T>
T Tensor::at(IntSpan index) const {
  check_defined(*this, "Tensor::at");
  check_has_data(*this, "Tensor::at");
  DT_CHECK(static_cast<int64_t>(index.size()) == dim(),
           "[Tensor::at] index %s has %d entries but the tensor is %d-d", shape_str(index),
           static_cast<int64_t>(index.size()), dim());
  int64_t off = 0;
  for (int64_t d = 0; d < dim(); ++d) {
    int64_t i = index[d];
    DT_CHECK(i >= -sizes_[d] && i < sizes_[d],
             "[Tensor::at] index %d out of range for dim %d of size %d (shape %s)", i, d, sizes_[d],
             shape_str(sizes_));
    if (i < 0) i += sizes_[d];
    off += i * strides_[d];
  }
  alignas(8) char buf[8];
  const size_t isz = itemsize();
  const char* p = static_cast<const char*>(data_ptr()) + off * static_cast<int64_t>(isz);
  detail::cuda_memcpy(buf, Device(), p, device(), isz);
  return dispatch_dtype(dtype_, [&]<typename S>() -> T {
    S v;
    std::memcpy(&v, buf, sizeof(S));
    return detail::convert<T>(v);
  });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  check_defined(*this, "Tensor::to_vector");
  check_has_data(*this, "Tensor::to_vector");
  Tensor c = to(Device(), dtype_of_v<T>).contiguous();
  const T* p = static_cast<const T*>(c.data_ptr());
  return std::vector<T>(p, p + numel_);
}

#define DT_INSTANTIATE_ELEMENT_ACCESS(T)   \
  template T Tensor::item<T>() const;      \
  template T Tensor::at<T>(IntSpan) const; \
  template std::vector<T> Tensor::to_vector<T>() const;
DT_INSTANTIATE_ELEMENT_ACCESS(float)
DT_INSTANTIATE_ELEMENT_ACCESS(double)
DT_INSTANTIATE_ELEMENT_ACCESS(Half)
DT_INSTANTIATE_ELEMENT_ACCESS(BFloat16)
DT_INSTANTIATE_ELEMENT_ACCESS(int32_t)
DT_INSTANTIATE_ELEMENT_ACCESS(int64_t)
DT_INSTANTIATE_ELEMENT_ACCESS(bool)
#undef DT_INSTANTIATE_ELEMENT_ACCESS

}  // namespace dtensor
