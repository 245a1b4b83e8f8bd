// Shared by the one-process autograd suites (test_engine, test_autograd_api).
#pragma once

#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::test {

// A float64 local DTensor (this process's self mesh) holding `v` in `shape`, requiring grad.
inline DTensor leaf(std::vector<double> v, Shape shape) {
  DTensor x = local_dtensor(from_vector<double>(v, shape));
  x.requires_grad_();
  return x;
}

}  // namespace dtensor::test
