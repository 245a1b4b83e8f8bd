// PyTorch reference cases as tests/nn/torch_nn_references.py writes them (an .inc of RefCase
// initializers: a case name and named float64 tensors), and the float64 module options the nn
// tests build their modules with. Included by the inventory and recurrent module tests.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/nn/module.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::test {

struct RefTensor {
  const char* name;
  std::vector<int64_t> shape;
  std::vector<double> values;
};
struct RefCase {
  const char* name;
  std::vector<RefTensor> tensors;
};

// The case of `cases` called `name`; fails the test when there is none.
inline const RefCase& find_case(const std::vector<RefCase>& cases, const std::string& name) {
  for (const RefCase& c : cases) {
    if (name == c.name) return c;
  }
  FAIL("no reference case " << name);
  throw 0;
}

// The recorded tensor `name`, or an undefined Tensor.
inline Tensor value(const RefCase& c, const std::string& name) {
  for (const RefTensor& t : c.tensors) {
    if (name == t.name) return from_vector<double>(t.values, t.shape);
  }
  return Tensor();
}

// float64 module options (the reference cases' dtype).
inline nn::ModuleOptions f64() {
  nn::ModuleOptions o;
  o.dtype = kFloat64;
  return o;
}

}  // namespace dtensor::test
