// Test-only ops for the propagation engine (registered once into op_registry() under names
// starting with "t_"), with naive float kernels so the engine is tested independently of the
// ops library.
#pragma once

#include <vector>

#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::testing {

struct TestOps {
  const OpInfo* add;    // t_add(self, other; alpha runtime): same shapes, linear
  const OpInfo* scale;  // t_scale(self; factor runtime): linear
  const OpInfo* sum;    // t_sum(self; dim static, keepdim static): S(dim) -> P(sum)
  const OpInfo* mm;     // t_mm(self, mat2): Megatron rows, multilinear
  const OpInfo* relu;   // t_relu(self): nonlinear
  const OpInfo* fill_;  // t_fill_(self): in-place, replicate-only strategy
};
// Registers the test ops once (thread-safe) and returns them.
const TestOps& test_ops();

// Naive float32 kernels on local tensors (row-major loops).
Tensor naive_add(const Tensor& a, const Tensor& b, double alpha);
Tensor naive_scale(const Tensor& a, double factor);
Tensor naive_sum(const Tensor& a, int64_t dim, bool keepdim);
Tensor naive_mm(const Tensor& a, const Tensor& b);
Tensor naive_relu(const Tensor& a);

// DTensor forms through dispatch.
DTensor t_add(const DTensor& a, const DTensor& b, double alpha = 1.0);
DTensor t_scale(const DTensor& a, double factor);
DTensor t_sum(const DTensor& a, int64_t dim, bool keepdim = false);
DTensor t_mm(const DTensor& a, const DTensor& b);
DTensor t_relu(const DTensor& a);
DTensor& t_fill_(DTensor& a);

// A float32 tensor of `shape` whose element i is value(i) = (i % 7) - 3 + 0.25 * (i % 3).
Tensor make_input(IntSpan shape, int salt = 0);

}  // namespace dtensor::testing
