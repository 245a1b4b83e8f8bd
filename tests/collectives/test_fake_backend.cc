// The fake backend (issue 46): one process plays rank 5 of a world of 1,024 with no MPI. Run by
// ctest with DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=1024 DTENSOR_FAKE_RANK=5 (see
// tests/collectives/CMakeLists.txt); without them the first case fails.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;
using Catch::Contains;

namespace {
constexpr int kWorld = 1024;
constexpr int kRank = 5;

std::vector<float> values(const dt::Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}
}  // namespace

TEST_CASE("fake backend: the world is the one given, and MPI is never initialised", "[fake]") {
  REQUIRE(dt::fake_backend());
  dt::Runtime rt;
  CHECK(dt::world_size() == kWorld);
  CHECK(dt::world_rank() == kRank);
  int mpi_initialized = 0;
  MPI_Initialized(&mpi_initialized);
  CHECK(mpi_initialized == 0);
  CHECK(dt::Runtime::initialized());  // the runtime is up, without MPI
  const dt::CommunicatorPtr world = dt::world_communicator();
  CHECK(world->backend() == "fake");
  CHECK(world->size() == kWorld);
  CHECK(world->rank() == kRank);
  CHECK(dt::world_communicator(dt::DeviceType::kCUDA) == world);
  // No peers to compare fingerprints with.
  CHECK(dt::collective_check_mode() == dt::CollectiveCheckMode::kOff);
  // Too late to change the backend now; the same values are accepted.
  CHECK_NOTHROW(dt::init_fake_backend(kWorld, kRank));
  CHECK_THROWS_WITH(dt::init_fake_backend(8, 0), Contains("already started"));
}

TEST_CASE("fake backend: collectives complete at once with shaped filler and are counted",
          "[fake]") {
  const dt::CommunicatorPtr world = dt::world_communicator();
  dt::CommDebugMode comm;
  const dt::Tensor x = dt::arange(0.0, 3.0, 1.0, dt::DType::kFloat32);

  // all_gather: every block is this rank's input.
  dt::Tensor gathered = dt::empty({kWorld * 3}, dt::DType::kFloat32);
  dt::WorkPtr w = world->all_gather(gathered, x);
  CHECK(w->is_completed());
  w->wait();
  CHECK(values(gathered.narrow(0, 0, 3)) == std::vector<float>{0, 1, 2});
  CHECK(values(gathered.narrow(0, (kWorld - 1) * 3, 3)) == std::vector<float>{0, 1, 2});

  // reduce_scatter: this rank's block of the input, unreduced.
  const dt::Tensor big = dt::arange(0.0, 2.0 * kWorld, 1.0, dt::DType::kFloat32);
  dt::Tensor mine = dt::empty({2}, dt::DType::kFloat32);
  world->reduce_scatter(mine, big, dt::ReduceOp::kSum)->wait();
  CHECK(values(mine) == std::vector<float>{2 * kRank, 2 * kRank + 1});

  // all_reduce in place: unchanged.
  dt::Tensor y = x.clone();
  world->all_reduce(y, dt::ReduceOp::kSum)->wait();
  CHECK(values(y) == std::vector<float>{0, 1, 2});
  // all_to_all: the input.
  dt::Tensor a2a = dt::empty({2 * kWorld}, dt::DType::kFloat32);
  world->all_to_all(a2a, big)->wait();
  CHECK(values(a2a) == values(big));
  world->barrier()->wait();

  // CommDebugMode counts kind and bytes as on a real backend.
  CHECK(comm.count(dt::CollectiveKind::kAllGather) == 1);
  CHECK(comm.bytes(dt::CollectiveKind::kAllGather) == 12);
  CHECK(comm.count(dt::CollectiveKind::kReduceScatter) == 1);
  CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 1);
  CHECK(comm.count(dt::CollectiveKind::kAllToAll) == 1);
  CHECK(comm.count(dt::CollectiveKind::kBarrier) == 1);
}

TEST_CASE("fake backend: groups from members; split refused", "[fake]") {
  const dt::CommunicatorPtr world = dt::world_communicator();
  const dt::CommunicatorPtr group = world->create_group({1, kRank, 900});
  CHECK(group->backend() == "fake");
  CHECK(group->size() == 3);
  CHECK(group->rank() == 1);
  CHECK(group->world_ranks() == std::vector<int>{1, kRank, 900});
  CHECK_NOTHROW(group->meet());
  CHECK_THROWS_WITH(world->split(0, kRank), Contains("[split] the fake backend cannot split"));
  const dt::CommunicatorPtr self = dt::self_communicator(dt::DeviceType::kCPU);
  CHECK(self->size() == 1);
  CHECK(self->world_ranks() == std::vector<int>{kRank});
}

TEST_CASE("fake backend: reading a collective's data is refused", "[fake]") {
  CHECK_THROWS_WITH(dt::check_real_data("item"),
                    Contains("[item] needs the data of a collective") &&
                        Contains("rank 5 of a fake world of 1024"));
}

TEST_CASE("fake backend: DTENSOR_LOG=collectives logs each collective with its mesh dim",
          "[fake]") {
  std::vector<std::string> lines;
  dt::LogSink prev = dt::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  dt::set_log("collectives");
  const dt::CommunicatorPtr group = dt::world_communicator()->create_group({kRank, 7});
  group->set_description("mesh dim 1 (tp)");
  dt::Tensor t = dt::ones({4});
  group->all_reduce(t, dt::ReduceOp::kSum)->wait();
  dt::set_log("");
  dt::set_log_sink(prev);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Contains("all_reduce 16 B per rank on mesh dim 1 (tp) (fake"));
}

TEST_CASE("fake backend: DTENSOR_LOG=config notes the fake world and the skipped check", "[fake]") {
  std::vector<std::string> lines;
  dt::LogSink prev = dt::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  dt::set_log("config");
  dt::set_log("");
  dt::set_log_sink(prev);
  bool noted = false;
  for (const std::string& l : lines) {
    // The rank in the prefix is the fake one.
    noted = noted || (l.find("[dtensor rank 5 config] fake backend: this process plays rank 5 "
                             "of 1024") == 0 &&
                      l.find("consistency check is skipped") != std::string::npos);
  }
  CHECK(noted);
}
