// embedding on local tensors: the argument checks and the CPU / CUDA switch (kernels in
// embedding_cpu.cc and embedding_cuda.cu).
#include "dtensor/ops/embedding/embedding.h"

#include "dtensor/ops/embedding/detail/embedding_cpu.h"
#include "dtensor/ops/embedding/detail/embedding_cuda.h"
#include "dtensor/tensor/error.h"
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
  return detail::embedding_cpu(indices, weight, row_offset, masked, op);
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  return embedding_impl(indices, weight, 0, false, "embedding");
}

Tensor embedding_masked(const Tensor& indices, const Tensor& weight_shard, int64_t row_offset) {
  return embedding_impl(indices, weight_shard, row_offset, true, "embedding_masked");
}

}  // namespace dtensor
