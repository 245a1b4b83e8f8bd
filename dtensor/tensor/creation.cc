#include "dtensor/tensor/creation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtensor {

namespace {

// Sizes >= 0 and a byte count that fits int64 (checked before anything is allocated); returns
// the byte count. One branch-free pass; the exact error (or a zero size after an overflowing
// partial product) is worked out only when something is unusual.
int64_t check_shape(IntSpan shape, const char* op, DType dtype) {
  int64_t numel = 1;
  bool unusual = false;
  for (int64_t s : shape) {
    unusual |= s < 0;
    unusual |= __builtin_mul_overflow(numel, s, &numel);
  }
  int64_t bytes = 0;
  unusual |= __builtin_mul_overflow(numel, static_cast<int64_t>(dtype_size(dtype)), &bytes);
  if (!unusual) [[likely]]
    return bytes;
  for (size_t i = 0; i < shape.size(); ++i) {
    DT_CHECK(shape[i] >= 0, "[%s] shape %s has a negative size %d at dim %d", op, shape_str(shape),
             shape[i], static_cast<int64_t>(i));
  }
  return shape_nbytes(shape, dtype_size(dtype), op);
}

}  // namespace

Tensor empty(IntSpan shape, TensorOptions opts) {
  const int64_t nbytes = check_shape(shape, "empty", opts.dtype);
  Storage s = Storage::allocate(static_cast<size_t>(nbytes), opts.device);
  return Tensor(std::move(s), opts.dtype, Shape(shape.begin(), shape.end()),
                contiguous_strides(shape), 0);
}

Tensor zeros(IntSpan shape, TensorOptions opts) {
  check_shape(shape, "zeros", opts.dtype);
  if (opts.device.is_cpu()) {
    Tensor t = empty(shape, opts);
    std::memset(t.data_ptr(), 0, t.nbytes());
    return t;
  }
  Tensor t = empty(shape, opts);
  t.zero_();
  return t;
}

Tensor ones(IntSpan shape, TensorOptions opts) {
  return full(shape, Scalar(1), opts);
}

Tensor full(IntSpan shape, const Scalar& value, TensorOptions opts) {
  check_shape(shape, "full", opts.dtype);
  check_scalar_fits(value, opts.dtype, "full");
  Tensor t = empty(shape, opts);
  t.fill_(value);
  return t;
}

Tensor empty_like(const Tensor& like) {
  DT_CHECK(like.defined(), "[empty_like] like is undefined");
  return empty(like.sizes(), TensorOptions(like.dtype(), like.device()));
}

Tensor zeros_like(const Tensor& like) {
  DT_CHECK(like.defined(), "[zeros_like] like is undefined");
  return zeros(like.sizes(), TensorOptions(like.dtype(), like.device()));
}

Tensor arange(int64_t end, TensorOptions opts) {
  return arange(0.0, static_cast<double>(end), 1.0, opts);
}

int64_t arange_numel(double start, double end, double step) {
  DT_CHECK(step != 0.0 && std::isfinite(step), "[arange] step %g must be finite and nonzero", step);
  DT_CHECK(std::isfinite(start) && std::isfinite(end),
           "[arange] start %g and end %g must be finite", start, end);
  const double span = std::ceil((end - start) / step);
  // Converting a double >= 2^63 to int64 is undefined behaviour: refuse before.
  DT_CHECK(span < 9.2233720368547758e18,
           "[arange] start %g, end %g and step %g give %g elements, more than int64 can count",
           start, end, step, span);
  return span > 0 ? static_cast<int64_t>(span) : 0;
}

Tensor arange_slice(double start, double step, int64_t first, int64_t count, TensorOptions opts) {
  DT_CHECK(first >= 0 && count >= 0, "[arange] slice [%d, %d + %d) must be non-negative", first,
           first, count);
  Tensor t = empty({count}, TensorOptions(opts.dtype));
  dispatch_dtype(opts.dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < count; ++i) {
      p[i] = Scalar(start + static_cast<double>(first + i) * step).to<T>();
    }
  });
  return opts.device.is_cpu() ? t : t.to(opts.device);
}

Tensor arange(double start, double end, double step, TensorOptions opts) {
  return arange_slice(start, step, 0, arange_numel(start, end, step), opts);
}

Tensor eye_block(int64_t rows, int64_t cols, int64_t row0, int64_t col0, TensorOptions opts) {
  DT_CHECK(rows >= 0 && cols >= 0 && row0 >= 0 && col0 >= 0,
           "[eye] block of %d x %d at (%d, %d) must have non-negative sizes and offsets", rows,
           cols, row0, col0);
  Tensor t = zeros({rows, cols}, TensorOptions(opts.dtype));
  dispatch_dtype(opts.dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    // Global diagonal (r, r) falls in the block at local (r - row0, r - col0).
    const int64_t lo = std::max(row0, col0), hi = std::min(row0 + rows, col0 + cols);
    for (int64_t r = lo; r < hi; ++r) p[(r - row0) * cols + (r - col0)] = Scalar(1).to<T>();
  });
  return opts.device.is_cpu() ? t : t.to(opts.device);
}

Tensor eye(int64_t n, int64_t m, TensorOptions opts) {
  DT_CHECK(n >= 0 && m >= -1, "[eye] n = %d and m = %d must be non-negative (m = -1: m = n)", n, m);
  return eye_block(n, m < 0 ? n : m, 0, 0, opts);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, IntSpan shape, Device device) {
  check_shape(shape, "from_vector", dtype_of_v<T>);
  DT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
           "[from_vector] %d values do not fill shape %s (expected %d)",
           static_cast<int64_t>(values.size()), shape_str(shape), shape_numel(shape));
  Tensor t = empty(shape, TensorOptions(dtype_of_v<T>));
  T* p = static_cast<T*>(t.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return device.is_cpu() ? t : t.to(device);
}

template Tensor from_vector<float>(const std::vector<float>&, IntSpan, Device);
template Tensor from_vector<double>(const std::vector<double>&, IntSpan, Device);
template Tensor from_vector<Half>(const std::vector<Half>&, IntSpan, Device);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, IntSpan, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, IntSpan, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, IntSpan, Device);
template Tensor from_vector<bool>(const std::vector<bool>&, IntSpan, Device);

Tensor from_blob(void* data, IntSpan shape, DType dtype, Device device) {
  const size_t nbytes = static_cast<size_t>(check_shape(shape, "from_blob", dtype));
  DT_CHECK(data != nullptr || nbytes == 0,
           "[from_blob] data is null for shape %s (expected a pointer to %d bytes)",
           shape_str(shape), nbytes);
  return Tensor(Storage::from_blob(data, nbytes, device), dtype, Shape(shape.begin(), shape.end()),
                contiguous_strides(shape), 0);
}

}  // namespace dtensor
