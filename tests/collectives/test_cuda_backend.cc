// The CUDA backend choice (DTENSOR_CUDA_BACKEND, dtensor/collectives/runtime.h) under mpirun at 1
// and 2 ranks. Runs without a GPU: the rule as a pure function, the environment override and its
// errors on every rank, and the automatic choice against an expectation computed here from the
// device count and the node-local rank count.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "dtensor/collectives/nccl/nccl_backend.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/storage.h"

namespace dt = dtensor;
using Catch::Contains;

namespace {

constexpr const char* kEnv = "DTENSOR_CUDA_BACKEND";

// Ranks on this node, counted independently of the runtime.
int node_ranks() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

// Whether NCCL is usable by every rank: compiled in, a device, no two ranks on one device.
bool nccl_possible_everywhere() {
  const int devices = dt::cuda_device_count();
  int mine = dt::detail::nccl_compiled() && devices > 0 && node_ranks() <= devices;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all != 0;
}

bool nccl_possible_alone() {
  return dt::detail::nccl_compiled() && dt::cuda_device_count() > 0;
}

void set_env(const char* v) {
  if (v == nullptr) {
    unsetenv(kEnv);
  } else {
    setenv(kEnv, v, 1);
  }
}

}  // namespace

TEST_CASE("choose_cuda_backend: auto, nccl, mpi and unknown values", "[cuda_backend]") {
  using dt::detail::choose_cuda_backend;
  CHECK(choose_cuda_backend(nullptr, true, "op") == "nccl");
  CHECK(choose_cuda_backend(nullptr, false, "op") == "mpi");
  CHECK(choose_cuda_backend("", true, "op") == "nccl");
  CHECK(choose_cuda_backend("", false, "op") == "mpi");
  CHECK(choose_cuda_backend("nccl", true, "op") == "nccl");
  CHECK(choose_cuda_backend("mpi", true, "op") == "mpi");
  CHECK(choose_cuda_backend("mpi", false, "op") == "mpi");
  REQUIRE_THROWS_AS(choose_cuda_backend("nccl", false, "op"), dt::Error);
  REQUIRE_THROWS_WITH(choose_cuda_backend("nccl", false, "op"),
                      Contains("[op]") && Contains("DTENSOR_CUDA_BACKEND=nccl") &&
                          Contains("NCCL cannot be used") && Contains("mpi"));
  for (const char* bad : {"NCCL", "gloo", "nccl ", "auto"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(choose_cuda_backend(bad, true, "op"), dt::Error);
    REQUIRE_THROWS_WITH(choose_cuda_backend(bad, false, "op"),
                        Contains("[op]") &&
                            Contains("DTENSOR_CUDA_BACKEND='" + std::string(bad) + "'") &&
                            Contains("expected nccl, mpi, or unset"));
  }
}

// One test case, in order: the world CUDA communicator is created once and cached, so the
// failing settings come first and the successful automatic choice last.
TEST_CASE("world and self CUDA communicators follow DTENSOR_CUDA_BACKEND on every rank",
          "[cuda_backend]") {
  const bool world_possible = nccl_possible_everywhere();
  const bool self_possible = nccl_possible_alone();

  set_env("bogus");
  REQUIRE_THROWS_WITH(dt::world_communicator(dt::kCUDA),
                      Contains("[world_communicator]") && Contains("DTENSOR_CUDA_BACKEND='bogus'"));
  REQUIRE_THROWS_WITH(dt::self_communicator(dt::kCUDA),
                      Contains("[self_communicator]") && Contains("DTENSOR_CUDA_BACKEND='bogus'"));
  CHECK(dt::self_communicator(dt::kCPU)->backend() == "mpi");  // the CPU ignores the variable

  if (dt::world_size() > 1) {
    set_env(dt::world_rank() == 0 ? "mpi" : "nccl");
    REQUIRE_THROWS_WITH(
        dt::world_communicator(dt::kCUDA),
        Contains("[world_communicator]") && Contains("another rank has a different value"));
  }

  set_env("nccl");
  if (!world_possible) {
    REQUIRE_THROWS_WITH(dt::world_communicator(dt::kCUDA),
                        Contains("[world_communicator]") && Contains("NCCL cannot be used"));
  }
  if (!self_possible) {
    REQUIRE_THROWS_WITH(dt::self_communicator(dt::kCUDA),
                        Contains("[self_communicator]") && Contains("NCCL cannot be used"));
  } else {
    CHECK(dt::self_communicator(dt::kCUDA)->backend() == "nccl");
  }

  set_env("mpi");
  {
    auto self = dt::self_communicator(dt::kCUDA);
    CHECK(self->backend() == "mpi");
    CHECK(self->size() == 1);
  }

  set_env(nullptr);  // automatic
  auto world = dt::world_communicator(dt::kCUDA);
  CHECK(world->backend() == (world_possible ? "nccl" : "mpi"));
  CHECK(world->size() == dt::world_size());
  CHECK(world->rank() == dt::world_rank());
  if (!world_possible) CHECK(world == dt::world_communicator(dt::kCPU));  // the MPI one, shared
  CHECK(dt::world_communicator(dt::kCUDA) == world);                      // cached
  CHECK(dt::self_communicator(dt::kCUDA)->backend() == (self_possible ? "nccl" : "mpi"));
  set_env("");  // empty is automatic too
  CHECK(dt::self_communicator(dt::kCUDA)->backend() == (self_possible ? "nccl" : "mpi"));
  set_env(nullptr);

  const int devices = dt::cuda_device_count();
  CHECK(dt::local_cuda_device() == (devices > 0 ? dt::local_rank() % devices : 0));
}
