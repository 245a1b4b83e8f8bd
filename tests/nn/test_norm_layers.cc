// The normalisation modules (dtensor/nn/norm_layers.h) on one process (self mesh): PyTorch's
// defaults, parameters and buffers, train() / eval(), num_batches_tracked and momentum = None,
// each equal to its function; unbatched InstanceNorm input; errors. (SyncBatchNorm's math, the
// batch-sharded batch_norm, is tested in tests/ops/norm/test_norm_layers_dtensor_mpi.cc.)
#include <catch2/catch.hpp>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Tensor;

namespace {
bool same(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  return a.shape() == b.shape() && dt::allclose(a, b, tol, tol);
}
}  // namespace

TEST_CASE("BatchNorm modules: defaults, buffers, train and eval", "[nn]") {
  nn::BatchNorm2d bn(3);
  CHECK(bn.type_name() == "BatchNorm2d");
  CHECK(nn::SyncBatchNorm(3).type_name() == "SyncBatchNorm");
  CHECK(bn.is_training());
  CHECK(bn.parameters().size() == 2);  // weight, bias; the running statistics are buffers
  CHECK(same(bn.param("weight").to_local(), dt::ones({3})));
  CHECK(same(bn.param("bias").to_local(), dt::zeros({3})));
  CHECK(same(bn.running_mean().to_local(), dt::zeros({3})));
  CHECK(same(bn.running_var().to_local(), dt::ones({3})));
  CHECK(bn.momentum() == 0.1);
  CHECK(bn.eps() == 1e-5);

  const Tensor x = tt::det_input({4, 3, 2, 2}, 1, -2.0, 0.45);
  Tensor rm = dt::zeros({3}), rv = dt::ones({3});
  const Tensor want = dt::batch_norm(x, rm, rv, dt::ones({3}), dt::zeros({3}), true, 0.1, 1e-5);
  CHECK(same(bn(nn::local_dtensor(x)).to_local(), want));
  CHECK(bn.num_batches_tracked() == 1);
  CHECK(same(bn.running_mean().to_local(), rm));
  CHECK(same(bn.running_var().to_local(), rv));

  bn.eval();
  CHECK_FALSE(bn.is_training());
  CHECK(same(bn(nn::local_dtensor(x)).to_local(),
             dt::batch_norm(x, rm, rv, dt::ones({3}), dt::zeros({3}))));
  CHECK(bn.num_batches_tracked() == 1);  // not counted in eval mode
  CHECK(same(bn.running_mean().to_local(), rm));
  bn.train();
  CHECK(bn.is_training());

  // momentum = None: the cumulative average (momentum 1 / num_batches_tracked).
  nn::BatchNorm1d cum(3, 1e-5, std::nullopt, false);
  CHECK(cum.parameters().empty());
  const Tensor x1 = tt::det_input({5, 3}, 2), x2 = tt::det_input({5, 3}, 7, 1.0, 0.3);
  cum(nn::local_dtensor(x1));
  cum(nn::local_dtensor(x2));
  Tensor m = dt::zeros({3}), v = dt::ones({3});
  dt::batch_norm(x1, m, v, Tensor(), Tensor(), true, 1.0);
  dt::batch_norm(x2, m, v, Tensor(), Tensor(), true, 0.5);
  CHECK(same(cum.running_mean().to_local(), m));
  CHECK(same(cum.running_var().to_local(), v));
  cum.reset_running_stats();
  CHECK(cum.num_batches_tracked() == 0);
  CHECK(same(cum.running_var().to_local(), dt::ones({3})));

  // No running statistics: the batch statistics in eval mode too.
  nn::BatchNorm3d plain(3, 1e-5, 0.1, true, false);
  plain.eval();
  CHECK_FALSE(plain.running_mean().defined());
  const Tensor x3 = tt::det_input({2, 3, 2, 2, 2}, 3);
  CHECK(same(plain(nn::local_dtensor(x3)).to_local(),
             dt::batch_norm(x3, Tensor(), Tensor(), dt::ones({3}), dt::zeros({3}), true)));

  // train()/eval() reach the whole tree.
  struct Net : nn::Module {
    std::string type_name() const override { return "Net"; }
  };
  Net net;
  auto child = net.register_module("bn", std::make_shared<nn::BatchNorm1d>(3));
  net.eval();
  CHECK_FALSE(child->is_training());

  REQUIRE_THROWS_WITH(bn(nn::local_dtensor(x1)),
                      Catch::Contains("[BatchNorm2d] expected 4D input"));
  REQUIRE_THROWS_WITH(nn::BatchNorm1d(3)(nn::local_dtensor(x)),
                      Catch::Contains("expected 2D or 3D"));
}

TEST_CASE("GroupNorm and InstanceNorm modules equal their functions", "[nn]") {
  nn::GroupNorm gn(2, 4);
  CHECK(gn.type_name() == "GroupNorm");
  CHECK(same(gn.param("weight").to_local(), dt::ones({4})));
  const Tensor x = tt::det_input({3, 4, 5}, 4, -1.0, 0.3);
  CHECK(same(gn(nn::local_dtensor(x)).to_local(),
             dt::group_norm(x, 2, dt::ones({4}), dt::zeros({4}))));
  REQUIRE_THROWS_WITH(nn::GroupNorm(3, 4), Catch::Contains("divisible"));

  nn::InstanceNorm1d in(4);  // affine = false, track_running_stats = false
  CHECK(in.type_name() == "InstanceNorm1d");
  CHECK(in.parameters().empty());
  CHECK_FALSE(in.running_mean().defined());
  CHECK(same(in(nn::local_dtensor(x)).to_local(), dt::instance_norm(x)));
  // Unbatched [C, L].
  const Tensor u = tt::det_input({4, 5}, 5);
  CHECK(same(in(nn::local_dtensor(u)).to_local(), dt::instance_norm(u.unsqueeze(0)).squeeze(0)));

  nn::InstanceNorm2d tracked(4, 1e-5, 0.1, true, true);
  const Tensor x2 = tt::det_input({2, 4, 3, 3}, 6);
  Tensor rm = dt::zeros({4}), rv = dt::ones({4});
  const Tensor want = dt::instance_norm(x2, rm, rv, dt::ones({4}), dt::zeros({4}), true, 0.1);
  CHECK(same(tracked(nn::local_dtensor(x2)).to_local(), want));
  CHECK(same(tracked.running_mean().to_local(), rm));
  CHECK(same(tracked.running_var().to_local(), rv));
  tracked.eval();  // normalises with the running statistics
  CHECK(same(tracked(nn::local_dtensor(x2)).to_local(),
             dt::batch_norm(x2, rm, rv, dt::ones({4}), dt::zeros({4}))));
  REQUIRE_THROWS_WITH(tracked(nn::local_dtensor(u)), Catch::Contains("expected 3D or 4D input"));
  REQUIRE_THROWS_WITH(tracked(nn::local_dtensor(x)), Catch::Contains("to match num_features"));
  REQUIRE_THROWS_WITH(nn::InstanceNorm1d(0),
                      Catch::Contains("[InstanceNorm] num_features 0 must be > 0"));
  REQUIRE_THROWS_WITH(nn::BatchNorm2d(-1),
                      Catch::Contains("[BatchNorm] num_features -1 must be > 0"));
}

TEST_CASE("norm modules' state_dict keys are PyTorch's (InstanceNorm's num_batches_tracked)",
          "[nn]") {
  // PyTorch 2.15's state_dict keys (tests/parallel/torch_dp_parity/nn_probe.py): _NormBase
  // registers num_batches_tracked whenever track_running_stats, InstanceNorm included, whose
  // forward (F.instance_norm) never advances it: it stays 0 after training steps.
  auto names = [](const nn::Module& m) {
    std::string s;
    for (const auto& [n, p] : m.named_parameters()) s += n + " ";
    for (const auto& [n, b] : m.named_buffers()) s += n + " ";
    return s;
  };
  nn::InstanceNorm1d in(3, 1e-5, 0.1, true, true);
  CHECK(names(in) == "weight bias running_mean running_var num_batches_tracked ");
  nn::InstanceNorm2d in2(2, 1e-5, 0.5, false, true);
  CHECK(names(in2) == "running_mean running_var num_batches_tracked ");
  CHECK(names(nn::InstanceNorm1d(3)).empty());
  CHECK(names(nn::BatchNorm1d(3)) == "weight bias running_mean running_var num_batches_tracked ");
  CHECK(names(nn::BatchNorm1d(3, 1e-5, 0.1, false, false)).empty());
  in(nn::local_dtensor(tt::det_input({2, 3, 4}, 1)));
  in(nn::local_dtensor(tt::det_input({2, 3, 4}, 2)));
  const DTensor count = in.named_buffers().back().second;
  CHECK(count.dtype() == dt::kInt64);
  CHECK(count.shape().empty());
  CHECK(count.to_local().data<int64_t>()[0] == 0);
}
