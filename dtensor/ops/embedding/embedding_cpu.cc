// CPU embedding lookup: a row copy per index (the checks and the device switch are in
// embedding.cc).
#include "dtensor/ops/embedding/detail/embedding_cpu.h"

#include <cstring>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

Tensor embedding_cpu(const Tensor& indices, const Tensor& weight, int64_t row_offset, bool masked,
                     const char* op) {
  const int64_t rows = weight.size(0), dim = weight.size(1);
  Shape out_shape = indices.sizes();
  out_shape.push_back(dim);
  Tensor out = empty(out_shape, TensorOptions(weight.dtype()));
  if (out.numel() == 0 && indices.numel() == 0) return out;
  const Tensor idx = indices.to(kInt64).contiguous();
  const Tensor w = weight.contiguous();
  const int64_t* ip = idx.data<int64_t>();
  const auto* wp = static_cast<const char*>(w.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const size_t row_bytes = static_cast<size_t>(dim) * weight.itemsize();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t r = ip[i] - row_offset;
    const bool inside = r >= 0 && r < rows;
    if (!masked) {
      DT_CHECK(inside, "[%s] index %d out of range for a table of %d rows", op, ip[i], rows);
    }
    if (row_bytes == 0) continue;
    if (inside) {
      std::memcpy(dst + i * row_bytes, wp + r * row_bytes, row_bytes);
    } else {
      std::memset(dst + i * row_bytes, 0, row_bytes);  // all-zero bits are 0.0 in every dtype
    }
  }
  return out;
}

}  // namespace dtensor::detail
