// The tensor-parallel backward's plan when the gradient reaching a rowwise layer is Partial
// (issue 46). DESIGN item 12 keeps a Replicate source's Partial gradient Partial, so in a
// residual stack the colwise layers' input gradients (Partial) reach the rowwise layer below
// unreduced. Its weight gradient mm(grad^T P [H, T], x S(1) [T, F]) must all-reduce the small
// [T, H] gradient, as Megatron does, and not keep a Partial [H, F] weight gradient that is
// later reduce-scattered (nor all-gather x or the weight for it): the cost model charges the
// growth of a pending reduction (dtensor/core/propagation/sharding_propagation.h).
#include <catch2/catch.hpp>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::CollectiveKind;

namespace {

dt::Tensor same_randn(dt::IntSpan shape, uint64_t seed) {
  dt::Generator g(seed);
  return dt::randn(shape, {}, &g);
}

// Two residual MLP blocks: h = x + mlp1(x); y = h + mlp2(h); loss = sum(y * w).
dt::DTensor residual_loss(nn::MLP& mlp1, nn::MLP& mlp2, const dt::DTensor& x, const dt::Tensor& w) {
  const dt::DTensor h = dt::add(x, mlp1(x));
  const dt::DTensor y = dt::add(h, mlp2(h));
  return dt::sum(
      dt::mul(y, dt::distribute_tensor(w, x.device_mesh(), {dt::Replicate()}, std::nullopt)));
}

}  // namespace

TEST_CASE(
    "TP residual MLPs: the Partial gradient is all-reduced, no weight gradient reduce-scattered",
    "[tp][train]") {
  const int64_t W = dt::world_size();
  // Few tokens, layers as wide as the weight-gradient's alternatives needed (the old cost model
  // all-gathered x and reduce-scattered a [H, F] Partial weight gradient here).
  const int64_t hidden = 256, inter = 256, tokens = 64;
  dt::manual_seed(46);
  nn::MLP ref1(hidden, inter, nn::Activation::kSilu), ref2(hidden, inter, nn::Activation::kSilu);
  dt::manual_seed(46);
  nn::MLP mlp1(hidden, inter, nn::Activation::kSilu), mlp2(hidden, inter, nn::Activation::kSilu);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  for (nn::MLP* m : {&mlp1, &mlp2}) {
    dt::parallelize_module(*m, mesh,
                           {{"fc1", dt::ColwiseParallel({.use_local_output = false})},
                            {"fc2", dt::RowwiseParallel({.use_local_output = false})}});
  }
  const dt::Tensor x = same_randn({1, tokens, hidden}, 7);
  const dt::Tensor w = same_randn({1, tokens, hidden}, 9);
  // The residual stream stays a DTensor on the tp mesh (Replicate), as in the Llama.
  dt::DTensor xl = dt::distribute_tensor(x.clone(), mesh, {dt::Replicate()}, std::nullopt);
  xl.requires_grad_();
  const dt::DTensor loss = residual_loss(mlp1, mlp2, xl, w);
  {
    dt::CommDebugMode comm;
    loss.backward();
    INFO(comm.str());
    CHECK(comm.count(CollectiveKind::kReduceScatter) == 0);
    CHECK(comm.count(CollectiveKind::kAllGather) == 0);
    CHECK(comm.count(CollectiveKind::kAllToAll) == 0);
    // All-reduces only: of the [T, H] gradient for mlp1.fc2's input gradient and again for its
    // weight gradient (each mm reduces the Partial gradient it is given), of fc2.bias's
    // gradient, and of x's gradient (Partial from mlp1.fc1 and mlp2.fc1).
    CHECK(comm.count(CollectiveKind::kAllReduce) == (W > 1 ? 4 : 0));
    CHECK(comm.total_count() == comm.count(CollectiveKind::kAllReduce));
  }
  dt::DTensor xr = nn::local_dtensor(x.clone());
  xr.requires_grad_();
  residual_loss(ref1, ref2, xr, w).backward();
  for (auto [tp, ref] : {std::pair{&mlp1, &ref1}, std::pair{&mlp2, &ref2}}) {
    const auto a = tp->named_parameters();
    const auto b = ref->named_parameters();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(a[i].second.grad().placements() == a[i].second.placements());
      CHECK(dt::test::max_diff(a[i].second.grad().full_tensor(), b[i].second.grad().to_local()) <
            1e-4);
    }
  }
  CHECK(dt::test::max_diff(xl.grad().full_tensor(), xr.grad().to_local()) < 1e-4);
}

TEST_CASE(
    "TP vocab-parallel embedding: a Partial gradient is not turned into a P [V, H] weight gradient",
    "[tp][train]") {
  const int64_t W = dt::world_size();
  const int64_t vocab = 512 * W, hidden = 64, tokens = 8;
  dt::manual_seed(47);
  nn::Embedding ref_emb(vocab, hidden);
  nn::MLP ref_mlp(hidden, 64, nn::Activation::kSilu);
  dt::manual_seed(47);
  nn::Embedding emb(vocab, hidden);
  nn::MLP mlp(hidden, 64, nn::Activation::kSilu);
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"tp"});
  dt::parallelize_module(emb, mesh, dt::RowwiseParallel({.use_local_output = false}));
  dt::parallelize_module(mlp, mesh,
                         {{"fc1", dt::ColwiseParallel({.use_local_output = false})},
                          {"fc2", dt::RowwiseParallel({.use_local_output = false})}});
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < tokens; ++i) ids.push_back((i * 131) % vocab);
  const dt::Tensor t = dt::from_vector(ids, {1, tokens});
  const dt::Tensor w = same_randn({1, tokens, hidden}, 3);
  // e + mlp(e): mlp.fc1's input gradient reaches the embedding Partial.
  const auto step = [&](nn::Embedding& e, nn::MLP& m, const dt::DTensor& ids_d) {
    const dt::DTensor x = e(ids_d);
    const dt::DTensor y = dt::add(x, m(x));
    return dt::sum(
        dt::mul(y, dt::distribute_tensor(w, y.device_mesh(), {dt::Replicate()}, std::nullopt)));
  };
  const dt::DTensor loss =
      step(emb, mlp, dt::distribute_tensor(t, mesh, {dt::Replicate()}, std::nullopt));
  {
    dt::CommDebugMode comm;
    loss.backward();
    INFO(comm.str());
    // At most a gradient-sized reduce-scatter, never the [V, H] weight gradient's.
    CHECK(comm.bytes(CollectiveKind::kReduceScatter) <= tokens * hidden * 4);
  }
  step(ref_emb, ref_mlp, nn::local_dtensor(t)).backward();
  CHECK(emb.named_parameters()[0].second.grad().placements() ==
        emb.named_parameters()[0].second.placements());
  CHECK(dt::test::max_diff(emb.named_parameters()[0].second.grad().full_tensor(),
                           ref_emb.named_parameters()[0].second.grad().to_local()) < 1e-4);
}
