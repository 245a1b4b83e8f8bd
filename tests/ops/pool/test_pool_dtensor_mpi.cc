// DTensor pad / pools / interpolate (mpirun at 1, 2 and 4 ranks): for input placements R, S(d)
// for every dim and P(sum) on a 1-D and a 2-D mesh, with even and uneven shapes, the ops and
// their gradients equal the op on the full tensor; batch- and channel-sharded inputs need no
// communication and keep their shards; a Partial input passes through the linear ops; a
// spatially sharded input is gathered along the spatial dims, except the max / avg pools of a
// height-sharded one (halos: test_pool_halo_mpi.cc).
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Shard;
using dt::Tensor;

namespace {

// The ops under test, on Tensors and DTensors alike.
template <typename X>
std::vector<X> apply_all(const X& x) {
  return {dt::max_pool2d(x, {3}, {2}, {1}, {1}, true),
          dt::avg_pool2d(x, {2, 3}, {1, 2}, {1}, false, false),
          dt::adaptive_avg_pool2d(x, {2, 3}),
          dt::adaptive_max_pool2d(x, {3, 2}),
          dt::interpolate(x, {7, 4}, {}, "bilinear", false),
          dt::interpolate(x, {}, {1.5}, "nearest"),
          dt::pad(x, {1, 2, 2, 0}, "reflect"),
          dt::pad(x, {1, 1, 0, 2}, "constant", 0.5)};
}

// The sum of squares of every op's output: a gradient through each.
DTensor objective(const DTensor& x) {
  DTensor total;
  for (const DTensor& y : apply_all(x)) {
    const DTensor s = dt::sum(dt::mul(y, y));
    total = total.defined() ? dt::add(total, s) : s;
  }
  return total;
}

}  // namespace

TEST_CASE("dtensor pools, interpolate and pad equal the full-tensor ops for every placement") {
  const int64_t w = dt::world_size();
  const st::Ints xs = {w * 2 + 1, w + 1, 6, 5};
  const Tensor x = st::det_input(xs, 1, -1.0, 0.37, dt::kFloat64);
  const std::vector<Tensor> want = apply_all(x);
  for (const dt::DeviceMesh& mesh : st::family_meshes()) {
    for (const Placements& p : st::placement_lists(mesh.ndim(), st::shard_choices(4), 4)) {
      INFO(st::describe(mesh, {p}, xs));
      const std::vector<DTensor> got = apply_all(dt::distribute_tensor(x, mesh, p));
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("op " << i);
        CHECK(st::same_values(got[i].full_tensor(), want[i], 1e-10));
      }
    }
  }
}

TEST_CASE("dtensor pools: batch and channel shards need no communication and stay sharded") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  const Tensor x = st::det_input({2 * w + 1, w + 2, 6, 5}, 2, -1.0, 0.37, dt::kFloat64);
  const std::vector<Tensor> want = apply_all(x);
  for (int64_t d : {0, 1}) {
    const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(d)});
    dt::CommDebugMode comm;
    const std::vector<DTensor> got = apply_all(dx);
    CHECK(comm.total_count() == 0);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("dim " << d << " op " << i);
      CHECK(got[i].placements() == Placements{Shard(d)});
      CHECK(st::same_values(got[i].full_tensor(), want[i], 1e-10));
    }
  }
  // A Partial input passes through the linear ops (avg pool, interpolate) unreduced.
  {
    const DTensor part = dt::DTensor::from_local(
        dt::mul(x, dt::Scalar(w == 1 ? 1.0 : (dt::world_rank() == 0 ? 1.0 : 0.0))), mesh,
        {dt::Partial()});
    dt::CommDebugMode comm;
    const DTensor a = dt::avg_pool2d(part, {2});
    const DTensor b = dt::interpolate(part, {9, 7}, {}, "bilinear", true);
    CHECK(comm.total_count() == 0);
    CHECK((w == 1 || a.placements() == Placements{dt::Partial()}));
    CHECK(st::same_values(a.full_tensor(), dt::avg_pool2d(x, {2}), 1e-10));
    CHECK(
        st::same_values(b.full_tensor(), dt::interpolate(x, {9, 7}, {}, "bilinear", true), 1e-10));
  }
}

TEST_CASE("dtensor pool gradients equal the single-device ones") {
  const int64_t w = dt::world_size();
  const Tensor x = st::det_input({2 * w + 1, w + 1, 6, 5}, 3, -1.0, 0.37, dt::kFloat64);
  // Single device.
  DTensor lx = dt::local_dtensor(x.clone());
  lx.requires_grad_();
  objective(lx).backward();
  const Tensor want = lx.grad().to_local();
  for (const dt::DeviceMesh& mesh : st::family_meshes()) {
    for (const Placements& p :
         st::placement_lists(mesh.ndim(), {dt::Replicate(), Shard(0), Shard(1), Shard(2)}, 4)) {
      INFO(st::describe(mesh, {p}, x.sizes()));
      DTensor dx = dt::distribute_tensor(x, mesh, p);
      dx.requires_grad_();
      objective(dx).backward();
      CHECK(st::same_values(dx.grad().full_tensor(), want, 1e-9));
    }
  }
}
