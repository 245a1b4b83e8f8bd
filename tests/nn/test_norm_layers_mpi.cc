// The normalisation modules on a batch-sharded input (mpirun at 1, 2 and 4 ranks):
// BatchNorm2d / SyncBatchNorm over Shard(0) activations give the outputs, the parameter
// gradients and, step after step, the running statistics (on every rank) of the module run on
// the full batch on one process; eval mode too; GroupNorm and InstanceNorm likewise without
// communication.
#include <catch2/catch.hpp>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Shard;
using dt::Tensor;

TEST_CASE("BatchNorm on a batch-sharded input equals the module on the full batch") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  nn::SyncBatchNorm sharded(3, 1e-5, 0.1, true, true, opts);
  nn::BatchNorm2d single(3, 1e-5, 0.1, true, true, opts);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    const Tensor x = st::det_input({2 * w + 1, 3, 2, 3}, step, -2.0 + step, 0.45, dt::kFloat64);
    const Tensor r = st::det_input({2 * w + 1, 3, 2, 3}, step + 5, -1.0, 0.3, dt::kFloat64);
    sharded.zero_grad();
    single.zero_grad();
    const DTensor y = sharded(dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt));
    dt::sum(dt::mul(y, dt::distribute_tensor(r, mesh, {Shard(0)}, std::nullopt))).backward();
    const DTensor want = single(nn::local_dtensor(x));
    dt::sum(dt::mul(want, nn::local_dtensor(r))).backward();
    CHECK(y.placements() == dt::Placements{Shard(0)});
    CHECK(st::same_values(y.full_tensor(), want.to_local(), 1e-9));
    CHECK(st::same_values(sharded.param("weight").grad().full_tensor(),
                          single.param("weight").grad().to_local(), 1e-9));
    CHECK(st::same_values(sharded.param("bias").grad().full_tensor(),
                          single.param("bias").grad().to_local(), 1e-9));
    // Every rank's buffers hold the global update.
    CHECK(st::same_values(sharded.running_mean().to_local(), single.running_mean().to_local(),
                          1e-12));
    CHECK(
        st::same_values(sharded.running_var().to_local(), single.running_var().to_local(), 1e-12));
    CHECK(sharded.num_batches_tracked() == step + 1);
  }
  sharded.eval();
  single.eval();
  const Tensor x = st::det_input({w + 2, 3, 2, 2}, 9, -1.0, 0.3, dt::kFloat64);
  dt::CommDebugMode comm;
  const DTensor y = sharded(dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt));
  CHECK(comm.total_count() == 0);  // eval: the running statistics, no reduction
  CHECK(st::same_values(y.full_tensor(), single(nn::local_dtensor(x)).to_local(), 1e-9));
}

TEST_CASE("GroupNorm and InstanceNorm on a batch-sharded input need no communication") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  nn::GroupNorm gn(2, 4, 1e-5, true, opts);
  nn::InstanceNorm1d in(4, 1e-5, 0.1, true, false, opts);
  const Tensor x = st::det_input({2 * w + 1, 4, 5}, 3, -2.0, 0.45, dt::kFloat64);
  const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(0)}, std::nullopt);
  dt::CommDebugMode comm;
  const DTensor g = gn(dx), i = in(dx);
  CHECK(comm.total_count() == 0);
  CHECK(st::same_values(g.full_tensor(), gn(nn::local_dtensor(x)).to_local(), 1e-9));
  CHECK(st::same_values(i.full_tensor(), in(nn::local_dtensor(x)).to_local(), 1e-9));
}
