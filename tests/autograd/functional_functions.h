// The functions of torch_functional_references.py, for test_autograd_functional.cc (against
// PyTorch) and test_autograd_api_mpi.cc (sharded against single device).
#pragma once

#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"

namespace dtensor::test {

// g(x, w) = [softmax(tanh(x @ w), 1), sum(exp(tanh(x @ w)) * log_softmax(x @ w, 0), 1)].
inline std::vector<DTensor> functional_g(const std::vector<DTensor>& in) {
  const DTensor mm = matmul(in[0], in[1]);
  const int64_t one[] = {1};
  return {softmax(tanh(mm), 1), sum(exp(tanh(mm)) * log_softmax(mm, 0), one)};
}

// s(x, w) = sum(softmax(tanh(x @ w), 1) * log_softmax(x @ w, 1)) + sum(exp(tanh(x)) * tanh(x)).
inline std::vector<DTensor> functional_s(const std::vector<DTensor>& in) {
  const DTensor mm = matmul(in[0], in[1]);
  const DTensor t = tanh(in[0]);
  return {sum(softmax(tanh(mm), 1) * log_softmax(mm, 1)) + sum(exp(t) * t)};
}

}  // namespace dtensor::test
