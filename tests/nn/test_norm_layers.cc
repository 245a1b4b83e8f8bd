// The normalisation modules (dtensor/nn/norm_layers.h) on one process (self mesh): PyTorch's
// defaults, parameters and buffers, train() / eval(), num_batches_tracked and momentum = None,
// each equal to its function; unbatched InstanceNorm input; errors. (SyncBatchNorm's math, the
// batch-sharded batch_norm, is tested in tests/ops/norm/test_norm_layers_dtensor_mpi.cc.)
#include <catch2/catch.hpp>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
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
// The state_dict keys: parameter then buffer names, each followed by a space.
std::string names(const nn::Module& m) {
  std::string s;
  for (const auto& [n, p] : m.named_parameters()) s += n + " ";
  for (const auto& [n, b] : m.named_buffers()) s += n + " ";
  return s;
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

TEST_CASE("LayerNorm bias=false, RMSNorm elementwise_affine=false, InstanceNorm momentum=None",
          "[nn]") {
  // PyTorch 2.15 values (tests/nn/torch_nn_references.py, "LayerNorm bias=False, ..."): weight
  // det_input(shape, 3, -1, 0.25), input det_input([3, 4], 1), gradients of sum(out * c).
  auto close = [](const Tensor& a, const std::vector<double>& want) {
    return same(a, dt::from_vector(want, a.shape()), 1e-12);
  };
  auto run = [&](nn::Module& m, const std::vector<double>& out, const std::vector<double>& dx,
                 const std::vector<double>& dw) {
    if (m.has_param("weight"))
      m.set_parameter("weight", nn::local_dtensor(tt::det_input({4}, 3, -1.0, 0.25, dt::kFloat64)));
    DTensor x = nn::local_dtensor(tt::det_input({3, 4}, 1, -2.5, 0.5, dt::kFloat64));
    x.requires_grad_(true);
    const DTensor y = m(x);
    CHECK(close(y.to_local(), out));
    dt::sum(dt::mul(y, nn::local_dtensor(tt::det_input({3, 4}, 5, -1.0, 0.25, dt::kFloat64))))
        .backward();
    CHECK(close(x.grad().to_local(), dx));
    if (!dw.empty()) CHECK(close(m.param("weight").grad().to_local(), dw));
  };
  nn::LayerNorm ln(4, 1e-5, true, false, {.dtype = dt::kFloat64});
  CHECK(names(ln) == "weight ");
  run(ln,
      {0.18072397589588424, 2.289170361347867, 0.12048265059725616, 0.5220914859214434,
       -0.049999840000768, -2.099993280032256, 0.699997760010752, 0.099999680001536,
       0.18072397589588424, 2.289170361347867, 0.12048265059725614, 0.5220914859214434},
      {-0.10985870534183584, -0.23215738731962943, 0.4917762484813575, -0.1497601558198921,
       0.1619990848062976, 0.3660016063789569, 0.23399647363025916, -0.7619971648155135,
       -0.10985907844785847, -0.23215659965135954, 0.4917763728500317, -0.1497606947508136},
      {-0.7421712876907248, -2.9576386078060173, 0.19217304768227667, -0.5610447829653296});
  CHECK(names(nn::LayerNorm(4, 1e-5, false, true)).empty());  // bias needs elementwise_affine
  CHECK(names(nn::LayerNorm(4, 1e-5, true, dt::nn::ModuleOptions{})) == "weight bias ");
  // A braced {} after elementwise_affine is the options of the form without bias, as before the
  // bias option existed (a plain bool parameter would take it as bias=false).
  CHECK(names(nn::LayerNorm(4, 1e-5, true, {})) == "weight bias ");

  nn::RMSNorm rms(4, std::nullopt, false, {.dtype = dt::kFloat64});
  CHECK(names(rms).empty());
  run(rms,
      {-1.1202240672224077, 0.8401680504168059, -0.28005601680560194, -1.4002800840280096,
       0.6859943405700353, -0.6859943405700353, 1.7149858514250882, 0.34299717028501764,
       -0.9370425713316364, 1.2493900951088486, 0.0, -1.2493900951088486},
      {-0.04667600280093365, -0.280056016805602, 0.5134360308102702, -0.23338001400466826,
       -0.5548483636963522, 0.3833497785538433, 0.1563663570416991, 1.0945644992918946,
       0.10665525202148707, -0.03809116143624536, 0.7808688094430304, -0.11808260045236071},
      {});
  CHECK(names(nn::RMSNorm(4, 1e-6, dt::nn::ModuleOptions{})) == "weight ");
  CHECK(names(nn::RMSNorm(4, 1e-6, {})) == "weight ");  // {}: the options, not affine=false

  // InstanceNorm's momentum=None is momentum 0 (not BatchNorm's cumulative average): training
  // steps leave the running statistics at zeros and ones, which eval mode then uses.
  nn::InstanceNorm1d in(3, 1e-5, std::nullopt, false, true, {.dtype = dt::kFloat64});
  CHECK(names(in) == "running_mean running_var num_batches_tracked ");
  in(nn::local_dtensor(tt::det_input({2, 3, 4}, 1, -2.5, 0.5, dt::kFloat64)));
  in(nn::local_dtensor(tt::det_input({2, 3, 4}, 2, -2.5, 0.5, dt::kFloat64)));
  CHECK(close(in.running_mean().to_local(), {0.0, 0.0, 0.0}));
  CHECK(close(in.running_var().to_local(), {1.0, 1.0, 1.0}));
  in.eval();
  const double a = 0.4999975000187499, b = 0.9999950000374997, c = 1.4999925000562495,
               d = 1.9999900000749995, e = 2.4999875000937495;
  CHECK(close(
      in(nn::local_dtensor(tt::det_input({2, 3, 4}, 1, -2.5, 0.5, dt::kFloat64))).to_local(),
      {-d, c, -a, -e, b, -b, e, a, -c, d, 0.0, -d, c, -a, -e, b, -b, e, a, -c, d, 0.0, -d, c}));
}
