// DTensor embedding (registered in embedding_strategy.cc).
#include "autograd/dispatch.h"
#include "ops/embedding/embedding.h"
#include "ops/ops_registry.h"

namespace dtensor {

DTensor embedding(const DTensor& indices, const DTensor& weight) {
  static const OpInfo& op = ops_op("embedding");
  return dispatch(op, {&weight, &indices});
}

}  // namespace dtensor
