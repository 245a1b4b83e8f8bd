// DTensor forms of softmax, log_softmax and softmin (registered in softmax_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/softmax/softmax.h"

namespace dtensor {

DTensor softmax(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("softmax");
  const ArgValue args[] = {dim};
  return dispatch(op, {&x}, args);
}

DTensor log_softmax(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("log_softmax");
  const ArgValue args[] = {dim};
  return dispatch(op, {&x}, args);
}

DTensor softmin(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("softmin");
  const ArgValue args[] = {dim};
  return dispatch(op, {&x}, args);
}

}  // namespace dtensor
