// redistribute under mpirun (1, 2, 4, 8 ranks): every (src, dst) pair of placement lists
// round-trips exactly, and the collectives issued match the plan step for step. Checks use
// CHECK (not REQUIRE) so a failing rank keeps issuing the collectives its peers expect.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/core/redistribute.h"
#include "tests/common/dtensor_test_util.h"

namespace dt = dtensor;
using Catch::Contains;
using dt::test::Ints;

namespace {

using namespace dt::test::placements;

// This rank's local piece of a DTensor with placements `p` whose logical value is `x`, built
// from known partial values computed in float on the host (exact for small integers):
//   all Partials are sum: the first rank of the partial group holds x - (K-1) y, the others y;
//   one P(avg) over n ranks: x + y on all but the last, which holds x - (n-1) y;
//   one P(max) (P(min)): coordinate 0 holds x, the others x - k - 1 (x + k + 1).
dt::Tensor partial_local(const dt::Tensor& x, const dt::Tensor& y, const dt::DeviceMesh& mesh,
                         const dt::Placements& p) {
  dt::Placements shards = p;
  for (dt::Placement& q : shards) {
    if (q.is_partial()) q = R;
  }
  const dt::Tensor xb = dt::test::expected_block(x, mesh, shards);
  if (!mesh.contains_me()) return dt::zeros(dt::Shape(x.dim(), 0), x.dtype());
  const dt::Tensor yb = dt::test::expected_block(y, mesh, shards);
  std::vector<float> xv = xb.to(dt::kFloat32).to_vector<float>();
  const std::vector<float> yv = yb.to(dt::kFloat32).to_vector<float>();
  int64_t group = 1, partial_dims = 0;
  bool first = true;
  dt::ReduceOp op = dt::ReduceOp::kSum;
  int64_t k = 0, n = 1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p[i].is_partial()) continue;
    ++partial_dims;
    group *= mesh.size(static_cast<int64_t>(i));
    k = mesh.get_local_rank(static_cast<int64_t>(i));
    n = mesh.size(static_cast<int64_t>(i));
    first = first && k == 0;
    if (p[i].reduce_op() != dt::ReduceOp::kSum) op = p[i].reduce_op();
  }
  REQUIRE((op == dt::ReduceOp::kSum || partial_dims == 1));
  for (size_t i = 0; i < xv.size(); ++i) {
    switch (op) {
      case dt::ReduceOp::kSum:
        xv[i] = first ? xv[i] - static_cast<float>(group - 1) * yv[i] : yv[i];
        break;
      case dt::ReduceOp::kAvg:
        xv[i] = k < n - 1 ? xv[i] + yv[i] : xv[i] - static_cast<float>(n - 1) * yv[i];
        break;
      case dt::ReduceOp::kMax:
        xv[i] = xv[i] - static_cast<float>(k);
        break;
      case dt::ReduceOp::kMin:
        xv[i] = xv[i] + static_cast<float>(k);
        break;
      default:
        break;
    }
  }
  return dt::from_vector(xv, xb.shape()).to(x.dtype());
}

// Small values for the partial decomposition: y in [-3, 3].
dt::Tensor make_y(const Ints& shape, dt::DType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 5) % 7 - 3);
  return dt::from_vector(v, dt::IntSpan(shape.data(), shape.size())).to(dtype);
}

dt::CollectiveKind collective_of(dt::StepKind k) {
  switch (k) {
    case dt::StepKind::kAllGather:
      return dt::CollectiveKind::kAllGather;
    case dt::StepKind::kAllReduce:
      return dt::CollectiveKind::kAllReduce;
    case dt::StepKind::kReduceScatter:
      return dt::CollectiveKind::kReduceScatter;
    case dt::StepKind::kAllToAll:
      return dt::CollectiveKind::kAllToAll;
    default:
      return dt::CollectiveKind::kBarrier;  // local steps: no collective
  }
}

bool is_local_step(dt::StepKind k) {
  return k == dt::StepKind::kLocalChunk || k == dt::StepKind::kPartition ||
         k == dt::StepKind::kRescalePartial || k == dt::StepKind::kShardToPartial;
}

bool exact_conversion(const Ints& mesh_shape, const dt::Placements& src, const dt::Placements& dst,
                      dt::DType dtype) {
  for (size_t i = 0; i < src.size(); ++i) {
    if (mesh_shape[i] == 1) continue;  // a reduction over one rank: any change is a relabel
    const dt::Placement& a = src[i];
    const dt::Placement& b = dst[i];
    if (!a.is_partial() || !b.is_partial() || a == b) continue;
    const bool sum_avg =
        (a.reduce_op() == dt::ReduceOp::kSum || a.reduce_op() == dt::ReduceOp::kAvg) &&
        (b.reduce_op() == dt::ReduceOp::kSum || b.reduce_op() == dt::ReduceOp::kAvg);
    if (!sum_avg) return false;
    // P(avg) -> P(sum) divides by n: integer division truncates, so the planner refuses it.
    if (a.reduce_op() == dt::ReduceOp::kAvg && !dt::is_floating(dtype)) return false;
  }
  return true;
}

// Runs every (src, dst) pair over `choices` on `mesh_shape` for the shapes and dtypes given.
int64_t run_pairs(const Ints& mesh_shape, const std::vector<dt::Placement>& choices,
                  const std::vector<Ints>& shapes, const std::vector<dt::DType>& dtypes) {
  const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
  const auto lists = dt::test::all_placements(choices, mesh_shape.size());
  int64_t pairs = 0;
  for (const Ints& shape : shapes) {
    for (dt::DType dtype : dtypes) {
      const dt::Tensor x = dt::test::make_data(shape, dtype, 0);
      const dt::Tensor y = make_y(shape, dtype);
      for (const dt::Placements& src : lists) {
        const dt::Tensor local = partial_local(x, y, mesh, src);
        const dt::DTensor a = dt::DTensor::from_local(local, mesh, src, false,
                                                      dt::IntSpan(shape.data(), shape.size()));
        const dt::Tensor before = local.clone();
        for (const dt::Placements& dst : lists) {
          INFO(dt::test::describe(mesh_shape, shape, dtype)
               << " " << dt::placements_str(src) << " -> " << dt::placements_str(dst));
          if (!exact_conversion(mesh_shape, src, dst, dtype)) {
            bool has_plan = true;
            try {
              (void)dt::plan_redistribute(a.spec(), a.spec().with_placements(dst));
            } catch (const dt::Error& e) {
              has_plan = false;
              CHECK_THAT(e.what(), Contains("[redistribute]") && Contains("no exact"));
            }
            CHECK_FALSE(has_plan);
            CHECK(dt::redistribute_cost(a.spec(), a.spec().with_placements(dst)) ==
                  std::numeric_limits<double>::infinity());
            continue;
          }
          const dt::RedistributePlan plan =
              *dt::plan_redistribute(a.spec(), a.spec().with_placements(dst));
          dt::CommDebugMode comm;
          const dt::DTensor b = a.redistribute(mesh, dst);
          std::array<int64_t, dt::kNumCollectiveKinds> expected{};
          int64_t collectives = 0;
          for (const dt::RedistributeStep& s : plan.steps) {
            if (is_local_step(s.kind)) continue;
            ++expected[static_cast<int>(collective_of(s.kind))];
            ++collectives;
          }
          if (mesh.contains_me()) {
            CHECK(comm.total_count() == collectives);
            for (int kind = 0; kind < dt::kNumCollectiveKinds; ++kind) {
              CHECK(comm.count(static_cast<dt::CollectiveKind>(kind)) == expected[kind]);
            }
            CHECK(b.to_local().shape() == b.spec().local_shard().shape);
            bool dst_partial = false;
            for (const dt::Placement& q : dst) dst_partial = dst_partial || q.is_partial();
            if (!dst_partial) {
              CHECK(dt::equal(b.to_local(), dt::test::expected_block(x, mesh, dst)));
            } else {
              CHECK(dt::equal(b.full_tensor(), x));
            }
            CHECK(dt::equal(a.to_local(), before));  // the source is never modified
          } else {
            CHECK(comm.total_count() == 0);
            CHECK(b.to_local().numel() == 0);
          }
          ++pairs;
        }
      }
    }
  }
  return pairs;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("redistribute: every pair on a 1-d mesh, with S(-1) and Partial(sum/avg/max/min)",
          "[redistribute]") {
  const int w = dt::world_size();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t pairs =
      run_pairs({w}, {R, S0, S1, dt::Shard(-1), Psum, Pavg, Pmax, Pmin},
                {{w * 3 + 1, 5}, {0, 3}, {2, 7, 3}}, {dt::kFloat32, dt::kInt64, dt::kBFloat16});
  CHECK(pairs > 0);
  if (dt::world_rank() == 0)
    std::cerr << "1-d pairs: " << pairs << " in " << seconds_since(t0) << " s\n";
}

TEST_CASE("redistribute: every pair on 2-d meshes", "[redistribute]") {
  const int w = dt::world_size();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t pairs = 0;
  for (const Ints& mesh : dt::test::meshes_for_world(w)) {
    if (mesh.size() != 2) continue;
    pairs += run_pairs(mesh, {R, S0, S1, Psum}, {{w * 3 + 1, 5}, {0, 3}, {2, 7, 3}},
                       {dt::kFloat32, dt::kInt64, dt::kBFloat16});
  }
  CHECK(pairs > 0);
  if (dt::world_rank() == 0)
    std::cerr << "2-d pairs: " << pairs << " in " << seconds_since(t0) << " s\n";
}

TEST_CASE("redistribute: every pair on 3-d meshes (float32)", "[redistribute]") {
  const int w = dt::world_size();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t pairs = 0;
  for (const Ints& mesh : dt::test::meshes_for_world(w)) {
    if (mesh.size() != 3) continue;
    // All pairs on three shapes cost ~45 s at 8 oversubscribed ranks; dtypes are covered on
    // the 1-d and 2-d meshes.
    pairs +=
        run_pairs(mesh, {R, S0, S1, Psum}, {{w * 3 + 1, 5}, {0, 3}, {2, 7, 3}}, {dt::kFloat32});
  }
  if (dt::world_rank() == 0)
    std::cerr << "3-d pairs: " << pairs << " in " << seconds_since(t0) << " s\n";
}

TEST_CASE("redistribute: collective counts of the basic transitions", "[redistribute]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({w * 2 + 1, 4}, dt::kFloat32);
  const dt::DTensor s = dt::distribute_tensor(x, mesh, {S0});
  // A mesh of one rank issues nothing: every change of placement is a relabel there.
  const int64_t one = w > 1 ? 1 : 0;
  {
    dt::CommDebugMode comm;
    const dt::DTensor r = s.redistribute(mesh, {R});
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == one);
    CHECK(comm.total_count() == one);
    CHECK(dt::equal(r.to_local(), x));
  }
  const dt::DTensor r = dt::distribute_tensor(x, mesh, {R});
  {
    dt::CommDebugMode comm;
    const dt::DTensor s1 = r.redistribute({S1});
    CHECK(comm.total_count() == 0);
    CHECK(dt::equal(s1.to_local(), dt::test::expected_block(x, mesh, {S1})));
  }
  const dt::DTensor p = dt::distribute_tensor(x, mesh, {Psum});
  {
    dt::CommDebugMode comm;
    const dt::DTensor pr = p.redistribute({R});
    CHECK(comm.count(dt::CollectiveKind::kAllReduce) == one);
    CHECK(comm.total_count() == one);
    CHECK(dt::equal(pr.to_local(), x));
  }
  {
    dt::CommDebugMode comm;
    const dt::DTensor ps = p.redistribute({S0});
    CHECK(comm.count(dt::CollectiveKind::kReduceScatter) == one);
    CHECK(comm.total_count() == one);
    CHECK(dt::equal(ps.to_local(), dt::test::expected_block(x, mesh, {S0})));
  }
  {
    dt::CommDebugMode comm;
    const dt::DTensor a2a = s.redistribute({S1});
    CHECK(comm.count(dt::CollectiveKind::kAllToAll) == one);
    CHECK(comm.total_count() == one);
    CHECK(dt::equal(a2a.to_local(), dt::test::expected_block(x, mesh, {S1})));
  }
  {
    dt::CommDebugMode comm;
    CHECK(dt::equal(s.redistribute({S0}).to_local(), s.to_local()));  // no-op
    CHECK(comm.total_count() == 0);
  }
}

// Large enough (above kGatherIntoDimMinBytes, 256 KB) for the executor's direct placement of a
// gather along a non-leading dim (Communicator::all_gather_into_dim): equal to the
// single-device slice, uneven and empty shards included, one all_gather per mesh dim. Values
// are distinct integers (exact in float32) so that a misplaced element shows.
TEST_CASE("redistribute: large S(1)->R gathers straight into place", "[redistribute]") {
  const int w = dt::world_size();
  auto iota = [](const Ints& shape) {
    std::vector<float> v(static_cast<size_t>(shape[0] * shape[1]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return dt::from_vector(v, dt::IntSpan(shape.data(), shape.size()));
  };
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  // Uneven columns; then fewer columns than ranks (the last rank's shard is empty).
  const int64_t cols = std::max(1, w - 1);
  for (const Ints& shape : {Ints{513, 257}, Ints{(int64_t{1} << 20) / 4 / cols + 1, cols}}) {
    INFO("shape " << shape[0] << " x " << shape[1]);
    const dt::Tensor x = iota(shape);
    const dt::DTensor s = dt::distribute_tensor(x, mesh, {S1});
    dt::CommDebugMode comm;
    const dt::DTensor r = s.redistribute({R});
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == (w > 1 ? 1 : 0));
    CHECK(dt::equal(r.to_local(), x));
  }
  if (w == 4) {
    // 2-d mesh: [S(0), S(1)] -> [S(0), R] gathers dim 1 on mesh dim 1 only.
    const dt::DeviceMesh mesh2 = dt::test::make_mesh({2, 2});
    const dt::Tensor x = iota({513, 513});
    const dt::DTensor s = dt::distribute_tensor(x, mesh2, {S0, S1});
    CHECK(
        dt::equal(s.redistribute({S0, R}).to_local(), dt::test::expected_block(x, mesh2, {S0, R})));
    CHECK(dt::equal(s.redistribute({R, R}).to_local(), x));
  }
}

TEST_CASE("redistribute: Partial(avg) over uneven shards", "[redistribute]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const Ints shape = {w * 3 + 1, 3};
  const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
  const dt::Tensor local = partial_local(x, make_y(shape, dt::kFloat32), mesh, {Pavg});
  const dt::DTensor p = dt::DTensor::from_local(local, mesh, {Pavg}, true);
  CHECK(dt::equal(p.redistribute({S0}).to_local(), dt::test::expected_block(x, mesh, {S0})));
  CHECK(dt::equal(p.full_tensor(), x));
  // avg -> sum -> avg round trip.
  CHECK(dt::equal(p.redistribute({Psum}).redistribute({Pavg}).full_tensor(), x));
}

TEST_CASE("redistribute_local matches the DTensor form", "[redistribute]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({3, w * 2 + 1}, dt::kInt64);
  const dt::DTensor s = dt::distribute_tensor(x, mesh, {S1});
  const dt::Tensor r =
      dt::redistribute_local(s.to_local(), s.spec(), s.spec().with_placements({R}));
  CHECK(dt::equal(r, x));
  REQUIRE_THROWS_WITH(dt::redistribute_local(dt::zeros({1, 1}, dt::kInt64), s.spec(),
                                             s.spec().with_placements({R})),
                      Contains("[redistribute]") && Contains("local shard"));
}

TEST_CASE("redistribute: non-contiguous inputs, held results and repeated calls",
          "[redistribute]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  for (const Ints& shape : {Ints{w * 2 + 1, w * 3 + 2}, Ints{w * 2, w * 4}, Ints{0, w}}) {
    INFO("shape " << dt::shape_str(dt::IntSpan(shape.data(), shape.size())) << ", world " << w);
    const dt::IntSpan global(shape.data(), shape.size());
    const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
    for (const dt::Placement& src : {S0, S1}) {
      // A transposed (non-contiguous) local shard holding the right values.
      const dt::Tensor block = dt::test::expected_block(x, mesh, {src});
      const dt::Tensor local = block.transpose(0, 1).contiguous().transpose(0, 1);
      REQUIRE(dt::equal(local, block));
      if (local.size(0) > 1 && local.size(1) > 1) REQUIRE_FALSE(local.is_contiguous());
      const dt::DTensor a = dt::DTensor::from_local(local, mesh, {src}, false, global);
      const dt::Tensor before = local.clone();
      for (const dt::Placement& dst : {R, S0, S1}) {
        INFO(src.str() << " -> " << dst.str());
        CHECK(
            dt::equal(a.redistribute({dst}).to_local(), dt::test::expected_block(x, mesh, {dst})));
      }
      CHECK(dt::equal(local, before));
    }
    // Partial(sum) with a non-contiguous local: P -> R and P -> S(1) leave it unchanged and
    // the result does not share its memory.
    const dt::Tensor y = make_y(shape, dt::kFloat32);
    const dt::Tensor p_local = partial_local(x, y, mesh, {Psum});
    const dt::Tensor p_nc = p_local.transpose(0, 1).contiguous().transpose(0, 1);
    const dt::DTensor p = dt::DTensor::from_local(p_nc, mesh, {Psum}, false, global);
    const dt::Tensor p_before = p_nc.clone();
    const dt::DTensor pr = p.redistribute({R});
    CHECK(dt::equal(pr.to_local(), x));
    // (Over one rank P -> R is a relabel: the result is the input's memory, as in PyTorch.)
    if (x.numel() > 0 && w > 1) CHECK(pr.to_local().data_ptr() != p_nc.data_ptr());
    CHECK(dt::equal(p.redistribute({S1}).to_local(), dt::test::expected_block(x, mesh, {S1})));
    CHECK(dt::equal(p_nc, p_before));
  }
  // Results of earlier calls stay intact while later calls reuse the executor's staging
  // buffers (S(1) -> R copies out of a staging buffer; S(0) -> S(1) packs and unpacks).
  const Ints shape = {w * 4 + 3, w * 2 + 1};
  const dt::IntSpan global(shape.data(), shape.size());
  std::vector<dt::Tensor> xs, gathered, swapped;
  for (int salt = 0; salt < 4; ++salt) {
    xs.push_back(dt::test::make_data(shape, dt::kFloat32, salt));
    const dt::DTensor s1 = dt::distribute_tensor(xs.back(), mesh, {S1}, std::nullopt);
    gathered.push_back(s1.redistribute({R}).to_local());
    const dt::DTensor s0 = dt::distribute_tensor(xs.back(), mesh, {S0}, std::nullopt);
    swapped.push_back(s0.redistribute({S1}).to_local());
  }
  for (int salt = 0; salt < 4; ++salt) {
    INFO("salt " << salt);
    CHECK(dt::equal(gathered[salt], xs[salt]));
    CHECK(dt::equal(swapped[salt], dt::test::expected_block(xs[salt], mesh, {S1})));
  }
}

// A DTensor the caller gives up (a temporary, or std::move) is reduced in its own memory when
// nothing else holds that memory; a copy, a shared tensor or from_blob memory keeps its values.
TEST_CASE("redistribute: a DTensor given up is reduced in its own memory", "[redistribute]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  for (const Ints& shape : {Ints{w * 2 + 1, 3}, Ints{w, w * 2}, Ints{0, 3}}) {
    INFO("shape " << dt::shape_str(dt::IntSpan(shape.data(), shape.size())) << ", world " << w);
    const dt::IntSpan global(shape.data(), shape.size());
    const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
    const dt::Tensor p_local = partial_local(x, make_y(shape, dt::kFloat32), mesh, {Psum});
    dt::DTensor p = dt::DTensor::from_local(p_local.clone(), mesh, {Psum}, false, global);
    const void* mem = p.to_local().data_ptr();
    const dt::DTensor r = std::move(p).redistribute({R});
    CHECK_FALSE(p.defined());  // NOLINT(bugprone-use-after-move): the moved-from state is API
    CHECK(dt::equal(r.to_local(), x));
    if (x.numel() > 0) CHECK(r.to_local().data_ptr() == mem);
    // P -> S(1) is one reduce-scatter into a fresh output (nothing to reuse).
    CHECK(dt::equal(dt::DTensor::from_local(p_local.clone(), mesh, {Psum}, false, global)
                        .redistribute({S1})
                        .to_local(),
                    dt::test::expected_block(x, mesh, {S1})));
    // A rejected call leaves the DTensor as it was.
    dt::DTensor kept = dt::DTensor::from_local(p_local.clone(), mesh, {Psum}, false, global);
    CHECK_THROWS_WITH(std::move(kept).redistribute({dt::Shard(5)}), Contains("redistribute"));
    CHECK(kept.defined());  // NOLINT(bugprone-use-after-move): not moved, the call threw first
    CHECK(dt::equal(kept.to_local(), p_local));
    // Held elsewhere: a copy of the DTensor, the caller's tensor, the caller's own memory.
    dt::DTensor q = dt::DTensor::from_local(p_local.clone(), mesh, {Psum}, false, global);
    const dt::DTensor copy = q;
    CHECK(dt::equal(std::move(q).redistribute({R}).to_local(), x));
    CHECK(dt::equal(copy.to_local(), p_local));
    const dt::Tensor shared = p_local.clone();
    CHECK(dt::equal(
        dt::DTensor::from_local(shared, mesh, {Psum}, false, global).redistribute({R}).to_local(),
        x));
    CHECK(dt::equal(shared, p_local));
    std::vector<float> mine = p_local.contiguous().to_vector<float>();
    const dt::Tensor blob = dt::from_blob(mine.data(), p_local.shape(), dt::kFloat32);
    CHECK(dt::equal(
        dt::DTensor::from_local(blob, mesh, {Psum}, false, global).redistribute({R}).to_local(),
        x));
    CHECK(dt::equal(blob, p_local));
  }
  // Plans of several steps on a 2x2 mesh, the in-place all-reduce first: the later steps see
  // the reduced values, and a held copy of the source keeps its own.
  if (w == 4) {
    const dt::DeviceMesh mesh2 = dt::test::make_mesh({2, 2});
    const Ints shape{9, 6};
    const dt::IntSpan global(shape.data(), shape.size());
    const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
    const dt::Tensor y = make_y(shape, dt::kFloat32);
    for (const auto& [src, dst] : {std::pair<dt::Placements, dt::Placements>{{Psum, Psum}, {R, S0}},
                                   {{Psum, S0}, {R, R}},
                                   {{Psum, S1}, {R, S0}}}) {
      INFO(dt::placements_str(src) << " -> " << dt::placements_str(dst));
      const dt::Tensor local = partial_local(x, y, mesh2, src);
      dt::DTensor a = dt::DTensor::from_local(local.clone(), mesh2, src, false, global);
      const dt::DTensor held = dt::DTensor::from_local(local.clone(), mesh2, src, false, global);
      dt::DTensor b = held;
      const dt::Tensor want = dt::test::expected_block(x, mesh2, dst);
      CHECK(dt::equal(std::move(a).redistribute(dst).to_local(), want));
      CHECK(dt::equal(std::move(b).redistribute(dst).to_local(), want));
      CHECK(dt::equal(held.to_local(), local));
    }
  }
}

// Several mesh dims to R the same way: one collective over their flattened communicator
// (DeviceMesh::flattened_communicator), equal to the full tensor on even, uneven and empty
// shards; the communicator is created once, by its group alone, and reused.
TEST_CASE("redistribute: flattened mesh dims move with one collective", "[redistribute]") {
  const int w = dt::world_size();
  if (w != 4 && w != 8) {
    // No two mesh dims of size > 1: a size-1 dim is relabelled, never flattened.
    const dt::DeviceMesh mesh = dt::test::make_mesh({w, 1});
    const dt::Tensor x = dt::test::make_data({5, 3}, dt::kFloat32);
    const dt::DTensor a = dt::distribute_tensor(x, mesh, {S0, S1});
    const dt::RedistributePlan plan =
        *dt::plan_redistribute(a.spec(), a.spec().with_placements({R, R}));
    for (const dt::RedistributeStep& s : plan.steps) CHECK_FALSE(s.is_flattened());
    CHECK(dt::equal(a.redistribute({R, R}).to_local(), x));
    return;
  }
  const Ints mesh_shape = w == 4 ? Ints{2, 2} : Ints{2, 2, 2};
  const dt::DeviceMesh mesh = dt::test::make_mesh(mesh_shape);
  const size_t nd = mesh_shape.size();
  // All sharded (different tensor dims, the same one nested, with uneven and empty shards).
  const dt::Placement last = dt::Shard(static_cast<int64_t>(nd) - 1);
  dt::Placements mixed = {S0, S1};
  dt::Placements nested = {S0, S0};
  if (nd == 3) {
    mixed.push_back(last);
    nested.push_back(S0);
  }
  const dt::Placements all_r(nd, R);
  for (const Ints& shape : {Ints{8, 8, 8}, Ints{5, 3, 7}, Ints{1, 9, 2}, Ints{0, 4, 3}}) {
    const dt::Tensor x = dt::test::make_data(Ints(shape.begin(), shape.begin() + 3), dt::kFloat32);
    for (const dt::Placements& src : {mixed, nested}) {
      INFO(dt::shape_str(x.shape()) << " " << dt::placements_str(src));
      const dt::DTensor a = dt::distribute_tensor(x, mesh, src);
      const dt::RedistributePlan plan =
          *dt::plan_redistribute(a.spec(), a.spec().with_placements(all_r));
      INFO(plan.str());
      REQUIRE(plan.steps.size() == 1);
      CHECK(plan.steps[0].flat_dims.size() == nd);
      dt::CommDebugMode comm;
      const dt::DTensor r = a.redistribute(all_r);
      CHECK(comm.total_count() == 1);
      CHECK(comm.count(dt::CollectiveKind::kAllGather) == 1);
      CHECK(dt::equal(r.to_local(), x));
      CHECK(dt::equal(a.to_local(), dt::test::expected_block(x, mesh, src)));  // input intact
    }
  }
  // All the same Partial: one all-reduce over the whole mesh.
  const dt::Tensor x = dt::test::make_data({6, 5}, dt::kFloat32);
  for (const dt::Placement& p : {Psum, Pmax, Pavg}) {
    INFO(p.str());
    const dt::Placements src(nd, p);
    // Rank-dependent locals whose reduction over the mesh is x: x on every rank for max and
    // avg, x on coordinate 0 and zeros elsewhere for sum.
    dt::Tensor local = x.clone();
    if (p == Psum && mesh.get_coordinate() != dt::Shape(nd, 0)) local = dt::zeros_like(x);
    const dt::DTensor a = dt::DTensor::from_local(local, mesh, src, false);
    dt::CommDebugMode comm;
    const dt::DTensor r = a.redistribute(all_r);
    CHECK(comm.total_count() == 1);
    CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 1);
    CHECK(dt::equal(r.to_local(), x));
  }
  // The flattened communicator spans the mesh in row-major order and is shared.
  std::vector<int64_t> dims(nd);
  for (size_t d = 0; d < nd; ++d) dims[d] = static_cast<int64_t>(nd - 1 - d);  // any order
  const dt::CommunicatorPtr flat = mesh.flattened_communicator(dims);
  REQUIRE(flat != nullptr);
  CHECK(flat->size() == w);
  CHECK(flat->rank() == dt::world_rank());
  CHECK(flat == mesh.flattened_communicator(dims));
  CHECK(mesh.flattened_communicator({0}) == mesh.communicator(0));
  if (nd == 3) {
    // A 2-d submesh's flattened group is a slice of the 3-d mesh, created by that slice alone:
    // only the ranks with coordinate 0 on mesh dim 0 redistribute (the others wait at the
    // barrier), which would hang if creating it involved every rank.
    const dt::DeviceMesh sub = mesh.submesh({1, 2});
    if (mesh.get_coordinate()[0] == 0) {
      const dt::Tensor y = dt::test::make_data({7, 6}, dt::kInt64);
      const dt::DTensor s = dt::distribute_tensor(y, sub, {S0, S1});
      dt::CommDebugMode comm;
      CHECK(dt::equal(s.redistribute({R, R}).to_local(), y));
      CHECK(comm.total_count() == 1);
      const dt::CommunicatorPtr g = sub.flattened_communicator({0, 1});
      REQUIRE(g != nullptr);
      CHECK(g->size() == 4);
      CHECK(g == mesh.flattened_communicator({1, 2}));
    }
    dt::world_communicator()->barrier()->wait();
  }
  // Errors name the method.
  REQUIRE_THROWS_WITH(mesh.flattened_communicator({}),
                      Contains("[DeviceMesh]") && Contains("empty"));
  REQUIRE_THROWS_WITH(mesh.flattened_communicator({0, 0}), Contains("twice"));
}

// Shard -> Shard: one all-to-all (over the flattened communicator when several mesh dims
// move), equal to the single-device blocks on even, uneven and empty shards, both with the
// pieces placed by MPI datatypes (all_to_all_regions, the CPU default) and packed into padded
// blocks (the CUDA path: the input sent as it is or packed, the result received in place or
// unpacked).
TEST_CASE("redistribute: Shard -> Shard moves with one all-to-all, placed or packed",
          "[redistribute]") {
  const int w = dt::world_size();
  const dt::Placement S2 = dt::Shard(2);
  struct RegionsOn {  // restores the default whatever happens
    ~RegionsOn() { dt::MpiCommunicator::set_regions_enabled(true); }
  } restore;
  for (const bool regions : {true, false}) {
    dt::MpiCommunicator::set_regions_enabled(regions);
    INFO((regions ? "placed by regions" : "packed"));
    // One mesh dim (uneven, empty and non-leading dims).
    const dt::DeviceMesh line = dt::test::make_mesh({w});
    for (const Ints& shape :
         {Ints{2 * w, 3 * w, 2}, Ints{w + 1, 2 * w - 1, 3}, Ints{0, w, 2}, Ints{w, 1, 2}}) {
      const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
      for (const auto& [from, to] :
           {std::pair{S0, S1}, std::pair{S1, S0}, std::pair{S2, S0}, std::pair{S1, S2}}) {
        INFO(dt::shape_str(x.shape()) << ": " << from.str() << " -> " << to.str());
        const dt::DTensor a = dt::distribute_tensor(x, line, {from});
        dt::CommDebugMode comm;
        const dt::DTensor r = a.redistribute({to});
        CHECK(comm.count(dt::CollectiveKind::kAllToAll) == (w > 1 ? 1 : 0));
        CHECK(comm.total_count() == comm.count(dt::CollectiveKind::kAllToAll));
        CHECK(dt::equal(r.to_local(), dt::test::expected_block(x, line, {to})));
        CHECK(dt::equal(a.to_local(), dt::test::expected_block(x, line, {from})));
      }
    }
    if (w != 4 && w != 8) continue;  // several mesh dims of size > 1 need 4 or 8 ranks
    struct Pair {
      Ints mesh;
      dt::Placements src, dst;
      Ints flat;  // the group the plan exchanges over
    };
    std::vector<Pair> pairs;
    if (w == 4) {
      pairs = {{{2, 2}, {S0, S0}, {S1, S1}, {0, 1}},  // packed, received in place
               {{2, 2}, {S1, S1}, {S0, S0}, {0, 1}},  // sent as it is, unpacked
               {{2, 2}, {S0, S1}, {S1, S0}, {0, 1}},
               {{2, 2}, {S0, S0}, {S1, S0}, {0, 1}},
               {{2, 2}, {S2, S0}, {S0, S2}, {0, 1}}};
    } else {
      pairs = {{{2, 2, 2}, {S0, S0, S0}, {S1, S1, S1}, {0, 1, 2}},
               {{2, 2, 2}, {S1, S0, S0}, {S1, S1, S1}, {1, 2}},
               {{2, 2, 2}, {S0, Psum, S1}, {S1, Psum, S0}, {0, 2}},
               {{4, 2}, {S0, S2}, {S2, S1}, {0, 1}},
               {{2, 4}, {S0, S0}, {S1, S2}, {0, 1}}};
    }
    for (const Pair& pr : pairs) {
      const dt::DeviceMesh mesh = dt::test::make_mesh(pr.mesh);
      for (const Ints& shape :
           {Ints{8, 8, 8}, Ints{5, 3, 7}, Ints{1, 9, 2}, Ints{0, 4, 3}, Ints{16, 16, 1}}) {
        const dt::Tensor x = dt::test::make_data(shape, dt::kFloat32);
        INFO(dt::shape_str(x.shape())
             << " on " << dt::shape_str(pr.mesh) << ": " << dt::placements_str(pr.src) << " -> "
             << dt::placements_str(pr.dst));
        // Partial dims hold x on coordinate 0 and zeros elsewhere (their sum is x).
        dt::Tensor local = dt::test::expected_block(x, mesh, pr.src);
        bool zero = false;
        for (size_t d = 0; d < pr.src.size(); ++d) {
          zero = zero || (pr.src[d].is_partial() && mesh.get_coordinate()[d] != 0);
        }
        if (zero) local = dt::zeros_like(local);
        const dt::DTensor a = dt::DTensor::from_local(local, mesh, pr.src, false, x.shape());
        const dt::RedistributePlan plan =
            *dt::plan_redistribute(a.spec(), a.spec().with_placements(pr.dst));
        INFO(plan.str());
        REQUIRE(plan.steps.size() == 1);
        CHECK(plan.steps[0].kind == dt::StepKind::kAllToAll);
        CHECK(Ints(plan.steps[0].flat_dims.begin(), plan.steps[0].flat_dims.end()) == pr.flat);
        const dt::Tensor before = a.to_local().clone();
        dt::CommDebugMode comm;
        const dt::DTensor r = a.redistribute(pr.dst);
        CHECK(comm.total_count() == 1);
        CHECK(comm.count(dt::CollectiveKind::kAllToAll) == 1);
        dt::Tensor expected = dt::test::expected_block(x, mesh, pr.dst);
        if (zero) expected = dt::zeros_like(expected);
        CHECK(dt::equal(r.to_local(), expected));
        CHECK(dt::equal(r.full_tensor(), x));
        CHECK(dt::equal(a.to_local(), before));  // input intact
        // And back (the reverse exchange), through the same mechanism.
        CHECK(dt::equal(r.redistribute(pr.src).to_local(), local));
      }
    }
  }
}

// redistribute(..., async_op=true): returns at once with a pending DTensor whose collectives
// run on the communication thread; the first use waits; the result, the CommDebugMode counts
// and the gradient equal the blocking form's; a pending result dropped unused still completes.
TEST_CASE("redistribute: async_op returns a pending DTensor waited on first use",
          "[redistribute][async]") {
  const int w = dt::world_size();
  const dt::DeviceMesh mesh = dt::test::make_mesh({w});
  const dt::Tensor x = dt::test::make_data({w * 3 + 1, 5}, dt::kFloat32);
  const dt::DTensor s = dt::distribute_tensor(x, mesh, {S0});
  for (const dt::Placements& dst : {dt::Placements{R}, dt::Placements{S1}}) {
    INFO(dt::placements_str(dst));
    dt::CommDebugMode comm;
    const dt::DTensor a = s.redistribute(dst, /*async_op=*/true);
    CHECK(a.placements() == dst);
    CHECK(a.to_local().shape() == a.spec().local_shard().shape);  // waits
    CHECK_FALSE(a.is_pending());
    CHECK(dt::equal(a.to_local(), dt::test::expected_block(x, mesh, dst)));
    CHECK(comm.total_count() == (w > 1 ? 1 : 0));  // counted once waited
  }
  // Partial sources, and a chain of pending results (the second waits for the first).
  const dt::DTensor p = dt::DTensor::from_local(
      w == 1 || dt::world_rank() == 0 ? x : dt::zeros_like(x), mesh, {Psum}, false);
  const dt::DTensor pr = p.redistribute({S1}, true).redistribute({R}, true);
  CHECK(dt::equal(pr.full_tensor(), x));
  if (w > 1 && dt::async_threaded()) {
    // Observable: with the communication thread held by an earlier task, the result stays
    // pending until it is released (no collective is issued on this thread meanwhile).
    std::promise<void> go;
    std::shared_future<void> released = go.get_future().share();
    dt::WorkPtr blocker = dt::submit_async([released] { released.wait(); });
    const dt::DTensor a = s.redistribute({R}, true);
    CHECK(a.is_pending());
    CHECK_FALSE(blocker->is_completed());
    go.set_value();
    CHECK(dt::equal(a.to_local(), x));
    CHECK(blocker->is_completed());
  }
  {
    const dt::DTensor dropped = s.redistribute({R}, true);  // never used
  }
  // A blocking collective afterwards pairs up on every rank (tasks ran first, in order).
  dt::world_communicator()->barrier()->wait();
}
