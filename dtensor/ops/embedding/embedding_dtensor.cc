// DTensor embedding (registered in embedding_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

// padding_idx enters as static arg 0, normalised to [0, rows), for the backward formula only.
DTensor embedding(const DTensor& indices, const DTensor& weight,
                  std::optional<int64_t> padding_idx) {
  static const OpInfo& op = ops_op("embedding");
  if (!padding_idx) return dispatch(op, {&weight, &indices});
  DT_CHECK(weight.defined() && weight.dim() == 2,
           "[embedding] argument weight must be a defined 2-d table when padding_idx is given");
  const int64_t rows = weight.size(0);
  DT_CHECK(*padding_idx >= -rows && *padding_idx < rows,
           "[embedding] padding_idx %d must be within num_embeddings (expected %d <= padding_idx "
           "< %d)",
           *padding_idx, -rows, rows);
  const ArgValue args[] = {*padding_idx < 0 ? *padding_idx + rows : *padding_idx};
  return dispatch(op, {&weight, &indices}, args);
}

}  // namespace dtensor
