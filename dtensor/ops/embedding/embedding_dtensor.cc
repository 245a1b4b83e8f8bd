// DTensor embedding (registered in embedding_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/ops_registry.h"

namespace dtensor {

DTensor embedding(const DTensor& indices, const DTensor& weight) {
  static const OpInfo& op = ops_op("embedding");
  return dispatch(op, {&weight, &indices});
}

}  // namespace dtensor
