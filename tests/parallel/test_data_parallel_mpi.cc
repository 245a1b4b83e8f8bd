// Data parallelism under mpirun (1, 2 and 4 ranks; the 4-rank run adds TP x FSDP on a 2x2
// mesh): replicate (DDP), fully_shard (FSDP) and the DEFAULT style train exactly like one
// device on the same global batch (uneven parameter shards included), issue the collectives
// they promise per step, group a tied weight into its modules' common ancestor's unit, and
// FSDP's forward holds one unit's gathered parameters at a time.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/autograd/function.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/transformer_plan.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/memory_stats.h"
#include "tests/parallel/parallel_test_util.h"
#include "tests/parallel/torch_dp_parity/dp_probe_model.h"
#include "tests/parallel/torch_dp_parity/torch_dp_references.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::CollectiveKind;

namespace {

using dt::test::max_diff;

nn::TransformerConfig small_config(int64_t n_layers = 2, int64_t dim = 8, int64_t heads = 2) {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg;
  cfg.vocab_size = 4 * W + 3;  // uneven shards of the embedding and the output
  cfg.dim = dim;
  cfg.n_heads = heads;
  cfg.n_layers = n_layers;
  cfg.max_seq_len = 5;  // pos_embeddings [5, 8]: uneven on dp
  return cfg;
}

struct Batch {
  dt::Tensor tokens, targets;  // global
};

Batch make_batch(const nn::TransformerConfig& cfg, int64_t rows, uint64_t seed) {
  dt::Generator g(seed);
  Batch b;
  b.tokens = dt::randint(0, cfg.vocab_size, {rows, 5}, dt::TensorOptions(dt::kInt64), &g);
  b.targets = dt::randint(0, cfg.vocab_size, {rows, 5}, dt::TensorOptions(dt::kInt64), &g);
  return b;
}

// Rank r's two rows of the batch: its tokens and its flattened targets.
std::pair<dt::Tensor, dt::Tensor> rank_rows(const Batch& b, int64_t r) {
  return {b.tokens.narrow(0, 2 * r, 2).contiguous(),
          b.targets.narrow(0, 2 * r, 2).contiguous().reshape({-1})};
}

// Mean cross-entropy of `m` on rows [begin, begin + count) of the batch; backward.
double loss_backward(nn::Module& m, const Batch& b, int64_t begin, int64_t count, int64_t vocab) {
  const dt::Tensor tok = b.tokens.narrow(0, begin, count).contiguous();
  const dt::Tensor tgt = b.targets.narrow(0, begin, count).contiguous().reshape({-1});
  const int64_t rows[] = {-1, vocab};
  const dt::DTensor loss =
      dt::cross_entropy(dt::reshape(m(nn::local_dtensor(tok)), rows), nn::local_dtensor(tgt));
  loss.backward();
  return loss.full_tensor().to(dt::kFloat64).item<double>();
}

void require_same_params(const nn::Module& got, const nn::Module& want, double tol) {
  const auto a = got.named_parameters();
  const auto b = want.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first << " " << a[i].second.str());
    CHECK(max_diff(a[i].second.full_tensor(), b[i].second.to_local()) < tol);
  }
}

// Trains `model` (data parallel over dp ranks, `dp` of them, this rank `dp_rank`) and a
// single-device copy 4 steps on the same global batches; parameters must stay equal.
void train_and_compare(nn::Module& model, nn::Module& ref, int64_t dp, int64_t dp_rank,
                       int64_t vocab) {
  dt::optim::AdamW opt(model.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW ref_opt(ref.parameters(), dt::optim::AdamWOptions(1e-2));
  const int64_t per_rank = 2;
  for (int step = 0; step < 4; ++step) {
    const Batch b = make_batch(small_config(), dp * per_rank, 100 + step);
    opt.zero_grad();
    loss_backward(model, b, dp_rank * per_rank, per_rank, vocab);
    for (const dt::DTensor& p : model.parameters()) {
      REQUIRE(p.grad().defined());
      CHECK(p.grad().placements() == p.placements());
    }
    opt.step();
    ref_opt.zero_grad();
    loss_backward(ref, b, 0, dp * per_rank, vocab);
    ref_opt.step();
  }
  require_same_params(model, ref, 2e-4);
}

dt::DeviceMesh dp_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"dp"});
}

}  // namespace

TEST_CASE("replicate: DDP training equals single-device; one all_reduce per bucket",
          "[dp][replicate]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config();
  dt::manual_seed(5);
  nn::Transformer model(cfg);
  dt::manual_seed(5);
  nn::Transformer ref(cfg);
  const auto mesh = dp_mesh();
  auto dp = dt::replicate(model, mesh);
  CHECK(dp->num_buckets() == 1);
  for (const dt::DTensor& p : model.parameters()) {
    CHECK(p.placements() == dt::Placements{dt::Replicate()});
  }
  {  // Collectives of one step: one all_reduce (one bucket), nothing in forward.
    const Batch b = make_batch(cfg, 2 * W, 1);
    dt::CommDebugMode comm;
    loss_backward(model, b, 2 * mesh.get_local_rank(0), 2, cfg.vocab_size);
    if (W > 1) {
      CHECK(comm.count(CollectiveKind::kAllReduce) == 1);
      CHECK(comm.total_count() == 1);
    }
    model.zero_grad();
  }
  train_and_compare(model, ref, W, mesh.get_local_rank(0), cfg.vocab_size);
}

TEST_CASE("replicate: small buckets give one all_reduce each; no_sync accumulates locally",
          "[dp][replicate]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config(1);
  dt::manual_seed(6);
  nn::Transformer model(cfg);
  dt::manual_seed(6);
  nn::Transformer ref(cfg);
  const auto mesh = dp_mesh();
  const int64_t r = mesh.get_local_rank(0);
  auto dp = dt::replicate(model, mesh, {.bucket_cap_bytes = 256});
  CHECK(dp->num_buckets() > 2);
  const Batch b1 = make_batch(cfg, 2 * W, 3), b2 = make_batch(cfg, 2 * W, 4);
  {
    dt::NoSync guard(*dp);
    dt::CommDebugMode comm;
    loss_backward(model, b1, 2 * r, 2, cfg.vocab_size);
    CHECK(comm.total_count() == 0);
    for (const dt::DTensor& p : model.parameters()) CHECK(!p.grad().defined());
  }
  {
    dt::CommDebugMode comm;
    loss_backward(model, b2, 2 * r, 2, cfg.vocab_size);
    if (W > 1) CHECK(comm.count(CollectiveKind::kAllReduce) == dp->num_buckets());
  }
  loss_backward(ref, b1, 0, 2 * W, cfg.vocab_size);
  loss_backward(ref, b2, 0, 2 * W, cfg.vocab_size);
  const auto a = model.named_parameters();
  const auto b = ref.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(a[i].second.grad().defined());
    CHECK(max_diff(a[i].second.grad().full_tensor(), b[i].second.grad().to_local()) < 1e-4);
  }
}

TEST_CASE("fully_shard: FSDP training equals single-device; per-unit collectives", "[dp][fsdp]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config();
  dt::manual_seed(7);
  nn::Transformer model(cfg);
  dt::manual_seed(7);
  nn::Transformer ref(cfg);
  const auto mesh = dp_mesh();
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  const int64_t units = static_cast<int64_t>(dp->units().size());
  CHECK(units == 1 + cfg.n_layers);
  for (const dt::DTensor& p : model.parameters()) {
    CHECK(p.placements() == dt::Placements{dt::Shard(0)});
  }
  INFO(dp->grouping_str());
  {
    const Batch b = make_batch(cfg, 2 * W, 1);
    const int64_t r = mesh.get_local_rank(0);
    const auto [tok, tgt] = rank_rows(b, r);
    const int64_t rows[] = {-1, cfg.vocab_size};
    dt::DTensor loss;
    {
      dt::CommDebugMode comm;
      loss = dt::cross_entropy(dt::reshape(model(nn::local_dtensor(tok)), rows),
                               nn::local_dtensor(tgt));
      if (W > 1) {
        CHECK(comm.count(CollectiveKind::kAllGather) == units);
        CHECK(comm.total_count() == units);
      }
    }
    {
      dt::CommDebugMode comm;
      loss.backward();
      if (W > 1) {
        // Non-root units gather again in backward (reshard_after_forward); one
        // reduce_scatter per unit.
        CHECK(comm.count(CollectiveKind::kAllGather) == units - 1);
        CHECK(comm.count(CollectiveKind::kReduceScatter) == units);
        CHECK(comm.total_count() == 2 * units - 1);
      }
    }
    model.zero_grad();
  }
  train_and_compare(model, ref, W, mesh.get_local_rank(0), cfg.vocab_size);
}

TEST_CASE("fully_shard: from the second step each unit's gather is launched ahead (prefetch)",
          "[dp][fsdp]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config(3);
  const auto mesh = dp_mesh();
  const int64_t r = mesh.get_local_rank(0);
  dt::manual_seed(8);
  nn::Transformer model(cfg);
  dt::manual_seed(8);
  nn::Transformer plain(cfg);
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  auto dp_plain = dt::fully_shard(
      plain, mesh, {.grouping = {.module_types = {"TransformerBlock"}}, .prefetch = false});
  const int64_t units = static_cast<int64_t>(dp->units().size());
  const int64_t blocks = units - 1;  // the root unit is gathered first, by nobody ahead of it
  REQUIRE(blocks == cfg.n_layers);
  dt::optim::AdamW opt(model.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW opt_plain(plain.parameters(), dt::optim::AdamWOptions(1e-2));
  // Expected prefetches after each step's forward and backward: none in the first forward (the
  // order is being recorded); then every block in forward (the root prefetches the first), and
  // every block but the first in backward (each prefetches the one before it).
  // Gathers in backward: every block in the first step; from the second, once the order is
  // known, the last block stays gathered from its forward into its backward (the first).
  const int64_t after_forward[] = {0, 2 * blocks - 1, 4 * blocks - 2};
  const int64_t after_backward[] = {blocks - 1, 3 * blocks - 2, 5 * blocks - 3};
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(cfg, 2 * W, 40 + step);
    const auto [tok, tgt] = rank_rows(b, r);
    const int64_t rows[] = {-1, cfg.vocab_size};
    dt::DTensor loss;
    {
      dt::CommDebugMode comm;
      loss = dt::cross_entropy(dt::reshape(model(nn::local_dtensor(tok)), rows),
                               nn::local_dtensor(tgt));
      // Prefetched or not, one all-gather per unit per forward.
      if (W > 1) CHECK(comm.count(CollectiveKind::kAllGather) == units);
    }
    CHECK(dp->num_prefetched() == after_forward[step]);
    {
      dt::CommDebugMode comm;
      loss.backward();
      const int64_t gathers = step == 0 ? blocks : blocks - 1;
      if (W > 1) CHECK(comm.count(CollectiveKind::kAllGather) == gathers);
    }
    CHECK(dp->num_prefetched() == after_backward[step]);
    opt.step();
    opt.zero_grad();
    dt::cross_entropy(dt::reshape(plain(nn::local_dtensor(tok)), rows), nn::local_dtensor(tgt))
        .backward();
    opt_plain.step();
    opt_plain.zero_grad();
  }
  CHECK(dp_plain->num_prefetched() == 0);
  // The same collectives on the same data: bit-identical parameters.
  const auto a = model.named_parameters();
  const auto p = plain.named_parameters();
  REQUIRE(a.size() == p.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(max_diff(a[i].second.full_tensor(), p[i].second.full_tensor()) == 0);
  }
}

TEST_CASE("fully_shard mixed precision: float32 compute and reductions over float64 shards",
          "[dp][fsdp]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config();
  const auto mesh = dp_mesh();
  const int64_t r = mesh.get_local_rank(0);
  dt::manual_seed(9);
  nn::Transformer ref(cfg);  // float32, one device
  // Two float64 copies of it: one with float32 mixed precision, one without.
  nn::Transformer mixed(cfg, {.dtype = dt::kFloat64});
  nn::Transformer full(cfg, {.dtype = dt::kFloat64});
  const auto want = ref.named_parameters();
  for (nn::Transformer* m : {&mixed, &full}) {
    const auto got = m->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      dt::Tensor local = got[i].second.to_local();
      local.copy_(want[i].second.to_local());
    }
  }
  const dt::GroupingPolicy blocks{.module_types = {"TransformerBlock"}};
  auto dp = dt::fully_shard(mixed, mesh, {.grouping = blocks, .param_dtype = dt::kFloat32});
  auto dp_full = dt::fully_shard(full, mesh, {.grouping = blocks});
  dt::optim::AdamW opt(mixed.parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW ref_opt(ref.parameters(), dt::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(cfg, 2 * W, 60 + step);
    const auto [tok, tgt] = rank_rows(b, r);
    const int64_t rows[] = {-1, cfg.vocab_size};
    int64_t bytes[2][2];  // [mixed, full][all_gather, reduce_scatter]
    for (int k = 0; k < (step == 0 ? 2 : 1); ++k) {
      nn::Transformer& m = k == 0 ? mixed : full;
      dt::CommDebugMode comm;
      const dt::DTensor logits = m(nn::local_dtensor(tok));
      CHECK(logits.dtype() == (k == 0 ? dt::kFloat32 : dt::kFloat64));
      dt::cross_entropy(dt::reshape(logits, rows), nn::local_dtensor(tgt)).backward();
      bytes[k][0] = comm.bytes(CollectiveKind::kAllGather);
      bytes[k][1] = comm.bytes(CollectiveKind::kReduceScatter);
    }
    if (step == 0 && W > 1) {
      // Gathers and reductions move float32, half the bytes of the float64 run.
      CHECK(2 * bytes[0][0] == bytes[1][0]);
      CHECK(2 * bytes[0][1] == bytes[1][1]);
    }
    for (const dt::DTensor& p : mixed.parameters()) {
      CHECK(p.dtype() == dt::kFloat64);  // the master shards
      REQUIRE(p.grad().defined());
      CHECK(p.grad().dtype() == dt::kFloat64);
    }
    opt.step();
    opt.zero_grad();
    loss_backward(ref, b, 0, 2 * W, cfg.vocab_size);
    ref_opt.step();
    ref_opt.zero_grad();
  }
  require_same_params(mixed, ref, 1e-4);

  // replicate (DDP) casts the replicated parameters the same way and all-reduces float32.
  nn::Transformer ddp_model(cfg, {.dtype = dt::kFloat64});
  {
    const auto got = ddp_model.named_parameters();
    const auto now = ref.named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      dt::Tensor local = got[i].second.to_local();
      local.copy_(now[i].second.to_local());
    }
  }
  auto ddp = dt::replicate(ddp_model, mesh, {.param_dtype = dt::kFloat32});
  const Batch b = make_batch(cfg, 2 * W, 70);
  const auto [tok, tgt] = rank_rows(b, r);
  const int64_t rows[] = {-1, cfg.vocab_size};
  const dt::DTensor logits = ddp_model(nn::local_dtensor(tok));
  CHECK(logits.dtype() == dt::kFloat32);
  dt::cross_entropy(dt::reshape(logits, rows), nn::local_dtensor(tgt)).backward();
  loss_backward(ref, b, 0, 2 * W, cfg.vocab_size);
  const auto g = ddp_model.named_parameters();
  const auto w = ref.named_parameters();
  for (size_t i = 0; i < g.size(); ++i) {
    INFO(g[i].first);
    REQUIRE(g[i].second.grad().defined());
    CHECK(g[i].second.grad().dtype() == dt::kFloat64);
    CHECK(max_diff(g[i].second.grad().full_tensor(), w[i].second.grad().to_local()) < 1e-5);
  }
  CHECK_THROWS_WITH(dt::fully_shard(ref, mesh, {.param_dtype = dt::kInt64}),
                    Catch::Contains("[fully_shard] param_dtype int64 is not a floating dtype"));
}

TEST_CASE("data_parallel DEFAULT: shards only evenly divisible dim 0, trains like one device",
          "[dp][default]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config();
  dt::manual_seed(8);
  nn::Transformer model(cfg);
  dt::manual_seed(8);
  nn::Transformer ref(cfg);
  const auto mesh = dp_mesh();
  auto dp = dt::data_parallel(model, mesh, dt::DataParallelStyle::kDefault,
                              {.grouping = {.min_unit_numel = 200}});
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    const bool even = p.size(0) % W == 0;
    CHECK(p.placements() ==
          dt::Placements{even ? dt::Placement(dt::Shard(0)) : dt::Placement(dt::Replicate())});
  }
  if (W > 1) CHECK(dp->num_buckets() >= 1);
  train_and_compare(model, ref, W, mesh.get_local_rank(0), cfg.vocab_size);
}

namespace {
using dt::test::TiedLinear;
class Holder : public nn::Module {
 public:
  std::string type_name() const override { return "Holder"; }
};
// x -> out.head(mid(embed(x))) where out.head.weight is embed.weight.
class TiedModel : public nn::Module {
 public:
  TiedModel() {
    embed_ = register_module("embed", std::make_shared<nn::Linear>(6, 6, true));
    mid_ = register_module("mid", std::make_shared<nn::Linear>(6, 5, true));
    back_ = register_module("back", std::make_shared<nn::Linear>(5, 6, false));
    auto holder = register_module("out", std::make_shared<Holder>());
    head_ = holder->register_module("head", std::make_shared<TiedLinear>(embed_->param("weight")));
  }
  std::string type_name() const override { return "TiedModel"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    return (*head_)((*back_)((*mid_)((*embed_)(x))));
  }

 private:
  nn::ModulePtr embed_, mid_, back_, head_;
};
}  // namespace

TEST_CASE("grouping: a tied weight belongs to its modules' common ancestor; FSDP trains it",
          "[dp][grouping]") {
  const int64_t W = dt::world_size();
  dt::manual_seed(9);
  TiedModel model;
  dt::manual_seed(9);
  TiedModel ref;
  REQUIRE(model.named_parameters().size() == 5);  // the tied weight listed once
  const auto mesh = dp_mesh();
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"Linear", "TiedLinear"}}});
  const auto& units = dp->units();
  INFO(dp->grouping_str());
  REQUIRE(units.size() == 5);  // root, embed, mid, back, out.head
  REQUIRE(units[0].fqn.empty());
  REQUIRE(units[0].params.size() == 1);
  CHECK(units[0].params[0].fqn == "embed.weight");
  CHECK(units[0].params[0].slots.size() == 2);
  CHECK(units[1].fqn == "embed");
  CHECK(units[1].params.size() == 1);  // its bias only
  CHECK(units[4].fqn == "out.head");
  CHECK(units[4].params.empty());
  CHECK(dp->grouping_str().find("embed.weight [6, 6] (tied x2)") != std::string::npos);
  // Threshold policy at 40 elements: only embed (36 + 6, counted per module) is a unit; the
  // rest (mid 35, back 30, out.head 36) falls to the root, and so does the tied weight.
  {
    dt::manual_seed(9);
    TiedModel other;
    const auto g = dt::group_modules(other, {.min_unit_numel = 40});
    REQUIRE(g.size() == 2);
    CHECK(g[1].fqn == "embed");
    CHECK(g[1].params.size() == 1);  // embed.bias
    CHECK(g[0].params.size() == 4);  // embed.weight (tied), mid.weight, mid.bias, back.weight
  }

  dt::optim::SGD opt(model.parameters(), dt::optim::SGDOptions(0.1));
  dt::optim::SGD ref_opt(ref.parameters(), dt::optim::SGDOptions(0.1));
  const int64_t r = mesh.get_local_rank(0);
  for (int step = 0; step < 3; ++step) {
    dt::Generator g(50 + step);
    const dt::Tensor x = dt::randn({3 * W, 6}, {}, &g);
    const dt::Tensor w = dt::randn({3 * W, 6}, {}, &g);
    auto loss = [&](nn::Module& m, int64_t begin, int64_t count) {
      const dt::DTensor y = m(nn::local_dtensor(x.narrow(0, begin, count).contiguous()));
      // mean over rows of sum(y * w): per-rank means average to the global mean.
      return dt::div(dt::sum(dt::mul(y, nn::local_dtensor(w.narrow(0, begin, count).contiguous()))),
                     dt::Scalar(static_cast<double>(count)));
    };
    opt.zero_grad();
    loss(model, 3 * r, 3).backward();
    opt.step();
    ref_opt.zero_grad();
    loss(ref, 0, 3 * W).backward();
    ref_opt.step();
  }
  require_same_params(model, ref, 1e-4);
}

TEST_CASE("fully_shard: forward holds one unit's gathered parameters at a time",
          "[dp][fsdp][memory]") {
  const int64_t W = dt::world_size();
  const nn::TransformerConfig cfg = small_config(8, 32, 2);
  auto forward_peak = [&](bool reshard, int64_t* largest_unit_bytes, int64_t* root_bytes,
                          int64_t* total_bytes) {
    dt::manual_seed(10);
    nn::Transformer model(cfg);
    *total_bytes = 0;
    for (const dt::DTensor& p : model.parameters()) *total_bytes += p.numel() * 4;
    auto dp = dt::fully_shard(
        model, dp_mesh(),
        {.grouping = {.module_types = {"TransformerBlock"}}, .reshard_after_forward = reshard});
    *largest_unit_bytes = 0;
    for (const dt::Unit& u : dp->units()) {
      int64_t b = 0;
      for (const dt::UnitParam& p : u.params) {
        b += p.slots[0].module->param(p.slots[0].name).numel() * 4;
      }
      if (u.fqn.empty()) {
        *root_bytes = b;
      } else {
        *largest_unit_bytes = std::max(*largest_unit_bytes, b);
      }
    }
    const Batch b = make_batch(cfg, 1, 1);
    const dt::Tensor tok = b.tokens.narrow(1, 0, 2).contiguous();
    const int64_t base = dt::memory_stats().current_bytes;
    dt::reset_peak_memory_stats();
    dt::DTensor logits = model(nn::local_dtensor(tok));
    const int64_t peak = dt::memory_stats().peak_bytes - base;
    dt::sum(logits).backward();
    return peak;
  };
  int64_t largest = 0, root = 0, total = 0;
  const int64_t with = forward_peak(true, &largest, &root, &total);
  const int64_t without = forward_peak(false, &largest, &root, &total);
  // Gathered root + one gathered unit + its gather buffers (one unit, plus one shard) +
  // activations of a [1, 2] batch (slack).
  const int64_t slack = 64 * 1024;
  INFO("forward peak " << with << " B with reshard, " << without << " B without; largest unit "
                       << largest << " B, root " << root << " B, total " << total << " B");
  CHECK(with <= root + 3 * largest + slack);
  CHECK(without >= total - slack);
  if (W > 1) CHECK(with < without);
}

TEST_CASE("data parallel gradients are views of their reduction's buffer, not copies",
          "[dp][memory]") {
  const int64_t W = dt::world_size();
  const nn::TransformerConfig cfg = small_config(2, 64, 4);
  const Batch b = make_batch(cfg, 2 * W, 11);
  const int64_t r = dp_mesh().get_local_rank(0);
  // One step's peak above its start (forward + backward of this rank's two rows).
  auto step_peak = [&](nn::Module& m) {
    const int64_t base = dt::memory_stats().current_bytes;
    dt::reset_peak_memory_stats();
    loss_backward(m, b, 2 * r, 2, cfg.vocab_size);
    return dt::memory_stats().peak_bytes - base;
  };
  int64_t grad_bytes = 0, largest = 0;
  dt::manual_seed(12);
  nn::Transformer local(cfg);  // no data parallelism: activations and whole gradients
  for (const dt::DTensor& p : local.parameters()) {
    grad_bytes += p.numel() * 4;
    largest = std::max(largest, p.numel() * 4);
  }
  step_peak(local);  // warm: later steps allocate the same sizes
  local.zero_grad();
  const int64_t local_peak = step_peak(local);

  dt::manual_seed(12);
  nn::Transformer ddp(cfg);
  // Buckets of one parameter or so: at most one is packed beside its gradients at a time.
  auto dp = dt::replicate(ddp, dp_mesh(), {.bucket_cap_bytes = 256});
  step_peak(ddp);
  ddp.zero_grad();
  const int64_t ddp_peak = step_peak(ddp);
  INFO("step peak " << ddp_peak << " B replicate, " << local_peak << " B local; gradients "
                    << grad_bytes << " B, largest " << largest << " B");
  // A copy of every reduced gradient into .grad would add grad_bytes at the end of backward.
  CHECK(ddp_peak <= local_peak + 2 * largest + 16 * 1024);
  CHECK(2 * largest + 16 * 1024 < grad_bytes);  // so that the check above can fail

  // One bucket: every gradient is a view of its all-reduce buffer.
  dt::manual_seed(12);
  nn::Transformer one(cfg);
  dt::replicate(one, dp_mesh());
  loss_backward(one, b, 2 * r, 2, cfg.vocab_size);
  const auto params = one.parameters();
  for (const dt::DTensor& p : params) {
    REQUIRE(p.grad().defined());
    CHECK(p.grad().to_local().storage().data() == params[0].grad().to_local().storage().data());
  }
  // fully_shard: a unit's gradients are views of its reduce-scatter output.
  dt::manual_seed(12);
  nn::Transformer fsdp(cfg);
  auto fs = dt::fully_shard(fsdp, dp_mesh(), {.grouping = {.module_types = {"TransformerBlock"}}});
  loss_backward(fsdp, b, 2 * r, 2, cfg.vocab_size);
  for (const dt::Unit& u : fs->units()) {
    INFO(u.fqn);
    const void* buffer = nullptr;
    for (const dt::UnitParam& up : u.params) {
      const dt::DTensor p = up.slots[0].module->param(up.slots[0].name);
      REQUIRE(p.grad().defined());
      if (p.grad().to_local().numel() == 0) continue;  // an empty shard has no memory
      const void* data = p.grad().to_local().storage().data();
      if (buffer == nullptr) buffer = data;
      CHECK(data == buffer);
    }
  }
}

TEST_CASE("TP x FSDP on a 2x2 mesh trains like one device", "[dp][fsdp][tp]") {
  if (dt::world_size() != 4) return;  // the 2x2 mesh needs exactly 4 ranks
  nn::TransformerConfig cfg = small_config();
  cfg.dim = 8;
  cfg.n_heads = 2;
  dt::manual_seed(11);
  nn::Transformer model(cfg);
  dt::manual_seed(11);
  nn::Transformer ref(cfg);
  const auto mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
  dt::parallelize_module(model, mesh[{"tp"}], dt::transformer_tp_plan());
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  INFO(dp->grouping_str());
  // A colwise weight (S(0) on tp) is sharded on its dim 1 on dp; rowwise on dim 0.
  const auto& wq = model.get_parameter("layers.0.attention.wq.weight");
  CHECK(wq.placements() == dt::Placements{dt::Shard(1), dt::Shard(0)});
  const auto& wo = model.get_parameter("layers.0.attention.wo.weight");
  CHECK(wo.placements() == dt::Placements{dt::Shard(0), dt::Shard(1)});
  train_and_compare(model, ref, 2, mesh.get_local_rank(0), cfg.vocab_size);
}

TEST_CASE(
    "replicate: a module run twice before one backward sums both gradients; frozen "
    "parameters stay out",
    "[dp][replicate]") {
  const int64_t W = dt::world_size();
  const auto cfg = small_config();
  dt::manual_seed(9);
  nn::Transformer model(cfg);
  dt::manual_seed(9);
  nn::Transformer ref(cfg);
  // Frozen in both: no gradient, and the forward must still see it on the compute mesh.
  for (nn::Module* m : {static_cast<nn::Module*>(&model), static_cast<nn::Module*>(&ref)}) {
    for (auto& [name, p] : m->named_parameters()) {
      if (name == "pos_embeddings.weight") p.requires_grad_(false);
    }
  }
  const auto mesh = dp_mesh();
  auto dp = dt::replicate(model, mesh);
  const Batch b = make_batch(cfg, 2 * W, 31);
  const int64_t me = mesh.get_local_rank(0);
  const int64_t rows[] = {-1, cfg.vocab_size};
  // Two forwards (one row each) and one backward of their summed loss.
  auto two_row_loss = [&](nn::Module& m, int64_t rank) {
    dt::DTensor total;
    for (int64_t r = 2 * rank; r < 2 * rank + 2; ++r) {
      const dt::Tensor tok = b.tokens.narrow(0, r, 1).contiguous();
      const dt::Tensor tgt = b.targets.narrow(0, r, 1).contiguous().reshape({-1});
      const dt::DTensor l =
          dt::cross_entropy(dt::reshape(m(nn::local_dtensor(tok)), rows), nn::local_dtensor(tgt));
      total = total.defined() ? total + l : l;
    }
    return total;
  };
  two_row_loss(model, me).backward();
  // Reference: the mean over ranks of each rank's two-row loss, on one device.
  dt::DTensor ref_total;
  for (int64_t r = 0; r < W; ++r) {
    const dt::DTensor l = two_row_loss(ref, r);
    ref_total = ref_total.defined() ? ref_total + l : l;
  }
  (ref_total * (1.0 / static_cast<double>(W))).backward();
  const auto got = model.named_parameters();
  const auto want = ref.named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    if (got[i].first == "pos_embeddings.weight") {
      CHECK_FALSE(got[i].second.grad().defined());
      continue;
    }
    REQUIRE(got[i].second.grad().defined());
    CHECK(max_diff(got[i].second.grad().full_tensor(), want[i].second.grad().to_local()) < 1e-5);
  }
}

namespace {

// The input passed through a node whose backward raises while `armed`. The engine runs nodes
// latest-created first and DDP's parameter nodes are created when the forward starts, after
// this one: a backward through it fails after every parameter's gradient reached DDP (its
// bucket launched), before the end-of-backward callback.
dt::DTensor failing_input(const dt::DTensor& x, const bool* armed) {
  const dt::DTensor* in[] = {&x};
  return dt::autograd::record_function("Boom", in, x.detach(),
                                       [armed](absl::Span<const dt::DTensor> g) {
                                         if (*armed) throw std::runtime_error("boom in backward");
                                         return dt::DTensorList{g[0]};
                                       });
}

}  // namespace

TEST_CASE("replicate: after a backward that raised midway the next step reduces its gradients",
          "[dp][replicate]") {
  const int64_t W = dt::world_size();
  bool armed = true;
  dt::manual_seed(8);
  nn::MLP model(4, 6);
  dt::manual_seed(8);
  nn::MLP ref(4, 6);
  const auto mesh = dp_mesh();
  const int64_t r = mesh.get_local_rank(0);
  // One bucket per parameter: each is launched as soon as its gradient arrives.
  auto dp = dt::replicate(model, mesh, {.bucket_cap_bytes = 16});
  REQUIRE(dp->num_buckets() == 4);
  dt::Generator g(9);
  const dt::Tensor x = dt::randn({2 * W, 4}, {}, &g);
  auto input = [&](const dt::Tensor& t) {
    dt::DTensor d = nn::local_dtensor(t);
    d.requires_grad_(true);
    return failing_input(d, &armed);
  };
  const dt::Tensor mine = x.narrow(0, 2 * r, 2).contiguous();
  {
    dt::CommDebugMode comm;
    REQUIRE_THROWS_WITH(dt::mean(model(input(mine))).backward(),
                        Catch::Contains("boom in backward"));
    if (W > 1) CHECK(comm.count(CollectiveKind::kAllReduce) == 4);  // launched, then it failed
  }
  model.zero_grad();
  armed = false;
  dt::mean(model(input(mine))).backward();
  dt::mean(ref(input(x))).backward();
  const auto a = model.named_parameters();
  const auto b = ref.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(a[i].second.grad().defined());
    CHECK(max_diff(a[i].second.grad().full_tensor(), b[i].second.grad().to_local()) < 1e-5);
  }
}

TEST_CASE(
    "fully_shard: several forwards before their backwards (GPipe's microbatches) keep the root "
    "unit's gathered parameters until the last backward",
    "[dp][fsdp]") {
  // The root unit is never resharded after forward and has no re-gather hook: its backward once
  // released its gathered parameters while a later microbatch's backward still read them.
  const int64_t W = dt::world_size();
  const auto cfg = small_config();
  dt::manual_seed(13);
  nn::Transformer model(cfg);
  dt::manual_seed(13);
  nn::Transformer ref(cfg);
  const auto mesh = dp_mesh();
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"TransformerBlock"}}});
  const Batch b = make_batch(cfg, 4 * W, 57);
  const int64_t me = mesh.get_local_rank(0);
  const int64_t rows[] = {-1, cfg.vocab_size};
  // This rank's 4 rows as 2 microbatches: both forwards, then both backwards (latest first).
  auto microbatch_losses = [&](nn::Module& m, int64_t first_row) {
    std::vector<dt::DTensor> losses;
    for (int64_t mb = 0; mb < 2; ++mb) {
      const dt::Tensor tok = b.tokens.narrow(0, first_row + 2 * mb, 2).contiguous();
      const dt::Tensor tgt = b.targets.narrow(0, first_row + 2 * mb, 2).contiguous().reshape({-1});
      losses.push_back(dt::mul(
          dt::cross_entropy(dt::reshape(m(nn::local_dtensor(tok)), rows), nn::local_dtensor(tgt)),
          0.5));
    }
    return losses;
  };
  std::vector<dt::DTensor> losses = microbatch_losses(model, 4 * me);
  losses[1].backward();
  losses[0].backward();
  for (int64_t r = 0; r < W; ++r) {
    std::vector<dt::DTensor> ref_losses = microbatch_losses(ref, 4 * r);
    for (const dt::DTensor& l : ref_losses) dt::div(l, static_cast<double>(W)).backward();
  }
  const auto got = model.named_parameters();
  const auto want = ref.named_parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(max_diff(got[i].second.grad().full_tensor(), want[i].second.grad().to_local()) < 1e-5);
  }
}

// A gathered parameter keeps its version across the backward's re-gather only when it gets the
// same values back: an optimizer step between a forward and its backward changes the shards,
// and the backward is refused (as for a module that is not sharded) instead of running on the
// new values. Before, every re-gather put the old version back (review R1, finding 1).
TEST_CASE("fully_shard: a step between a forward and its backward is caught, as unsharded",
          "[dp][fsdp]") {
  const auto mesh = dp_mesh();
  for (const bool sharded : {false, true}) {
    INFO((sharded ? "fully_shard" : "unsharded"));
    dt::manual_seed(1);
    nn::MLP model(4, 8, nn::Activation::kGelu);
    std::shared_ptr<dt::DataParallel> dp;
    if (sharded) dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"Linear"}}});
    dt::optim::SGD opt(model.parameters(), dt::optim::SGDOptions(0.5));
    const dt::DTensor x = nn::local_dtensor(dt::randn({3, 4}));
    dt::sum(model(x)).backward();  // a normal step: no error
    opt.step();
    dt::DTensor loss = dt::sum(model(x));
    opt.step();  // misplaced: the parameters change under the pending backward
    REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("modified by an in-place op"));
  }
  // The normal order still trains (the re-gather of unchanged shards keeps the version).
  dt::manual_seed(1);
  nn::MLP model(4, 8, nn::Activation::kGelu);
  auto dp = dt::fully_shard(model, mesh, {.grouping = {.module_types = {"Linear"}}});
  dt::optim::SGD opt(model.parameters(), dt::optim::SGDOptions(0.5));
  const dt::DTensor x = nn::local_dtensor(dt::randn({3, 4}));
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    dt::sum(model(x)).backward();
    opt.step();
  }
  CHECK(std::isfinite(dt::sum(model(x)).full_tensor().item<float>()));
}

TEST_CASE("fully_shard / replicate train as PyTorch's FSDP2 / DDP (torch_dp_references.h)",
          "[dp][torch]") {
  // tests/parallel/torch_dp_parity: a tied embedding / head, LayerNorm, an uneven Linear, a
  // frozen Linear and one used on even steps only, float64, 5 steps, clip_grad_norm_(0.05) before
  // the last; PyTorch 2.15's full parameters after them (FSDP2 fully_shard per Linear and the root;
  // DistributedDataParallel with no_sync). The global batch is the same on 1, 2 and 4 ranks.
  namespace dp = dp_probe;
  const int64_t W = dt::world_size();
  const auto mesh = dp_mesh();
  const int64_t r = mesh.get_local_rank(0);
  struct Case {
    const char* tag;
    bool fsdp, adamw;
    int accum;
  };
  for (const Case c : {Case{"fsdp_adamw", true, true, 1}, Case{"fsdp_accum3", true, false, 3},
                       Case{"ddp_accum3", false, false, 3}}) {
    INFO(c.tag);
    dp::Net m(dt::kFloat64);
    dt::DataParallelOptions o;
    o.grouping.module_types = {"Linear"};
    auto dpl = c.fsdp ? dt::fully_shard(m, mesh, o) : dt::replicate(m, mesh, o);
    std::vector<dt::DTensor> params;
    for (const dt::DTensor& p : m.parameters())
      if (p.requires_grad()) params.push_back(p);
    std::unique_ptr<dt::optim::Optimizer> opt;
    if (c.adamw) {
      opt = std::make_unique<dt::optim::AdamW>(params, dt::optim::AdamWOptions(1e-2));
    } else {
      opt = std::make_unique<dt::optim::SGD>(params, dt::optim::SGDOptions(0.1).momentum(0.9));
    }
    for (int step = 0; step < 5; ++step) {
      m.step = step;
      opt->zero_grad();
      for (int micro = 0; micro < c.accum; ++micro) {
        if (c.accum > 1) dpl->set_requires_gradient_sync(micro == c.accum - 1);
        auto [tok, tgt] = dp::batch(step, micro, r, W);
        const int64_t rows[] = {-1, dp::V};
        dt::cross_entropy(dt::reshape(m(nn::local_dtensor(tok)), rows), nn::local_dtensor(tgt))
            .backward();
      }
      // The last step clips (PyTorch's total norm of the sharded gradients: probe.py).
      if (step == 4) dt::optim::clip_grad_norm_(params, 0.05);
      opt->step();
    }
    // FSDP2 shards every parameter, frozen ones included (gathered for forward and backward,
    // never reduced: no gradient); DDP replicates them.
    for (const auto& [name, p] : m.named_parameters()) {
      INFO(name);
      CHECK(p.placements() ==
            dt::Placements{c.fsdp ? dt::Placement(dt::Shard(0)) : dt::Placement(dt::Replicate())});
      if (name.rfind("frozen.", 0) == 0) CHECK_FALSE(p.grad().defined());
    }
    int64_t checked = 0;
    for (const auto& ref : torch_dp_ref::kFinalParams) {
      if (ref.tag != c.tag) continue;
      INFO(ref.name);
      const dt::Tensor got = m.get_parameter(ref.name).full_tensor();
      CHECK(max_diff(got, dt::from_vector(ref.values, got.shape())) < 1e-9);
      ++checked;
    }
    CHECK(checked == 8);
  }
}

// A unit none of whose sharded parameters requires grad has no gather node whose backward
// reshards it (issue L2-3). Its gathered parameters must still come back after backward, as
// FSDP2's final callback reshards every unit: a frozen unit regathered for the input gradient
// (here no parameter trains at all, so nothing else ends the backward) and a frozen root (never
// resharded after forward) with a trained child unit. Two steps each (the second knows the
// forward order: the last unit stays gathered after forward). Values against one device.
TEST_CASE("fully_shard: a frozen unit is released right after its own backward",
          "[dp][fsdp][memory]") {
  // A frozen backbone of 4 Linear units under a trained head, the input's gradient flowing
  // through it (issue L3-1): each frozen unit is released once its input's gradient is
  // computed, so backward holds about one frozen unit gathered (and its neighbour's prefetch),
  // not all four (the end-of-backward release alone held every regathered unit to the end).
  const int64_t D = 128;
  const int64_t linear_bytes = (D * D + D) * 4;
  dt::Generator gen(30);
  const dt::Tensor x = dt::randn({2, D}, {}, &gen);
  const dt::Tensor w = dt::randn({2, D}, {}, &gen);
  auto step = [&](nn::Module& m, int64_t* peak) {
    dt::DTensor xi = nn::local_dtensor(x.clone());
    xi.requires_grad_(true);
    {
      const dt::DTensor loss = dt::sum(dt::mul(m(xi), nn::local_dtensor(w)));
      const int64_t start = dt::memory_stats().current_bytes;
      dt::reset_peak_memory_stats();
      loss.backward();
      *peak = dt::memory_stats().peak_bytes - start;
    }
    return xi.grad().to_local();
  };
  auto frozen_except = [](nn::Module& m, const std::string& trained) {
    for (auto& [name, p] : m.named_parameters()) {
      p.requires_grad_(!trained.empty() && name.rfind(trained, 0) == 0);
    }
  };
  SECTION("4 frozen units and a trained head") {
    auto make = [&] {
      dt::manual_seed(31);
      std::vector<nn::ModulePtr> layers;
      for (int i = 0; i < 5; ++i) layers.push_back(std::make_shared<nn::Linear>(D, D));
      return std::make_shared<nn::Sequential>(layers);
    };
    auto model = make();
    auto ref = make();
    frozen_except(*model, "4.");
    frozen_except(*ref, "4.");
    dt::fully_shard(*model, dp_mesh(), {.grouping = {.module_types = {"Linear"}}});
    for (int s = 0; s < 3; ++s) {
      INFO("step " << s);
      for (nn::Module* m : {model.get(), ref.get()}) {
        for (auto& [name, p] : m->named_parameters()) p.set_grad(dt::DTensor());
      }
      if (s == 2) {
        // A forward whose graph is dropped before its backward (review R2, finding 2): its
        // input nodes are counted back when destroyed, so the next step still releases each
        // unit early (before, the counts stayed apart: the end-of-backward release alone).
        dt::DTensor xi = nn::local_dtensor(x.clone());
        xi.requires_grad_(true);
        (void)dt::sum((*model)(xi));
      }
      int64_t peak = 0, ref_peak = 0;
      const dt::Tensor g = step(*model, &peak);
      CHECK(max_diff(g, step(*ref, &ref_peak)) < 1e-5);
      const auto mp = model->named_parameters();
      const auto rp = ref->named_parameters();
      for (size_t i = 8; i < 10; ++i) {
        CHECK(max_diff(mp[i].second.grad().full_tensor(), rp[i].second.grad().to_local()) < 1e-5);
      }
      if (dt::world_rank() == 0) {
        std::printf(
            "frozen backbone, %d ranks: backward peak %lld bytes above its start (%.2f "
            "gathered Linears of %lld bytes)\n",
            static_cast<int>(dt::world_size()), static_cast<long long>(peak),
            static_cast<double>(peak) / static_cast<double>(linear_bytes),
            static_cast<long long>(linear_bytes));
      }
      // Measured at 2 ranks: 3.5 then 2.5 Linears (5.44 then 4.44 with the end-of-backward
      // release alone; the first step has no recorded order yet); 1 rank: 3.98, 2.98 (5.94, 4.94).
      CHECK(peak < (s == 0 ? 9 : 7) * linear_bytes / 2);
    }
  }
  SECTION("nested units and a tied weight: gradients as one device") {
    // The tied weight (embed / out.head) belongs to the root: embed, mid and back are released
    // after their backward, the root at the end. And a nested frozen unit (the inner Sequential
    // with its own LayerNorm around two Linear units) released after its whole backward.
    dt::manual_seed(9);
    TiedModel tied;
    dt::manual_seed(9);
    TiedModel tied_ref;
    frozen_except(tied, "");
    frozen_except(tied_ref, "");
    dt::fully_shard(tied, dp_mesh(), {.grouping = {.module_types = {"Linear", "TiedLinear"}}});
    auto make = [&] {
      dt::manual_seed(32);
      auto inner = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
          std::make_shared<nn::Linear>(6, 6), std::make_shared<nn::LayerNorm>(6),
          std::make_shared<nn::Linear>(6, 6)});
      return std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
          std::make_shared<nn::Linear>(6, 6), inner, std::make_shared<nn::Linear>(6, 6)});
    };
    auto nested = make();
    auto nested_ref = make();
    frozen_except(*nested, "2.");
    frozen_except(*nested_ref, "2.");
    dt::fully_shard(*nested, dp_mesh(), {.grouping = {.module_types = {"Linear", "Sequential"}}});
    dt::Generator g6(33);
    const dt::Tensor x6 = dt::randn({3, 6}, {}, &g6);
    const dt::Tensor w6 = dt::randn({3, 6}, {}, &g6);
    for (int s = 0; s < 2; ++s) {
      for (auto [m, r] : {std::pair<nn::Module*, nn::Module*>{&tied, &tied_ref},
                          std::pair<nn::Module*, nn::Module*>{nested.get(), nested_ref.get()}}) {
        INFO("step " << s << " " << m->type_name());
        dt::Tensor gx[2];
        for (int k = 0; k < 2; ++k) {
          dt::DTensor xi = nn::local_dtensor(x6.clone());
          xi.requires_grad_(true);
          dt::sum(dt::mul((k == 0 ? *m : *r)(xi), nn::local_dtensor(w6))).backward();
          gx[k] = xi.grad().to_local();
        }
        CHECK(max_diff(gx[0], gx[1]) < 1e-5);
      }
    }
  }
}

namespace {
// A frozen unit whose forward also reads `s`, a trainable DTensor captured from outside (not
// its input): x W^T + s W^T, so s's gradient (g W) reads the gathered weight in backward.
class CapturedLinear : public nn::Module {
 public:
  CapturedLinear(int64_t d, const dt::DTensor* s, uint64_t seed) : s_(s) {
    dt::Generator g(seed);
    register_parameter("weight", nn::local_dtensor(dt::randn({d, d}, {}, &g)));
  }
  std::string type_name() const override { return "CapturedLinear"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    const dt::DTensor& w = param("weight");
    return dt::add(dt::linear(x, w), dt::linear(*s_, w));
  }

 private:
  const dt::DTensor* s_;
};

// head(cap1(cap0(x))), or head(cap0(x.detach()) + cap0(x)): the same unit called first with an
// input that needs no gradient (not wrapped, nothing counts it), then with one that does.
class CapturedModel : public nn::Module {
 public:
  CapturedModel(int64_t d, const dt::DTensor* s, bool two_calls) : two_calls_(two_calls) {
    cap0_ = register_module("cap0", std::make_shared<CapturedLinear>(d, s, 41));
    cap1_ = register_module("cap1", std::make_shared<CapturedLinear>(d, s, 42));
    dt::manual_seed(43);
    head_ = register_module("head", std::make_shared<nn::Linear>(d, d));
  }
  std::string type_name() const override { return "CapturedModel"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    if (!two_calls_) return (*head_)((*cap1_)((*cap0_)(x)));
    return (*head_)(dt::add((*cap0_)(x.detach()), (*cap0_)(x)));
  }

 private:
  bool two_calls_;
  nn::ModulePtr cap0_, cap1_, head_;
};
}  // namespace

// A frozen unit is released when its input's gradient is computed (FrozenUnitInputBackward).
// Its forward reading a trainable tensor other than its input (s) does not make that early:
// the engine runs ready nodes latest-recorded first and the input node is the call's first, so
// every node the call recorded (s's path through the weight included) has run before it; an
// earlier call's nodes run after it, but behind that call's output, whose hook gathers the unit
// again. Values bit-equal to one device, with and without the input's gradient.
TEST_CASE("fully_shard: a frozen unit reading a trainable tensor besides its input",
          "[dp][fsdp][memory]") {
  const int64_t D = 16;
  dt::Generator gen(60);
  const dt::Tensor x = dt::randn({3, D}, {}, &gen);
  const dt::Tensor sv = dt::randn({3, D}, {}, &gen);
  const dt::Tensor w = dt::randn({3, D}, {}, &gen);
  for (const bool two_calls : {false, true}) {
    for (const bool x_grad : {true, false}) {
      if (two_calls && !x_grad) continue;
      INFO("two calls " << two_calls << ", x requires grad " << x_grad);
      dt::DTensor s[2] = {nn::local_dtensor(sv.clone()), nn::local_dtensor(sv.clone())};
      CapturedModel model(D, &s[0], two_calls), ref(D, &s[1], two_calls);
      for (nn::Module* m : {static_cast<nn::Module*>(&model), static_cast<nn::Module*>(&ref)}) {
        for (auto& [name, p] : m->named_parameters()) p.requires_grad_(name.rfind("head.", 0) == 0);
      }
      dt::fully_shard(model, dp_mesh(),
                      {.grouping = {.module_types = {"CapturedLinear", "Linear"}}});
      for (int step = 0; step < 2; ++step) {  // the second knows the forward order
        INFO("step " << step);
        dt::Tensor gx[2], gs[2], gw[2];
        for (int k = 0; k < 2; ++k) {
          nn::Module& m = k == 0 ? static_cast<nn::Module&>(model) : ref;
          for (auto& [name, p] : m.named_parameters()) p.set_grad(dt::DTensor());
          s[k].set_grad(dt::DTensor());
          s[k].requires_grad_(true);
          dt::DTensor xi = nn::local_dtensor(x.clone());
          xi.requires_grad_(x_grad);
          dt::sum(dt::mul(m(xi), nn::local_dtensor(w))).backward();
          if (x_grad) gx[k] = xi.grad().to_local();
          gs[k] = s[k].grad().to_local();
          gw[k] = m.named_parameters()[2].second.grad().full_tensor();  // head.weight
        }
        if (x_grad) CHECK(max_diff(gx[0], gx[1]) == 0);
        CHECK(max_diff(gs[0], gs[1]) == 0);
        CHECK(max_diff(gw[0], gw[1]) == 0);
      }
    }
  }
}

namespace {
// A unit whose call takes two inputs (a TwoInputModule): gated(a, b) = linear(a, w) * b.
class GatedLinear : public nn::TwoInputModule {
 public:
  GatedLinear(int64_t d, uint64_t seed) {
    dt::Generator g(seed);
    register_parameter("weight", nn::local_dtensor(dt::randn({d, d}, {}, &g)));
  }
  std::string type_name() const override { return "GatedLinear"; }
  std::array<std::string_view, 2> input_names() const override { return {"input", "gate"}; }
  using nn::TwoInputModule::forward;
  dt::DTensor forward(const dt::DTensor& a, const dt::DTensor& b) override {
    return dt::mul(dt::linear(a, param("weight")), b);
  }
};

// head(gated(x, gate)).
class GatedModel : public nn::Module {
 public:
  explicit GatedModel(int64_t d) {
    gated_ = std::make_shared<GatedLinear>(d, 61);
    register_module("gated", gated_);
    dt::manual_seed(62);
    head_ = register_module("head", std::make_shared<nn::Linear>(d, d));
  }
  std::string type_name() const override { return "GatedModel"; }
  dt::DTensor forward(const dt::DTensor& x) override { return (*head_)((*gated_)(x, gate)); }
  GatedLinear& gated() { return *gated_; }
  dt::DTensor gate;

 private:
  std::shared_ptr<GatedLinear> gated_;
  nn::ModulePtr head_;
};
}  // namespace

// fully_shard's hooks are the args forms, so a unit of two inputs runs them (one-input hooks
// were refused on it), and its pre-forward hook is prepended as FSDP2's: a pre-hook registered
// before fully_shard sees the gathered (compute) parameters. A frozen unit wraps its first input
// that requires grad (x); the gate's gradient flows past it. Values equal to one device.
TEST_CASE("fully_shard: a two-input unit trains like one device; its gather precedes pre-hooks",
          "[dp][fsdp]") {
  const int64_t D = 4;
  dt::Generator gen(63);
  const dt::Tensor x = dt::randn({3, D}, {}, &gen), g = dt::randn({3, D}, {}, &gen);
  const auto mesh = dp_mesh();
  for (const bool frozen : {false, true}) {
    INFO("gated frozen " << frozen);
    GatedModel model(D), ref(D);
    for (GatedModel* m : {&model, &ref}) {
      for (auto& [name, p] : m->named_parameters())
        p.requires_grad_(!frozen || name != "gated.weight");
    }
    int pre_hook_calls = 0, saw_storage = 0;
    model.gated().register_forward_pre_hook(
        [&](nn::Module& m,
            absl::Span<const dt::DTensor>) -> std::optional<std::vector<dt::DTensor>> {
          ++pre_hook_calls;
          saw_storage += m.param("weight").device_mesh() == mesh ? 1 : 0;
          return std::nullopt;
        });
    dt::fully_shard(model, mesh, {.grouping = {.module_types = {"GatedLinear"}}});
    for (int step = 0; step < 2; ++step) {  // the second knows the forward order
      INFO("step " << step);
      std::vector<dt::Tensor> grads[2];
      for (int k = 0; k < 2; ++k) {
        GatedModel& m = k == 0 ? model : ref;
        for (auto& [name, p] : m.named_parameters()) p.set_grad(dt::DTensor());
        dt::DTensor xi = nn::local_dtensor(x.clone()).requires_grad_();
        m.gate = nn::local_dtensor(g.clone()).requires_grad_();
        dt::sum(m(xi)).backward();
        grads[k] = {xi.grad().to_local(), m.gate.grad().to_local()};
        for (auto& [name, p] : m.named_parameters()) {
          if (p.requires_grad()) grads[k].push_back(p.grad().full_tensor());
        }
      }
      REQUIRE(grads[0].size() == (frozen ? 4 : 5));
      for (size_t i = 0; i < grads[0].size(); ++i)
        CHECK(max_diff(grads[0][i], grads[1][i]) < 1e-12);
    }
    CHECK(pre_hook_calls == 2);
    CHECK(saw_storage == 0);
  }
}

// Multi-input units of nn: a TransformerDecoderLayer (its call takes (tgt, memory), with masks)
// as the root and its MultiheadAttention children as units (multihead_attn's call takes three
// inputs): each rank runs its 2 sequences of a global batch of 2 W (batch dim 1), the unsharded
// layer the whole batch; the gradients (reduced over the ranks) equal the unsharded layer's.
TEST_CASE("fully_shard: a TransformerDecoderLayer and its attention units equal one device",
          "[dp][fsdp]") {
  dt::manual_seed(64);
  nn::TransformerDecoderLayer ref(8, 2, 16, 0.0);
  const std::shared_ptr<nn::TransformerDecoderLayer> model = ref.clone();
  const dt::DeviceMesh mesh = dp_mesh();
  dt::fully_shard(*model, mesh, {.grouping = {.module_types = {"MultiheadAttention"}}});
  const int64_t W = dt::world_size(), r = mesh.get_local_rank(0);
  dt::Generator gen(65);
  const dt::Tensor tgt = dt::randn({3, 2 * W, 8}, {}, &gen);
  const dt::Tensor memory = dt::randn({4, 2 * W, 8}, {}, &gen);
  // Output weights: a plain sum of the post-norm output would give zero gradients upstream.
  const dt::Tensor c = dt::randn({3, 2 * W, 8}, {}, &gen);
  nn::TransformerDecoderArgs args;
  args.tgt_is_causal = true;
  args.tgt_mask = nn::local_dtensor(dt::triu(dt::full({3, 3}, -1e9), 1));
  std::vector<dt::Tensor> grads[2];
  for (int k = 0; k < 2; ++k) {
    nn::TransformerDecoderLayer& m = k == 0 ? *model : ref;
    const int64_t begin = k == 0 ? 2 * r : 0, count = k == 0 ? 2 : 2 * W;
    auto batch = [&](const dt::Tensor& x) {
      return nn::local_dtensor(x.narrow(1, begin, count).contiguous());
    };
    dt::DTensor t = batch(tgt).requires_grad_(), mem = batch(memory).requires_grad_();
    // The mean over the batch of each sequence's weighted sum: the ranks' means average to the
    // global one.
    dt::div(dt::sum(dt::mul(m(t, mem, args), batch(c))), dt::Scalar(static_cast<double>(count)))
        .backward();
    for (const dt::DTensor& in : {t, mem}) {
      // A rank's input gradient is W times the reference's rows of its sequences (a mean over 2).
      grads[k].push_back(k == 0 ? dt::div(in.grad(), dt::Scalar(static_cast<double>(W))).to_local()
                                : in.grad().to_local().narrow(1, 2 * r, 2).contiguous());
    }
    for (auto& [name, p] : m.named_parameters()) grads[k].push_back(p.grad().full_tensor());
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    INFO("gradient " << i);
    CHECK(max_diff(grads[0][i], grads[1][i]) < 1e-4);
  }
}

namespace {
// A frozen unit that doubles its input in place (x.mul_(2)) before its product with the weight.
class DoublingLinear : public nn::Module {
 public:
  explicit DoublingLinear(int64_t d) {
    dt::Generator g(44);
    register_parameter("weight", nn::local_dtensor(dt::randn({d, d}, {}, &g)));
  }
  std::string type_name() const override { return "DoublingLinear"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    dt::mul_(x, dt::Scalar(2.0));
    return dt::linear(x, param("weight"));
  }
};

// mode 0: head(dbl(h)), h = pre(x); 1: head(h + dbl(h)), the caller reading h again; 2: dbl(x)
// on the leaf x.
class DoublingModel : public nn::Module {
 public:
  explicit DoublingModel(int64_t d) {
    dt::manual_seed(45);
    pre_ = register_module("pre", std::make_shared<nn::Linear>(d, d));
    dbl_ = register_module("dbl", std::make_shared<DoublingLinear>(d));
    head_ = register_module("head", std::make_shared<nn::Linear>(d, d));
    for (auto& [name, p] : named_parameters()) p.requires_grad_(name.rfind("dbl.", 0) != 0);
  }
  std::string type_name() const override { return "DoublingModel"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    if (mode == 2) return (*head_)((*dbl_)(x));
    const dt::DTensor h = (*pre_)(x);
    return (*head_)(mode == 0 ? (*dbl_)(h) : dt::add(h, (*dbl_)(h)));
  }
  int mode = 0;

 private:
  nn::ModulePtr pre_, dbl_, head_;
};
}  // namespace

// A frozen unit sees its input through an identity node over the same memory, not the caller's
// tensor: its forward writing that input in place is allowed while the caller does not read the
// input again (values as one device), refused in backward on every rank when it does (its
// gradient would skip the write's derivative), and refused at once on a leaf, as the in-place op
// on the leaf itself is.
TEST_CASE("fully_shard: a frozen unit writing its input in place", "[dp][fsdp]") {
  const int64_t D = 8;
  dt::Generator gen(61);
  const dt::Tensor x = dt::randn({3, D}, {}, &gen);
  const dt::Tensor w = dt::randn({3, D}, {}, &gen);
  DoublingModel model(D), ref(D);
  dt::fully_shard(model, dp_mesh(), {.grouping = {.module_types = {"DoublingLinear", "Linear"}}});
  dt::DTensor xi[2];
  auto loss = [&](DoublingModel& m, int mode) {
    m.mode = mode;
    xi[&m == &ref] = nn::local_dtensor(x.clone());
    xi[&m == &ref].requires_grad_(true);
    return dt::sum(dt::mul(m(xi[&m == &ref]), nn::local_dtensor(w)));
  };
  auto same_step = [&] {
    for (DoublingModel* m : {&model, &ref}) {
      for (auto& [name, p] : m->named_parameters()) p.set_grad(dt::DTensor());
      loss(*m, 0).backward();
    }
    CHECK(max_diff(xi[0].grad().to_local(), xi[1].grad().to_local()) == 0);
    CHECK(max_diff(model.named_parameters()[0].second.grad().full_tensor(),
                   ref.named_parameters()[0].second.grad().to_local()) == 0);  // pre.weight
  };
  same_step();
  same_step();  // the forward order known
  CHECK_THROWS_WITH(loss(model, 1).backward(),
                    Catch::Contains("[fully_shard] unit 'dbl' wrote its input in place in its "
                                    "forward and the caller read that input again"));
  CHECK_THROWS_WITH(loss(model, 2),
                    Catch::Contains("[fully_shard] unit 'dbl' wrote its input in place in its "
                                    "forward (") &&
                        Catch::Contains("a leaf that requires grad"));
  CHECK_THROWS_WITH(loss(ref, 2), Catch::Contains("a leaf DTensor that requires grad"));
  same_step();  // after a backward and a forward that raised
}

TEST_CASE("fully_shard: an all-frozen unit's gathered parameters are freed by backward",
          "[dp][fsdp][memory]") {
  const int64_t D = 32;
  const int64_t linear_bytes = (D * D + D) * 4;
  dt::Generator gen(20);  // the same x and w on every rank
  const dt::Tensor x = dt::randn({4, D}, {}, &gen);
  const dt::Tensor w = dt::randn({4, D}, {}, &gen);
  auto make = [&] {
    dt::manual_seed(21);
    return std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
        std::make_shared<nn::Linear>(D, D), std::make_shared<nn::LayerNorm>(D),
        std::make_shared<nn::Linear>(D, D), std::make_shared<nn::Linear>(D, D)});
  };
  // One step: base memory before forward, what the step leaves beyond x's gradient (after its
  // graph is gone), and x's gradient.
  auto step = [&](nn::Module& m, int64_t* left) {
    dt::DTensor xi = nn::local_dtensor(x.clone());
    xi.requires_grad_(true);
    const int64_t base = dt::memory_stats().current_bytes;
    {
      const dt::DTensor y = m(xi);
      dt::sum(dt::mul(y, nn::local_dtensor(w))).backward();
    }
    *left = dt::memory_stats().current_bytes - base - xi.grad().to_local().numel() * 4;
    return xi.grad().to_local();
  };
  auto freeze = [](nn::Module& m, const std::string& prefix) {
    for (auto& [name, p] : m.named_parameters()) {
      if (prefix.empty() || name.rfind(prefix, 0) == 0) p.requires_grad_(false);
    }
  };
  SECTION("every parameter frozen: the input's gradient through the frozen units") {
    auto model = make();
    auto ref = make();
    freeze(*model, "");
    freeze(*ref, "");
    dt::fully_shard(*model, dp_mesh(), {.grouping = {.module_types = {"Linear", "LayerNorm"}}});
    for (int s = 0; s < 2; ++s) {
      INFO("step " << s);
      int64_t left = 0, ref_left = 0;
      const dt::Tensor g = step(*model, &left);
      CHECK(max_diff(g, step(*ref, &ref_left)) < 1e-5);
      CHECK(left < linear_bytes);
    }
  }
  SECTION("a frozen root (the Linears) with a trained unit (the LayerNorm)") {
    auto model = make();
    auto ref = make();
    freeze(*model, "");
    freeze(*ref, "");
    for (nn::Module* m : {model.get(), ref.get()}) {
      for (auto& [name, p] : m->named_parameters()) {
        if (name.rfind("1.", 0) == 0) p.requires_grad_(true);
      }
    }
    dt::fully_shard(*model, dp_mesh(), {.grouping = {.module_types = {"LayerNorm"}}});
    for (int s = 0; s < 2; ++s) {
      INFO("step " << s);
      for (nn::Module* m : {model.get(), ref.get()}) {
        for (auto& [name, p] : m->named_parameters()) p.set_grad(dt::DTensor());
      }
      int64_t left = 0, ref_left = 0;
      const dt::Tensor g = step(*model, &left);
      CHECK(max_diff(g, step(*ref, &ref_left)) < 1e-5);
      // The LayerNorm's gradients (views of its reduce-scatter output) stay; the root's 3
      // gathered Linears must not.
      CHECK(left < linear_bytes);
      const dt::DTensor& lw = model->named_parameters()[2].second;
      CHECK(max_diff(lw.grad().full_tensor(), ref->named_parameters()[2].second.grad().to_local()) <
            1e-5);
    }
  }
}
