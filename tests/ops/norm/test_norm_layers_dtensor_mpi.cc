// DTensor batch_norm / group_norm / instance_norm (mpirun at 1, 2 and 4 ranks): for every input
// placement list (R, S(d), P) on a 1-D and a 2-D mesh, even, uneven and empty shards, the
// values, the running statistics (on every rank) and the gradients of x, weight and bias equal
// the single-device ones; the communication each sharding needs: batch-sharded batch_norm one
// all-reduce in forward and one in backward (SyncBatchNorm), channel-sharded batch_norm, batch-
// or channel-sharded instance_norm and group_norm on whole groups none.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::CollectiveKind;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

enum class Op { kBatchTrain, kBatchEval, kGroup, kInstance };

struct Result {
  Tensor y, gx, gw, gb, rm, rv;
};

// The op on x (requires grad), w, b, buffers rm / rv (updated in place), then the gradients of
// sum(y * r). Full tensors come back.
Result run(Op op, const DTensor& x0, const DTensor& w0, const DTensor& b0, const DTensor& rm,
           const DTensor& rv, const DTensor& r, int64_t groups) {
  DTensor x = x0.detach(), w = w0.detach(), b = b0.detach();
  x.requires_grad_();
  w.requires_grad_();
  b.requires_grad_();
  DTensor y;
  switch (op) {
    case Op::kBatchTrain:
      y = dt::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
      break;
    case Op::kBatchEval:
      y = dt::batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
      break;
    case Op::kGroup:
      y = dt::group_norm(x, groups, w, b, 1e-5);
      break;
    case Op::kInstance:
      y = dt::instance_norm(x, rm, rv, w, b, true, 0.2, 1e-5);
      break;
  }
  dt::sum(dt::mul(y, r)).backward();
  return {y.full_tensor(),        x.grad().full_tensor(), w.grad().full_tensor(),
          b.grad().full_tensor(), rm.full_tensor(),       rv.full_tensor()};
}

// The buffers' placements for x's: Shard(0) where x is channel-sharded (when `sharded`), else
// Replicate.
Placements buffer_placements(const Placements& xp, bool sharded) {
  Placements p(xp.size(), Replicate());
  for (size_t i = 0; i < xp.size(); ++i) {
    if (sharded && xp[i].is_shard(1)) p[i] = Shard(0);
  }
  return p;
}

}  // namespace

TEST_CASE("dtensor normalisation layers equal the single-device ones for every placement") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh self = dt::self_mesh(dt::kCPU);
  // uneven batch and channels; channels, then the batch, with an empty last shard (w - 1).
  for (const st::Ints& shape :
       {st::Ints{3 * w + 1, 2 * w + 1, 3}, st::Ints{4, std::max<int64_t>(w - 1, 1), 2},
        st::Ints{std::max<int64_t>(w - 1, 1), 3, 2}}) {
    const int64_t c = shape[1];
    const Tensor x = st::det_input(shape, 2, -2.0, 0.45, dt::kFloat64);
    const Tensor r = st::det_input(shape, 5, -1.0, 0.3, dt::kFloat64);
    const Tensor wt = st::det_input({c}, 3, 0.5, 0.25, dt::kFloat64);
    const Tensor bs = st::det_input({c}, 4, -1.0, 0.5, dt::kFloat64);
    const Tensor rm0 = st::det_input({c}, 6, -0.5, 0.1, dt::kFloat64);
    const Tensor rv0 = st::det_input({c}, 7, 0.5, 0.2, dt::kFloat64);
    for (const Op op : {Op::kBatchTrain, Op::kBatchEval, Op::kGroup, Op::kInstance}) {
      const auto local = [&](const Tensor& t) { return dt::local_dtensor(t.clone()); };
      const Result want =
          run(op, local(x), local(wt), local(bs), local(rm0), local(rv0), local(r), c);
      for (const dt::DeviceMesh& mesh : st::family_meshes()) {
        for (const Placements& p : st::placement_lists(mesh.ndim(), st::shard_choices(3), 3)) {
          for (const bool sharded_buffers : {false, true}) {
            INFO(st::describe(mesh, {p}, shape)
                 << " op " << static_cast<int>(op) << " sharded buffers " << sharded_buffers);
            const Placements bp = buffer_placements(p, sharded_buffers);
            const auto on = [&](const Tensor& t, const Placements& q) {
              return dt::distribute_tensor(t.clone(), mesh, q, std::nullopt);
            };
            const DTensor rm = on(rm0, bp), rv = on(rv0, bp);
            const Result got = run(op, on(x, p), on(wt, bp), on(bs, bp), rm, rv,
                                   on(r, Placements(p.size(), Replicate())), c);
            CHECK(st::same_values(got.y, want.y, 1e-9));
            CHECK(st::same_values(got.gx, want.gx, 1e-9));
            CHECK(st::same_values(got.gw, want.gw, 1e-9));
            CHECK(st::same_values(got.gb, want.gb, 1e-9));
            // Every rank's own shard of the running statistics holds the global update.
            CHECK(st::same_values(got.rm, want.rm, 1e-12));
            CHECK(st::same_values(got.rv, want.rv, 1e-12));
            if (bp == Placements(p.size(), Replicate())) {
              CHECK(st::same_values(rm.to_local(), want.rm, 1e-12));
              CHECK(st::same_values(rv.to_local(), want.rv, 1e-12));
            }
          }
        }
      }
    }
  }
  // group_norm with 3 groups of 2 channels.
  const Tensor xg = st::det_input({w + 1, 6, 4}, 8, -2.0, 0.45, dt::kFloat64);
  const Tensor wg = st::det_input({6}, 3, 0.5, 0.25, dt::kFloat64);
  const Tensor want = dt::group_norm(xg, 3, wg, wg);
  for (const dt::DeviceMesh& mesh : st::family_meshes()) {
    for (const Placements& p : st::placement_lists(mesh.ndim(), st::shard_choices(3), 3)) {
      INFO(st::describe(mesh, {p}, {w + 1, 6, 4}));
      const DTensor dw =
          dt::distribute_tensor(wg, mesh, Placements(p.size(), Replicate()), std::nullopt);
      const DTensor y = dt::group_norm(dt::distribute_tensor(xg, mesh, p, std::nullopt), 3, dw, dw);
      CHECK(st::same_values(y.full_tensor(), want, 1e-9));
    }
  }
}

TEST_CASE("dtensor normalisation layers communicate only where the statistics need it") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Placements rep = {Replicate()};
  const Tensor x = st::det_input({2 * w, 2 * w, 5}, 1, -2.0, 0.45, dt::kFloat64);
  const Tensor c = st::det_input({2 * w}, 3, 0.5, 0.25, dt::kFloat64);
  const auto dist = [&](const Tensor& t, const Placements& p) {
    return dt::distribute_tensor(t.clone(), mesh, p, std::nullopt);
  };
  SECTION("batch-sharded batch_norm: one all-reduce, identical running statistics") {
    const DTensor rm = dist(c, rep), rv = dist(c, rep);
    const DTensor dx = dist(x, {Shard(0)});
    dt::CommDebugMode comm;
    const DTensor y = dt::batch_norm(dx, rm, rv, dist(c, rep), dist(c, rep), true);
    CHECK(comm.total_count() == (w > 1 ? 1 : 0));
    CHECK(comm.count(CollectiveKind::kAllReduce) == (w > 1 ? 1 : 0));
    CHECK(y.placements() == Placements{Shard(0)});
    Tensor lm = c.clone(), lv = c.clone();
    CHECK(st::same_values(y.full_tensor(), dt::batch_norm(x, lm, lv, c, c, true), 1e-9));
    CHECK(st::same_values(rm.to_local(), lm, 1e-12));
    CHECK(st::same_values(rv.to_local(), lv, 1e-12));
    // Backward: one all-reduce, of the [2, C] gradient of the per-channel factors (the sums of
    // g and g * x; PyTorch's SyncBatchNorm reduces sum(dy) and sum(dy * xmu) together), from
    // which the gradients of the statistics, weight and bias follow complete on every rank
    // (before, weight's and bias's each took an all-reduce of its own: three per call).
    DTensor xg = dist(x, {Shard(0)}), wg = dist(c, rep), bg = dist(c, rep);
    xg.requires_grad_();
    wg.requires_grad_();
    bg.requires_grad_();
    const DTensor z = dt::batch_norm(xg, rm, rv, wg, bg, true);
    dt::CommDebugMode bwd;
    dt::sum(dt::mul(z, z)).backward();
    INFO(bwd.str());
    CHECK(bwd.total_count() == (w > 1 ? 1 : 0));
    CHECK(bwd.count(CollectiveKind::kAllReduce) == (w > 1 ? 1 : 0));
    CHECK(xg.grad().placements() == Placements{Shard(0)});
    CHECK(wg.grad().placements() == rep);
    CHECK(bg.grad().placements() == rep);
    DTensor lx = dt::local_dtensor(x.clone()), lw = dt::local_dtensor(c.clone()),
            lb = dt::local_dtensor(c.clone());
    lx.requires_grad_();
    lw.requires_grad_();
    lb.requires_grad_();
    const DTensor lz = dt::batch_norm(lx, DTensor(), DTensor(), lw, lb, true);
    dt::sum(dt::mul(lz, lz)).backward();
    CHECK(st::same_values(xg.grad().full_tensor(), lx.grad().to_local(), 1e-9));
    CHECK(st::same_values(wg.grad().to_local(), lw.grad().to_local(), 1e-9));
    CHECK(st::same_values(bg.grad().to_local(), lb.grad().to_local(), 1e-9));
  }
  SECTION("channel-sharded batch_norm and instance_norm: none") {
    const DTensor rm = dist(c, {Shard(0)}), rv = dist(c, {Shard(0)});
    const DTensor dx = dist(x, {Shard(1)}), dc = dist(c, {Shard(0)});
    dt::CommDebugMode comm;
    const DTensor y = dt::batch_norm(dx, rm, rv, dc, dc, true);
    const DTensor z = dt::batch_norm(dx, rm, rv, dc, dc, false);
    const DTensor i = dt::instance_norm(dx, DTensor(), DTensor(), dc, dc);
    const DTensor j =
        dt::instance_norm(dist(x, {Shard(0)}), DTensor(), DTensor(), dist(c, rep), dist(c, rep));
    CHECK(comm.total_count() == 0);
    CHECK(y.placements() == Placements{Shard(1)});
    CHECK(i.placements() == Placements{Shard(1)});
    CHECK(j.placements() == Placements{Shard(0)});
  }
  SECTION("group_norm: batch-sharded none, channel-sharded by whole groups none") {
    const DTensor g0 = dt::group_norm(dist(x, {Shard(0)}), w, dist(c, rep), dist(c, rep));
    dt::CommDebugMode comm;
    const DTensor g = dt::group_norm(dist(x, {Shard(0)}), w, dist(c, rep), dist(c, rep));
    CHECK(comm.total_count() == 0);
    dt::CommDebugMode comm1;
    // 2 channels per group, 2 channels per rank.
    const DTensor h =
        dt::group_norm(dist(x, {Shard(1)}), w, dist(c, {Shard(0)}), dist(c, {Shard(0)}));
    CHECK(comm1.total_count() == 0);
    CHECK(st::same_values(h.full_tensor(), dt::group_norm(x, w, c, c), 1e-9));
  }
}
