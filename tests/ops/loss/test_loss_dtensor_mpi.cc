// DTensor cross_entropy (mpirun at 1, 2 and 4 ranks): for every logits placement (R, S(d),
// P(sum)) and target placement (R, S(0)) on a 1-D and a 2-D mesh, uneven sizes, each
// reduction, ignored targets and label smoothing, the result equals the op on the full
// tensors. Loss parallel: class-sharded logits are never all-gathered (CommDebugMode).
#include <catch2/catch.hpp>

#include <cmath>

#include "collectives/comm_debug.h"
#include "ops/loss/loss.h"
#include "tests/ops/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Reduction;
using dt::Shard;
using dt::Tensor;

namespace {

// Targets over every class, with every 4th one ignored (-100).
Tensor targets(const tt::Ints& shape, int64_t classes) {
  const int64_t n = dt::shape_numel(dt::IntSpan(shape.data(), shape.size()));
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % 4 == 3 ? -100 : (i * 3 + 1) % classes;
  return dt::from_vector<int64_t>(v, dt::IntSpan(shape.data(), shape.size()));
}

}  // namespace

TEST_CASE("dtensor cross_entropy equals the full-tensor op for every placement") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 3 + 1, c = w * 2 + 1;
  struct Case {
    tt::Ints logits, target;
  };
  for (const Case& k : {Case{{n, c}, {n}}, Case{{n, c, 2}, {n, 2}}, Case{{c}, {}}}) {
    const Tensor x = tt::det_input(k.logits, 3, -3.0, 0.65);
    const Tensor tg = targets(k.target, c);
    for (const dt::DeviceMesh& mesh : tt::family_meshes()) {
      const int64_t nd = static_cast<int64_t>(k.logits.size());
      for (const Placements& px : tt::all_placements(tt::shard_choices(nd), mesh.ndim())) {
        for (const Placements& pt :
             tt::all_placements(tt::shard_choices(k.target.empty() ? 0 : 1, false), mesh.ndim())) {
          const DTensor dx = dt::distribute_tensor(x, mesh, px, std::nullopt);
          const DTensor dtg = dt::distribute_tensor(tg, mesh, pt, std::nullopt);
          for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
            for (double s : {0.0, 0.1}) {
              INFO(tt::describe(mesh, {px}, k.logits)
                   << " target " << dt::placements_str(pt) << " reduction " << static_cast<int>(r)
                   << " smoothing " << s);
              const Tensor want = dt::cross_entropy(x, tg, r, -100, s);
              const DTensor got = dt::cross_entropy(dx, dtg, r, -100, s);
              CHECK(tt::same_values(got.full_tensor(), want, 1e-5));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("dtensor cross_entropy: loss parallel on class-sharded logits never all-gathers") {
  const int64_t w = dt::world_size();
  const int64_t n = w * 2 + 1, c = w * 5 + 3;
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({n, c}, 1, -4.0, 0.8);
  const Tensor tg = targets({n}, c);
  for (dt::Placement p : {Shard(1), Shard(-1)}) {
    const DTensor dx = dt::distribute_tensor(x, mesh, {p}, std::nullopt);
    const DTensor dtg = dt::distribute_tensor(tg, mesh, {dt::Replicate()}, std::nullopt);
    for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
      dt::CommDebugMode comm;
      const DTensor loss = dt::cross_entropy(dx, dtg, r, -100, 0.2);
      CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
      CHECK(comm.count(dt::CollectiveKind::kAllToAll) == 0);
      if (w > 1) CHECK(comm.count(dt::CollectiveKind::kAllReduce) == 2);  // max, then sums
      INFO(comm.str());
      CHECK(loss.placements() == Placements{dt::Replicate()});
      CHECK(tt::same_values(loss.full_tensor(), dt::cross_entropy(x, tg, r, -100, 0.2), 1e-5));
    }
  }
  // Batch-sharded on one mesh dim and class-sharded on the other.
  if (w % 2 == 0) {
    const dt::DeviceMesh m2 = dt::init_device_mesh(dt::kCPU, {2, w / 2});
    const DTensor dx = dt::distribute_tensor(x, m2, {Shard(0), Shard(1)}, std::nullopt);
    const DTensor dtg = dt::distribute_tensor(tg, m2, {Shard(0), dt::Replicate()}, std::nullopt);
    dt::CommDebugMode comm;
    const DTensor loss = dt::cross_entropy(dx, dtg, Reduction::kNone);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
    CHECK(loss.placements() == Placements{Shard(0), dt::Replicate()});
    const DTensor sum = dt::cross_entropy(dx, dtg, Reduction::kSum);
    CHECK(sum.placements() == Placements{dt::Partial(), dt::Replicate()});
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
    CHECK(tt::same_values(loss.full_tensor(), dt::cross_entropy(x, tg, Reduction::kNone)));
    CHECK(tt::same_values(sum.full_tensor(), dt::cross_entropy(x, tg, Reduction::kSum)));
  }
}

TEST_CASE("dtensor cross_entropy errors name the op and the argument") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const DTensor dx = dt::distribute_tensor(tt::det_input({w, 4}), mesh, {Shard(1)}, std::nullopt);
  const DTensor good =
      dt::distribute_tensor(targets({w}, 4), mesh, {dt::Replicate()}, std::nullopt);
  const DTensor wrong_shape =
      dt::distribute_tensor(targets({w + 1}, 4), mesh, {dt::Replicate()}, std::nullopt);
  const DTensor out_of_range = dt::distribute_tensor(
      dt::full({w}, 9, dt::TensorOptions(dt::kInt64)), mesh, {dt::Replicate()}, std::nullopt);
  const DTensor float_target =
      dt::distribute_tensor(tt::det_input({w}), mesh, {dt::Replicate()}, std::nullopt);
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, wrong_shape), Catch::Contains("argument target"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, out_of_range), Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, float_target), Catch::Contains("[cross_entropy]"));
  REQUIRE_THROWS_WITH(dt::cross_entropy(dx, good, Reduction::kMean, -100, 1.5),
                      Catch::Contains("label_smoothing"));
  REQUIRE_THROWS_AS(dt::cross_entropy(DTensor(), good), dt::Error);
}

TEST_CASE("dtensor cross_entropy: a bad target in one rank's batch shard raises on every rank") {
  const int64_t w = dt::world_size();
  const int64_t me = dt::world_rank();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  // Each rank holds 2 rows of a batch-sharded [2w, 5] problem; only rank 0's targets are bad.
  const DTensor dx =
      dt::distribute_tensor(tt::det_input({2 * w, 5}), mesh, {Shard(0)}, std::nullopt);
  std::vector<int64_t> t = {1, 4};
  if (me == 0) t[1] = 7;
  const DTensor target =
      DTensor::from_local(dt::from_vector<int64_t>(t, {2}), mesh, {Shard(0)}, false);
  const auto bad_target = Catch::Contains("[cross_entropy] target 7 out of range for 5 classes");
  if (w > 1) {
    REQUIRE_THROWS_WITH(dt::cross_entropy(dx, target),
                        bad_target && Catch::Contains("(raised on rank 0)"));
  } else {
    REQUIRE_THROWS_WITH(dt::cross_entropy(dx, target),
                        bad_target && !Catch::Contains("raised on rank"));
  }
  // The ranks are still in step: the next call's collectives pair correctly.
  const DTensor fine =
      DTensor::from_local(dt::from_vector<int64_t>({1, 4}, {2}), mesh, {Shard(0)}, false);
  const DTensor loss = dt::cross_entropy(dx, fine);
  CHECK(dt::allclose(loss.full_tensor(),
                     dt::cross_entropy(dx.full_tensor(), fine.full_tensor())));
}

// PyTorch 2.15 (tests/ops/torch_grad_conventions.py): cross_entropy(reduction=mean) with every
// target ignored is 0/0 = NaN, and its gradient is 0 everywhere (not NaN: a division by the
// count 0 would send inf back, and inf times the 0/1 mask of the ignored targets is NaN); also
// with label smoothing. A batch in which some targets count keeps their gradient finite.
TEST_CASE("dtensor cross_entropy: a mean with every target ignored is NaN with a zero gradient") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = tt::det_input({3, 4}, 0, -1.0, 0.25, dt::kFloat64);
  const Tensor ignored = dt::full({3}, -100, dt::TensorOptions(dt::kInt64));
  const Tensor some = dt::from_vector<int64_t>({-100, 2, -100}, {3});
  for (const dt::Placement p :
       {dt::Placement(dt::Replicate()), dt::Placement(Shard(0)), dt::Placement(Shard(1))}) {
    for (double s : {0.0, 0.1}) {
      INFO("logits " << p.str() << " smoothing " << s);
      DTensor dx = dt::distribute_tensor(x, mesh, {p}, std::nullopt);
      dx.requires_grad_();
      const DTensor target = dt::distribute_tensor(ignored, mesh, {dt::Replicate()}, std::nullopt);
      const DTensor loss = dt::cross_entropy(dx, target, Reduction::kMean, -100, s);
      CHECK(std::isnan(loss.full_tensor().item<double>()));
      loss.backward();
      CHECK(tt::same_values(dx.grad().full_tensor(), dt::zeros({3, 4}, dt::kFloat64), 0));

      DTensor dy = dt::distribute_tensor(x, mesh, {p}, std::nullopt);
      dy.requires_grad_();
      const DTensor partly = dt::distribute_tensor(some, mesh, {dt::Replicate()}, std::nullopt);
      dt::cross_entropy(dy, partly, Reduction::kMean, -100, s).backward();
      const std::vector<double> g = dy.grad().full_tensor().to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) {
        CHECK(std::isfinite(g[i]));
        if (i / 4 != 1) CHECK(g[i] == 0.0);  // the ignored rows
      }
    }
  }
}
