// Values for the registered ops' sample calls (OpInfo::samples), shared by the suites that run
// every op: the strategy validation harness, the finite-difference gradient check, the
// sharded-gradient check, the CUDA check (tests/gpu/test_registry_cuda.cc) and the op fuzzer.
#pragma once

#include <cstdint>
#include <random>
#include <variant>
#include <vector>

#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/tensor/creation.h"

namespace dtensor::test {

// A tensor of in.meta drawn from `seed` (the same on every rank): integers in [in.low, in.high]
// for integer and bool inputs, and for floating ones unless `reals` (then uniform reals in that
// range, so that no two elements tie and no kink is hit exactly).
inline Tensor sample_values(const SampleInput& in, uint64_t seed, bool reals) {
  std::mt19937_64 gen(seed);
  std::vector<double> v(static_cast<size_t>(shape_numel(in.meta.shape)));
  if (reals && is_floating(in.meta.dtype)) {
    std::uniform_real_distribution<double> pick(in.low, in.high);
    for (double& x : v) x = pick(gen);
  } else {
    std::uniform_int_distribution<int64_t> pick(static_cast<int64_t>(in.low),
                                                static_cast<int64_t>(in.high));
    for (double& x : v) x = static_cast<double>(pick(gen));
  }
  return from_vector<double>(v, in.meta.shape).to(in.meta.dtype);
}

// `s` with its floating inputs in `d` (the samples register float64): the same call in another
// floating dtype. A dtype argument equal to a floating input's registered dtype follows it (the
// Scalar ops carry their result dtype as an argument).
inline OpSample with_floating_dtype(const OpSample& s, DType d) {
  OpSample out = s;
  for (SampleInput& in : out.inputs) {
    if (!is_floating(in.meta.dtype)) continue;
    for (ArgValue& a : out.args) {
      if (const DType* t = std::get_if<DType>(&a); t != nullptr && *t == in.meta.dtype) a = d;
    }
    in.meta.dtype = d;
  }
  return out;
}

}  // namespace dtensor::test
