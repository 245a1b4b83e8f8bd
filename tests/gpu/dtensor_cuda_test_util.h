// Helpers of the DTensor-on-CUDA suites (test_dtensor_cuda_*.cc, label gpu, launched by mpirun
// through gpu_mpi_main.cc). They reuse the CPU suites' helpers (tests/common/dtensor_test_util.h
// and tests/common/ops_dtensor_test_util.h) and add CUDA meshes and checks that a result
// lives on this rank's GPU.
//
// At 1 rank the CUDA mesh uses NCCL (a 1-rank communicator); at 2 and 4 ranks the ctest entries
// set DTENSOR_CUDA_BACKEND=mpi, so all ranks share one GPU through pinned-memory staging.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dtensor::cuda_test {

using test::Ints;

// This rank's CUDA device (where DTensors on a CUDA mesh keep their local tensors).
inline Device gpu() {
  return Device(kCUDA, local_cuda_device());
}

inline DeviceMesh cuda_mesh(const Ints& shape) {
  return init_device_mesh(kCUDA, IntSpan(shape.data(), shape.size()));
}

// The 1-D and 2-D mesh shapes of test::meshes_for_world (w = 1: [1], [1, 1]).
inline std::vector<Ints> mesh_shapes_1d_2d(int w) {
  std::vector<Ints> out;
  for (const Ints& m : test::meshes_for_world(w)) {
    if (m.size() <= 2) out.push_back(m);
  }
  return out;
}

// A 1-D CUDA mesh over the world and a 2-D one ([2, w/2], or [1, w] for odd worlds): the CUDA
// counterpart of test::family_meshes().
inline std::vector<DeviceMesh> cuda_family_meshes() {
  const int64_t w = world_size();
  return {cuda_mesh({w}), w % 2 == 0 ? cuda_mesh({2, w / 2}) : cuda_mesh({1, w})};
}

// `t` (a local tensor of a DTensor on a CUDA mesh) lives on this rank's GPU.
inline bool on_my_gpu(const Tensor& t) {
  return t.defined() && t.device() == gpu();
}

// `got` (a full_tensor() of a CUDA DTensor) is on this rank's GPU and has the values of the CPU
// result `want` (test::same_values: exact for non-floating dtypes, else within
// tol * (1 + |want|)). The default 1e-5 covers float32 results of short sums computed in a
// different order (cuBLAS vs OpenBLAS, block reductions) and CUDA's exp/log/erf, which are
// within a few ulp of glibc's.
inline void check_gpu_result(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(on_my_gpu(got));
  INFO("got " << shape_str(got.sizes()) << " " << dtype_name(got.dtype()) << ", want "
              << shape_str(want.sizes()) << " " << dtype_name(want.dtype()));
  CHECK(test::same_values(got, want, tol));
}

}  // namespace dtensor::cuda_test
