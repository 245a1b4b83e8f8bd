#include <cstring>

#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/embedding/embedding_cuda.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {
namespace {

Tensor embedding_impl(const Tensor& indices, const Tensor& weight, int64_t row_offset, bool masked,
                      const char* op) {
  DT_CHECK(indices.defined() && weight.defined(), "[%s] expected defined tensors", op);
  DT_CHECK(indices.dtype() == kInt32 || indices.dtype() == kInt64,
           "[%s] expected int32 or int64 indices, got %s", op, dtype_name(indices.dtype()));
  DT_CHECK(weight.dim() == 2, "[%s] expected a 2-d weight [num, dim], got shape %s", op,
           shape_str(weight.sizes()));
  DT_CHECK(indices.device() == weight.device(),
           "[%s] expected indices and weight on the same device, got %s and %s", op,
           indices.device().str(), weight.device().str());
  if (weight.device().is_cuda()) {
    return detail::embedding_cuda(indices, weight, row_offset, masked, op);
  }
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

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  return embedding_impl(indices, weight, 0, false, "embedding");
}

Tensor embedding_masked(const Tensor& indices, const Tensor& weight_shard, int64_t row_offset) {
  return embedding_impl(indices, weight_shard, row_offset, true, "embedding_masked");
}

}  // namespace dtensor
