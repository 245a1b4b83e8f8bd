// Meshes the ranks disagree on (mpirun, 2 and 4 ranks): a different rank order or shape per
// rank, or a mesh built by only some ranks, raises dtensor::Error naming DeviceMesh and the
// mismatching ranks on EVERY rank (was: MPI truncation aborts, deadline expiries, or meshes
// whose communicators pair the wrong ranks). Then MeshGuard misuse (out-of-order destruction,
// destruction on another thread), detected instead of leaving the wrong mesh current. Every
// case ends with a world barrier, so a rank that hung or ran ahead fails the entry.
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/device_mesh/device_mesh.h"

namespace dt = dtensor;
using Catch::Contains;

namespace {

void all_ranks_arrive() {
  dt::world_communicator()->barrier()->wait();
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

// "[0, 1, 2, 3]" / "[3, 2, 1, 0]".
std::string list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string others();

// What the other ranks do, with the verb's number: "rank 0 builds" / "ranks 0, 1, 2 build".
std::string others_build() {
  return dt::world_size() == 2 ? "rank 0 builds" : others() + " build";
}

std::string others() {
  const int n = dt::world_size();
  std::string s = n == 2 ? "rank 0" : "ranks 0";
  for (int r = 1; r < n - 1; ++r) s += ", " + std::to_string(r);
  return s;
}

}  // namespace

TEST_CASE("mesh agreement: a different rank order on one rank raises everywhere",
          "[device_mesh][agreement]") {
  const int n = dt::world_size();
  const bool last = dt::world_rank() == n - 1;
  std::vector<int> ranks = iota_ranks(n);
  std::vector<int> reversed(ranks.rbegin(), ranks.rend());
  const std::string expect = "rank " + std::to_string(n - 1) + " builds DeviceMesh(cpu, " +
                             list(reversed) + ") where " + others_build() + " DeviceMesh(cpu, " +
                             list(ranks) + ")";
  const int64_t before = dt::device_mesh_registry_size();
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, {n}, last ? reversed : ranks, {"x"}),
                      Contains("[DeviceMesh] the ranks build different meshes: " + expect));
  CHECK(dt::device_mesh_registry_size() == before);  // nothing was split or registered
  // The same mesh everywhere afterwards works.
  const dt::DeviceMesh ok(dt::kCPU, {n}, ranks, {"x"});
  CHECK(ok.get_coordinate() == dt::Shape{dt::world_rank()});
  all_ranks_arrive();
}

TEST_CASE("mesh agreement: a different shape on one rank raises everywhere",
          "[device_mesh][agreement]") {
  const int n = dt::world_size();
  const bool last = dt::world_rank() == n - 1;
  const dt::Shape flat{n}, grid{2, n / 2};
  REQUIRE_THROWS_WITH(
      dt::DeviceMesh(dt::kCPU, last ? dt::IntSpan(grid) : dt::IntSpan(flat), iota_ranks(n)),
      Contains("[DeviceMesh] the ranks build different meshes") &&
          Contains("rank " + std::to_string(n - 1) + " builds DeviceMesh(cpu, [[") &&
          Contains(others_build() + " DeviceMesh(cpu, " + list(iota_ranks(n)) + ")"));
  all_ranks_arrive();
}

TEST_CASE("mesh agreement: a mesh built by only some ranks raises everywhere",
          "[device_mesh][agreement]") {
  const int n = dt::world_size();
  const bool last = dt::world_rank() == n - 1;
  // Ranks 0..n-2 build a mesh over the world; the last rank does not, and goes on to a world
  // barrier.
  std::vector<int> ranks = iota_ranks(n);
  std::vector<int> reversed(ranks.rbegin(), ranks.rend());
  if (last) {
    REQUIRE_THROWS_WITH(all_ranks_arrive(),
                        Contains("[barrier] collective mismatch") && Contains("(DeviceMesh)") &&
                            Contains("rank " + std::to_string(n - 1) + " issued barrier()"));
  } else {
    REQUIRE_THROWS_WITH(
        dt::DeviceMesh(dt::kCPU, {n}, reversed),
        Contains("[DeviceMesh] building DeviceMesh(cpu, " + list(reversed) + ") on this rank") &&
            Contains("collective mismatch") &&
            Contains("rank " + std::to_string(n - 1) + " issued barrier()"));
  }
  all_ranks_arrive();
}

TEST_CASE("MeshGuard destroyed out of order is reported and leaves the inner mesh current",
          "[device_mesh][guard]") {
  const int n = dt::world_size();
  const dt::DeviceMesh a = dt::init_device_mesh(dt::kCPU, {n}, {"a"});
  const dt::DeviceMesh b = dt::init_device_mesh(dt::kCPU, {n}, {"b"});
  auto outer = std::make_unique<dt::MeshGuard>(a);
  auto inner = std::make_unique<dt::MeshGuard>(b);
  outer.reset();  // out of order: the inner guard is still alive
  REQUIRE_THROWS_WITH(dt::current_mesh(), Contains("[current_mesh] a MeshGuard for") &&
                                              Contains("dims=(a)") &&
                                              Contains("destroyed out of order"));
  // Reported once; the inner guard's mesh is current, and closing it empties the stack.
  CHECK(dt::current_mesh() == b);
  inner.reset();
  CHECK_FALSE(dt::has_current_mesh());
}

TEST_CASE("MeshGuard destroyed on another thread is reported on its own thread",
          "[device_mesh][guard]") {
  const dt::DeviceMesh a = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"a"});
  auto guard = std::make_unique<dt::MeshGuard>(a);
  std::thread other([&] { guard.reset(); });
  other.join();
  REQUIRE_THROWS_WITH(dt::has_current_mesh(),
                      Contains("[has_current_mesh]") && Contains("destroyed on another thread"));
  CHECK_FALSE(dt::has_current_mesh());
}
