// Tensor-parallel training under mpirun (1, 2 and 4 ranks): the collectives of forward and
// backward (Megatron's f/g pair: one all-reduce each way for a colwise -> rowwise MLP; with
// sequence parallelism an all-gather and a reduce-scatter each way), parameter gradients equal
// single-device ones and keep the parameters' placements, a tensor-parallel transformer
// trained 20 steps equals single-device training, and every op of steps 2..N (backward and
// the optimizer included) hits the propagation cache.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/transformer_plan.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape_ops.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::CollectiveKind;

namespace {

dt::DeviceMesh tp_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
}

dt::Tensor same_randn(dt::IntSpan shape, uint64_t seed) {
  dt::Generator g(seed);
  return dt::randn(shape, {}, &g);
}

using dt::test::max_diff;

// Every parameter's gradient, gathered, equals the reference model's; each has its
// parameter's placements.
void require_same_grads(const nn::Module& tp, const nn::Module& ref, double tol) {
  const auto a = tp.named_parameters();
  const auto b = ref.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(a[i].second.grad().defined());
    CHECK(a[i].second.grad().placements() == a[i].second.placements());
    CHECK(max_diff(a[i].second.grad().full_tensor(), b[i].second.grad().to_local()) < tol);
  }
}

// sum(y * w): a loss whose gradient is w, the same on every rank.
dt::DTensor weighted_sum(const dt::DTensor& y, const dt::Tensor& w) {
  return dt::sum(dt::mul(y, nn::local_dtensor(w)));
}

}  // namespace

TEST_CASE("TP MLP: one all-reduce in forward, one in backward, gradients equal single-device",
          "[tp][train]") {
  const int64_t W = dt::world_size();
  const int64_t one = W > 1 ? 1 : 0;
  for (bool gelu : {true, false}) {
    const auto act = gelu ? nn::Activation::kGelu : nn::Activation::kSilu;
    dt::manual_seed(40);
    nn::MLP ref(8, W * 3 + 1, act);
    dt::manual_seed(40);
    nn::MLP mlp(8, W * 3 + 1, act);
    dt::parallelize_module(mlp, tp_mesh(),
                           {{"fc1", dt::ColwiseParallel()}, {"fc2", dt::RowwiseParallel()}});
    dt::Tensor x = same_randn({2, 3, 8}, 7);
    const dt::Tensor w = same_randn({2, 3, 8}, 9);
    dt::DTensor xl = nn::local_dtensor(x.clone());
    xl.requires_grad_();
    dt::DTensor loss;
    {
      dt::CommDebugMode comm;
      loss = weighted_sum(mlp(xl), w);
      CHECK(comm.count(CollectiveKind::kAllReduce) == one);
      CHECK(comm.total_count() == one);
    }
    {
      dt::CommDebugMode comm;
      loss.backward();
      // The input gradient of the colwise layer (Partial) is the one reduction.
      CHECK(comm.count(CollectiveKind::kAllReduce) == one);
      CHECK(comm.total_count() == one);
    }
    dt::DTensor xr = nn::local_dtensor(x.clone());
    xr.requires_grad_();
    weighted_sum(ref(xr), w).backward();
    require_same_grads(mlp, ref, 1e-4);
    CHECK(max_diff(xl.grad().to_local(), xr.grad().to_local()) < 1e-4);
  }
}

TEST_CASE("TP MLP with sequence parallelism: all-gather and reduce-scatter swap roles in backward",
          "[tp][train]") {
  const int64_t W = dt::world_size();
  const int64_t one = W > 1 ? 1 : 0;
  dt::manual_seed(42);
  nn::MLP ref(8, W * 2 + 1, nn::Activation::kGelu);
  dt::manual_seed(42);
  nn::MLP mlp(8, W * 2 + 1, nn::Activation::kGelu);
  const dt::DeviceMesh mesh = tp_mesh();
  dt::parallelize_module(
      mlp, mesh,
      {{"fc1", dt::ColwiseParallel({.input_layouts = dt::Shard(1)})},
       {"fc2", dt::RowwiseParallel({.output_layouts = dt::Shard(1), .use_local_output = false})}});
  const dt::Tensor x = same_randn({2, 2 * W, 8}, 11);
  const dt::Tensor w = same_randn({2, 2 * W, 8}, 12);
  // The sequence-sharded input as a DTensor leaf.
  dt::DTensor xs = dt::distribute_tensor(x, mesh, {dt::Shard(1)}, std::nullopt);
  xs.requires_grad_();
  const dt::DTensor ws = dt::distribute_tensor(w, mesh, {dt::Shard(1)}, std::nullopt);
  dt::DTensor loss;
  {
    dt::CommDebugMode comm;
    loss = dt::sum(dt::mul(mlp(xs), ws));
    CHECK(comm.count(CollectiveKind::kAllGather) == one);
    CHECK(comm.count(CollectiveKind::kReduceScatter) == one);
  }
  {
    dt::CommDebugMode comm;
    loss.backward();
    CHECK(comm.count(CollectiveKind::kAllGather) == one);
    CHECK(comm.count(CollectiveKind::kReduceScatter) == one);
    CHECK(comm.count(CollectiveKind::kAllReduce) == 0);
  }
  CHECK(xs.grad().placements() == dt::Placements{dt::Shard(1)});
  dt::DTensor xr = nn::local_dtensor(x.clone());
  xr.requires_grad_();
  weighted_sum(ref(xr), w).backward();
  require_same_grads(mlp, ref, 1e-4);
  CHECK(max_diff(xs.grad().full_tensor(), xr.grad().to_local()) < 1e-4);
}

TEST_CASE("a TP transformer trained 20 steps equals single-device training", "[tp][train]") {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg;
  cfg.vocab_size = 4 * W + 3;  // uneven vocabulary shards
  cfg.dim = 8 * W;
  cfg.n_heads = 2 * W;
  cfg.n_layers = 2;
  cfg.max_seq_len = 6;
  dt::manual_seed(77);
  nn::Transformer model(cfg);
  dt::manual_seed(77);
  nn::Transformer ref(cfg);
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::ParallelizePlan plan = dt::transformer_tp_plan({.loss_parallel = true});
  dt::parallelize_module(model, mesh, plan);
  dt::optim::AdamW opt(model.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW ref_opt(ref.parameters(), dt::optim::AdamWOptions(1e-2));

  auto step = [&](nn::Module& m, dt::optim::Optimizer& o, const dt::Tensor& tokens,
                  const dt::Tensor& targets, const dt::DeviceMesh* on) {
    o.zero_grad();
    const dt::DTensor logits = m(nn::local_dtensor(tokens));
    const int64_t rows[] = {-1, cfg.vocab_size};
    const dt::DTensor t = on != nullptr ? dt::DTensor::from_local(targets, *on, {dt::Replicate()})
                                        : nn::local_dtensor(targets);
    const dt::DTensor loss = dt::cross_entropy(dt::reshape(logits, rows), t);
    loss.backward();
    dt::optim::clip_grad_norm_(o.parameters(), 1.0);
    o.step();
    return loss.full_tensor().to(dt::kFloat64).item<double>();
  };
  int64_t misses_after_first = -1;
  for (int i = 0; i < 20; ++i) {
    dt::Generator g(1000 + i);
    const dt::Tensor tokens =
        dt::randint(0, cfg.vocab_size, {3, 6}, dt::TensorOptions(dt::kInt64), &g);
    const dt::Tensor targets =
        dt::randint(0, cfg.vocab_size, {18}, dt::TensorOptions(dt::kInt64), &g);
    if (i == 1) misses_after_first = dt::propagation_cache_stats().misses;
    const double got = step(model, opt, tokens, targets, &mesh);
    if (i >= 1) {
      // Steps after the first: every propagation (forward, backward, optimizer) hits the cache.
      INFO("step " << i);
      CHECK(dt::propagation_cache_stats().misses == misses_after_first);
    }
    const double want = step(ref, ref_opt, tokens, targets, nullptr);
    if (i >= 1) CHECK(dt::propagation_cache_stats().misses == misses_after_first);
    INFO("step " << i << ": tensor-parallel loss " << got << ", single-device " << want);
    CHECK(std::abs(got - want) < 1e-4 * (1 + std::abs(want)));
  }
  const auto a = model.named_parameters();
  const auto b = ref.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(max_diff(a[i].second.full_tensor(), b[i].second.to_local()) < 1e-4);
  }
}
