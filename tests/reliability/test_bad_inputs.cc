// The bad-input catalogue (mpirun, 2 and 4 ranks). Each TEST_CASE feeds one kind of bad input
// and requires dtensor::Error on EVERY rank with a message naming the op (in brackets) and the
// offending argument; afterwards every rank must reach a world barrier, so a rank that hung or
// ran ahead ends the job through the collective deadline instead of passing. The last cases
// check that NaN and Inf pass through all_reduce, all_gather and redistribute unchanged.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/config.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {
namespace {

using Catch::Contains;

// Every rank reaches this point: proves no rank is stuck in a collective the others skipped.
void all_ranks_arrive() {
  world_communicator()->barrier()->wait();
}

Tensor iota(const Shape& shape, DType dtype = kFloat32) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 13);
  return from_vector(v, shape).to(dtype);
}

DeviceMesh world_mesh_1d() {
  return init_device_mesh(kCPU, {static_cast<int64_t>(world_size())}, {"x"});
}

// A 2-d mesh [2, world/2] (world >= 2 and even) named (dp, tp).
DeviceMesh world_mesh_2d() {
  return init_device_mesh(kCPU, {2, static_cast<int64_t>(world_size() / 2)}, {"dp", "tp"});
}

TEST_CASE("bad input: dtypes that differ across ranks (from_local run_check)") {
  const DeviceMesh mesh = world_mesh_1d();
  const int64_t w = world_size();
  const Tensor local = iota({3, 2}, world_rank() == w - 1 ? kFloat64 : kFloat32);
  REQUIRE_THROWS_AS(DTensor::from_local(local, mesh, {Shard(0)}, true), Error);
  REQUIRE_THROWS_WITH(DTensor::from_local(local, mesh, {Shard(0)}, true),
                      Contains("[from_local]") && Contains("dtype float64") &&
                          Contains("rank " + std::to_string(w - 1)));
  all_ranks_arrive();
}

TEST_CASE("bad input: local shape that disagrees with the given global shape") {
  const DeviceMesh mesh = world_mesh_1d();
  const int64_t w = world_size();
  // Every rank holds [2, 3] but the global shape claims [2 * w + 1, 3]: the last rank's chunk
  // under torch.chunk differs, so at least one rank mismatches and all ranks must say so.
  const Shape global = {2 * w + 1, 3};
  const Tensor local = iota({2, 3});
  REQUIRE_THROWS_AS(DTensor::from_local(local, mesh, {Shard(0)}, true, global), Error);
  REQUIRE_THROWS_WITH(
      DTensor::from_local(local, mesh, {Shard(0)}, true, global),
      Contains("[from_local]") && Contains("local shard of shape") && Contains(shape_str(global)));
  all_ranks_arrive();
}

TEST_CASE("bad input: from_local shapes that disagree across ranks (run_check=true)") {
  const DeviceMesh mesh = world_mesh_1d();
  const int rank = world_rank();
  // Rank r holds r + 1 rows: no global shape gives these chunks (the first rank's one is
  // taken as the template, so every other rank mismatches).
  const Tensor local = iota({rank + 1, 4});
  std::string expected_ranks = "mismatching ranks: 1";
  for (int r = 2; r < world_size(); ++r) expected_ranks += ", " + std::to_string(r);
  REQUIRE_THROWS_AS(DTensor::from_local(local, mesh, {Shard(0)}, true), Error);
  if (world_size() > 2) {
    REQUIRE_THROWS_WITH(DTensor::from_local(local, mesh, {Shard(0)}, true),
                        Contains("[from_local]") && Contains("rank 1 holds a local shard") &&
                            Contains(expected_ranks));
  } else {
    REQUIRE_THROWS_WITH(DTensor::from_local(local, mesh, {Shard(0)}, true),
                        Contains("[from_local]") && Contains("rank 1 holds a local shard"));
  }
  // Different ndims are caught too.
  const Tensor ragged = rank == 0 ? iota({2, 4}) : iota({2, 4, 1});
  REQUIRE_THROWS_WITH(DTensor::from_local(ragged, mesh, {Replicate()}, true),
                      Contains("[from_local]") && Contains("ndim"));
  all_ranks_arrive();
}

TEST_CASE("bad input: distribute_tensor arguments that differ across ranks") {
  const DeviceMesh mesh = world_mesh_1d();
  const int64_t w = world_size();
  const int last = static_cast<int>(w - 1);
  const Tensor x = iota({2 * w, 3});
  const std::string last_rank = "rank " + std::to_string(last) + " passed";
  // Placements: the last rank shards dim 1.
  const Placements p = {world_rank() == last ? Shard(1) : Shard(0)};
  REQUIRE_THROWS_WITH(distribute_tensor(x, mesh, p, 0),
                      Contains("[distribute_tensor] the ranks disagree on the call") &&
                          Contains(last_rank + " placements [S(1)], src_data_rank 0") &&
                          Contains("rank 0 passed placements [S(0)], src_data_rank 0"));
  // src_data_rank: the last rank names itself as the source.
  REQUIRE_THROWS_WITH(
      distribute_tensor(x, mesh, {Shard(0)}, world_rank() == last ? last : 0),
      Contains("[distribute_tensor] the ranks disagree on the call") &&
          Contains(last_rank + " placements [S(0)], src_data_rank " + std::to_string(last)));
  // A shape that differs beyond the 16 dims shown in full still differs.
  Shape deep(18, 1);
  deep[0] = w;
  if (world_rank() == last) deep[17] = 2;
  REQUIRE_THROWS_WITH(distribute_tensor(iota(deep), mesh, {Shard(0)}, 0),
                      Contains("[distribute_tensor] argument tensor differs across ranks") &&
                          Contains("rank " + std::to_string(last)));
  all_ranks_arrive();
}

TEST_CASE("bad input: from_local arguments that differ across ranks (run_check=true)") {
  const DeviceMesh mesh = world_mesh_1d();
  const int64_t w = world_size();
  const int last = static_cast<int>(w - 1);
  const Tensor local = iota({2, 3});
  const Placements p = {world_rank() == last ? Replicate() : Shard(0)};
  REQUIRE_THROWS_WITH(DTensor::from_local(local, mesh, p, true),
                      Contains("[from_local] the ranks disagree on the call") &&
                          Contains("rank " + std::to_string(last) + " passed placements [R]"));
  const Shape global = {world_rank() == last ? 2 * w + 1 : 2 * w, 3};
  REQUIRE_THROWS_WITH(DTensor::from_local(local, mesh, {Shard(0)}, true, global),
                      Contains("[from_local] the ranks disagree on the call") &&
                          Contains("shape " + shape_str(Shape{2 * w + 1, 3})));
  all_ranks_arrive();
}

TEST_CASE("bad input: global geometry that cannot exist") {
  const DeviceMesh mesh = world_mesh_1d();
  const Tensor local = iota({2, 3});
  // A negative global stride (PyTorch has no negative-stride tensors).
  REQUIRE_THROWS_WITH(
      DTensor::from_local(local, mesh, {Replicate()}, false, Shape{2, 3}, Shape{3, -1}),
      Contains("[from_local]") && Contains("negative"));
  // A global shape whose element count overflows int64.
  const int64_t big = int64_t{1} << 40;
  REQUIRE_THROWS_WITH(DTensor::from_local(local, mesh, {Replicate()}, false, Shape{big, big}),
                      Contains("[from_local]") && Contains("int64"));
  // Partial(avg) of booleans.
  const Tensor flags = iota({2, 3}, DType::kBool);
  REQUIRE_THROWS_WITH(distribute_tensor(flags, mesh, {Partial(ReduceOp::kAvg)}, std::nullopt),
                      Contains("[distribute_tensor] Partial(avg) of a bool tensor"));
  REQUIRE_THROWS_WITH(DTensor::from_local(flags, mesh, {Partial(ReduceOp::kAvg)}),
                      Contains("[from_local] Partial(avg) of a bool tensor"));
  const DTensor replicated = distribute_tensor(flags, mesh, {Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(replicated.redistribute(Placements{Partial(ReduceOp::kAvg)}),
                      Contains("[redistribute] Partial(avg) of a bool tensor"));
  all_ranks_arrive();
}

TEST_CASE("bad input: Shard dim out of range") {
  const DeviceMesh mesh = world_mesh_1d();
  const Tensor x = iota({4, 5});
  REQUIRE_THROWS_AS(distribute_tensor(x, mesh, {Shard(2)}), Error);
  REQUIRE_THROWS_WITH(distribute_tensor(x, mesh, {Shard(2)}),
                      Contains("[distribute_tensor]") && Contains("2"));
  REQUIRE_THROWS_WITH(distribute_tensor(x, mesh, {Shard(-3)}),
                      Contains("[distribute_tensor]") && Contains("-3"));
  const DTensor d = distribute_tensor(x, mesh, {Shard(0)});
  REQUIRE_THROWS_WITH(d.redistribute(mesh, {Shard(7)}),
                      Contains("[redistribute]") && Contains("7"));
  REQUIRE_THROWS_WITH(DTensor::from_local(iota({2, 5}), mesh, {Shard(2)}),
                      Contains("[from_local]") && Contains("2"));
  // The DTensor is still usable after the failed calls.
  REQUIRE(equal(d.full_tensor(), x));
  all_ranks_arrive();
}

TEST_CASE("bad input: placements count differs from the mesh ndim") {
  const DeviceMesh mesh = world_mesh_1d();
  const Tensor x = iota({4, 5});
  REQUIRE_THROWS_AS(distribute_tensor(x, mesh, {Shard(0), Replicate()}), Error);
  REQUIRE_THROWS_WITH(distribute_tensor(x, mesh, {Shard(0), Replicate()}),
                      Contains("[distribute_tensor]") && Contains("[S(0), R]"));
  REQUIRE_THROWS_WITH(distribute_tensor(x, mesh, Placements{}),
                      Contains("[distribute_tensor]") && Contains("placements"));
  REQUIRE_THROWS_WITH(DTensor::from_local(x, mesh, {Replicate(), Replicate()}),
                      Contains("[from_local]") && Contains("2 placements"));
  const DTensor d = distribute_tensor(x, mesh, {Replicate()});
  REQUIRE_THROWS_WITH(d.redistribute(mesh, {Replicate(), Shard(1)}),
                      Contains("[redistribute]") && Contains("[R, S(1)]"));
  all_ranks_arrive();
}

TEST_CASE("bad input: a tensor on a device the mesh cannot serve") {
#if DTENSOR_HAVE_CUDA
  // With CUDA compiled in the CUDA mesh is legitimate; this case is for CPU-only builds.
  SUCCEED("CUDA is compiled in: a CUDA mesh is valid here");
#else
  // A CUDA mesh in a build without CUDA: either building the mesh or moving a tensor onto it
  // fails, on every rank, with a message that says CUDA is not available.
  const int64_t w = world_size();
  auto use_cuda_mesh = [&] {
    const DeviceMesh mesh = init_device_mesh(kCUDA, {w});
    return distribute_tensor(iota({4, 2}), mesh, {Shard(0)}, std::nullopt);
  };
  REQUIRE_THROWS_AS(use_cuda_mesh(), Error);
  REQUIRE_THROWS_WITH(use_cuda_mesh(), Contains("CUDA"));
#endif
  all_ranks_arrive();
}

TEST_CASE("bad input: a mesh bigger than the world") {
  const int64_t w = world_size();
  REQUIRE_THROWS_AS(init_device_mesh(kCPU, {w + 1}), Error);
  REQUIRE_THROWS_WITH(init_device_mesh(kCPU, {2, w}),
                      Contains("[init_device_mesh]") && Contains(shape_str(Shape{2, w})) &&
                          Contains("needs " + std::to_string(2 * w) + " ranks"));
  std::vector<int> ranks;
  for (int r = 0; r < w; ++r) ranks.push_back(r + 1);  // rank w does not exist
  REQUIRE_THROWS_WITH(DeviceMesh(kCPU, Shape{w}, ranks),
                      Contains("[DeviceMesh]") && Contains(std::to_string(w)));
  REQUIRE_THROWS_WITH(init_device_mesh(kCPU, {w, 0}), Contains("mesh_shape"));
  all_ranks_arrive();
}

TEST_CASE("bad input: unknown mesh dim name") {
  const DeviceMesh mesh = world_mesh_2d();
  REQUIRE_THROWS_AS(mesh["pp"], Error);
  REQUIRE_THROWS_WITH(mesh["pp"],
                      Contains("[DeviceMesh]") && Contains("'pp'") && Contains("dp, tp"));
  REQUIRE_THROWS_WITH(mesh.dim_index("TP"), Contains("[DeviceMesh]") && Contains("'TP'"));
  REQUIRE_THROWS_WITH(mesh.size(2), Contains("[DeviceMesh]") && Contains("mesh dim 2"));
  REQUIRE(mesh["tp"].size() == world_size() / 2);
  all_ranks_arrive();
}

TEST_CASE("bad input: Partial op change with no exact plan") {
  const DeviceMesh mesh = world_mesh_1d();
  const Tensor x = iota({3, 4});
  const DTensor pmax = distribute_tensor(x, mesh, {Partial(ReduceOp::kMax)});
  REQUIRE_THROWS_AS(pmax.redistribute(mesh, {Partial(ReduceOp::kSum)}), Error);
  REQUIRE_THROWS_WITH(pmax.redistribute(mesh, {Partial(ReduceOp::kSum)}),
                      Contains("[redistribute]") && Contains("P(max)") && Contains("P(sum)"));
  const DTensor pavg = distribute_tensor(iota({3, 4}, kInt32), mesh, {Partial(ReduceOp::kAvg)});
  REQUIRE_THROWS_WITH(pavg.redistribute(mesh, {Partial(ReduceOp::kSum)}),
                      Contains("[redistribute]") && Contains("P(avg)"));
  REQUIRE_THROWS_WITH(Partial(ReduceOp::kProduct), Contains("product"));
  all_ranks_arrive();
}

TEST_CASE("bad input: redistribute onto a different mesh with placements for the old one") {
  // Moving to another mesh is allowed (test_redistribute_cross_mesh_mpi); the placements must
  // fit the target mesh, checked from the arguments alone before anything moves.
  const DeviceMesh a = world_mesh_1d();
  const DeviceMesh b = init_device_mesh(kCPU, {1, static_cast<int64_t>(world_size())});
  const DTensor d = distribute_tensor(iota({4, 4}), a, {Shard(0)});
  REQUIRE_THROWS_AS(d.redistribute(b, {Replicate()}), Error);
  REQUIRE_THROWS_WITH(d.redistribute(b, {Replicate()}),
                      Contains("[redistribute]") && Contains("placements"));
  CHECK(equal(d.redistribute(b, {Replicate(), Replicate()}).to_local(), iota({4, 4})));
  all_ranks_arrive();
}

TEST_CASE("bad input: distribute_tensor from a rank outside the mesh") {
  const int64_t w = world_size();
  const DeviceMesh half = init_device_mesh(kCPU, {w / 2});
  REQUIRE_THROWS_AS(distribute_tensor(iota({4}), half, {Shard(0)}, static_cast<int>(w - 1)), Error);
  REQUIRE_THROWS_WITH(distribute_tensor(iota({4}), half, {Shard(0)}, static_cast<int>(w - 1)),
                      Contains("[distribute_tensor]") && Contains("src_data_rank"));
  all_ranks_arrive();
}

// ---- NaN / Inf pass through unchanged ---------------------------------------------------------

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_CASE("NaN and Inf pass through all_reduce") {
  auto comm = world_communicator();
  const int rank = comm->rank();
  // [NaN on rank 0 only, +Inf everywhere, -Inf on the last rank and 1 elsewhere, +Inf and -Inf]
  const float last = rank == comm->size() - 1 ? -kInf : 1.0f;
  const float mixed = rank == 0 ? kInf : (rank == 1 ? -kInf : 2.0f);
  Tensor t = from_vector(std::vector<float>{rank == 0 ? kNaN : 1.0f, kInf, last, mixed}, Shape{4});
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  const std::vector<float> got = t.to_vector<float>();
  CHECK(std::isnan(got[0]));
  CHECK(got[1] == kInf);
  CHECK(got[2] == -kInf);
  CHECK(std::isnan(got[3]));  // +Inf + -Inf
  Tensor m = from_vector(std::vector<float>{rank == 0 ? kInf : 1.0f, -kInf}, Shape{2});
  comm->all_reduce(m, ReduceOp::kMax)->wait();
  CHECK(m.to_vector<float>() == std::vector<float>{kInf, -kInf});
  all_ranks_arrive();
}

// The full tensor holds NaN, +Inf, -Inf, -0.0 and a few finite values at known places.
Tensor special_values(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 5) {
      case 0:
        v[i] = kNaN;
        break;
      case 1:
        v[i] = kInf;
        break;
      case 2:
        v[i] = -kInf;
        break;
      case 3:
        v[i] = -0.0f;
        break;
      default:
        v[i] = static_cast<float>(i);
        break;
    }
  }
  return from_vector(v, shape);
}

TEST_CASE("NaN and Inf pass through all_gather bit for bit") {
  auto comm = world_communicator();
  const Tensor mine = special_values({7});
  Tensor out = empty({7 * comm->size()});
  comm->all_gather(out, mine)->wait();
  for (int r = 0; r < comm->size(); ++r) CHECK(equal(out.narrow(0, 7 * r, 7), mine));
  all_ranks_arrive();
}

TEST_CASE("NaN and Inf pass through redistribute bit for bit") {
  const int64_t w = world_size();
  const Shape shape = {2 * w + 1, 3};  // uneven
  const Tensor x = special_values(shape);
  for (const DeviceMesh& mesh : {world_mesh_1d(), world_mesh_2d()}) {
    const int64_t nd = mesh.ndim();
    std::vector<Placements> lists = {Placements(nd, Shard(0)), Placements(nd, Shard(1)),
                                     Placements(nd, Replicate())};
    if (nd == 2) lists.push_back({Shard(1), Shard(0)});
    for (const Placements& src : lists) {
      const DTensor d = distribute_tensor(x, mesh, src);
      for (const Placements& dst : lists) {
        INFO("mesh " << mesh.str() << " " << placements_str(src) << " -> " << placements_str(dst));
        CHECK(equal(d.redistribute(mesh, dst).full_tensor(), x));
      }
    }
    // P(sum) with the specials on the first coordinate and zeros elsewhere: the sum keeps them
    // (NaN + 0 = NaN, Inf + 0 = Inf, -0.0 + 0.0 = +0.0 is the one IEEE change, so compare
    // everything but the -0.0 slots).
    const DTensor p = distribute_tensor(x, mesh, Placements(nd, Partial()));
    const Tensor got = p.full_tensor();
    const std::vector<float> g = got.to_vector<float>();
    const std::vector<float> e = x.to_vector<float>();
    for (size_t i = 0; i < e.size(); ++i) {
      if (std::isnan(e[i])) {
        CHECK(std::isnan(g[i]));
      } else {
        CHECK(g[i] == e[i]);
      }
    }
  }
  all_ranks_arrive();
}

// ---- ranks that diverge (issue 16) -------------------------------------------------------

TEST_CASE("divergence: a rank that skipped a collective makes the next one fail on every rank") {
  const int64_t w = world_size();
  const DeviceMesh mesh = world_mesh_1d();
  const bool last = world_rank() == w - 1;
  const Tensor x = iota({w, 3});
  const DTensor sharded = distribute_tensor(x, mesh, {Shard(0)});
  // The last rank skips full_tensor() (as if it had raised and the program caught it) and goes
  // on to reduce a Partial tensor: its all_reduce meets the others' all_gather. Before the
  // consistency check both returned garbage and the job exited 0.
  const DTensor partial = DTensor::from_local(iota({2, 2}), mesh, {Partial()});
  auto diverge = [&] {
    if (!last) (void)sharded.full_tensor();
    (void)partial.full_tensor();
  };
  REQUIRE_THROWS_WITH(diverge(), Contains("collective mismatch on mesh dim 0 (x)") &&
                                     Contains("rank " + std::to_string(w - 1) + " issued") &&
                                     Contains("all_reduce(sum, float32, 4 elements)"));
  // Every rank stopped at the same (first) collective, and small collectives are compared
  // before any data moves: the ranks are in step and the mesh stays usable.
  all_ranks_arrive();
  REQUIRE(equal(sharded.full_tensor(), x));
  all_ranks_arrive();
}

TEST_CASE("divergence: a large mismatched collective raises before any data moves") {
  const int64_t w = world_size();
  const DeviceMesh mesh = world_mesh_1d();
  const bool last = world_rank() == w - 1;
  const Tensor x = iota({64 * w, 16});
  const DTensor sharded = distribute_tensor(x, mesh, {Shard(0)});
  const DTensor partial = DTensor::from_local(iota({64, 16}), mesh, {Partial()});
  auto diverge = [&] {
    if (last) return (void)partial.full_tensor();
    (void)sharded.full_tensor();
  };
  // 1024 elements per rank: not inline; the data collectives are never posted.
  REQUIRE_THROWS_WITH(
      diverge(), Contains("collective mismatch on mesh dim 0 (x)") && Contains("1024 elements"));
  REQUIRE(equal(sharded.full_tensor(), x));
  all_ranks_arrive();
}

TEST_CASE("numerics: NaN on any rank survives Partial(max) and Partial(min)") {
  const int64_t w = world_size();
  const DeviceMesh mesh = world_mesh_1d();
  for (int nan_rank = 0; nan_rank < w; ++nan_rank) {
    for (int64_t n : {int64_t{3}, int64_t{500}}) {  // reduced inline, and by MPI
      for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
        INFO("NaN on rank " << nan_rank << ", " << n << " elements, " << reduce_op_name(op));
        std::vector<float> v(static_cast<size_t>(n), static_cast<float>(world_rank()));
        if (world_rank() == nan_rank) v[1] = kNaN;
        const DTensor p = DTensor::from_local(from_vector(v, {n}), mesh, {Partial(op)});
        const std::vector<float> got = p.full_tensor().to_vector<float>();
        CHECK(std::isnan(got[1]));
        CHECK(got[0] == (op == ReduceOp::kMax ? static_cast<float>(w - 1) : 0.0f));
      }
    }
  }
  all_ranks_arrive();
}

TEST_CASE("numerics: float16 Partial(avg) and Partial(sum) accumulate in float") {
  const int64_t w = world_size();
  const DeviceMesh mesh = world_mesh_1d();
  for (int64_t n : {int64_t{3}, int64_t{500}}) {
    // Every rank holds 40000: the mean is 40000 (exact in float16), the float16 sum overflows
    // (largest float16: 65504). Was inf.
    const Tensor local = full({n}, 40000.0, TensorOptions(kFloat16));
    const DTensor avg = DTensor::from_local(local, mesh, {Partial(ReduceOp::kAvg)});
    CHECK(equal(avg.full_tensor(), local));
    // The first half of the ranks hold 60000, the others -60000: the sum is 0, but a float16
    // running sum (60000 + 60000 = inf) depends on the order and overflows.
    const double value = world_rank() < w / 2 ? 60000.0 : -60000.0;
    const DTensor sum = DTensor::from_local(full({n}, value, TensorOptions(kFloat16)), mesh,
                                            {Partial(ReduceOp::kSum)});
    CHECK(equal(sum.full_tensor(), zeros({n}, TensorOptions(kFloat16))));
  }
  all_ranks_arrive();
}

}  // namespace
}  // namespace dtensor
