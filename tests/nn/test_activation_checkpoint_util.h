// Shared by the activation checkpointing suites: a step's loss and gradients, and their
// comparison bit for bit.
#pragma once

#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/nn/module.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dtensor::test {

// Runs loss.backward() and returns the loss, then every parameter's gradient (this rank's local
// shard) in named_parameters() order, each cloned.
inline std::vector<Tensor> backward_and_grads(const DTensor& loss, const nn::Module& model) {
  loss.backward();
  std::vector<Tensor> out{loss.to_local().clone()};
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    out.push_back(p.grad().to_local().clone());
  }
  return out;
}

// backward_and_grads of a checkpointed run against the plain run's: equal bit for bit.
inline void check_bitwise(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("tensor " << i << " (0: the loss, then the parameters' gradients)");
    CHECK(same_values(got[i], want[i], 0.0));
  }
}

}  // namespace dtensor::test
