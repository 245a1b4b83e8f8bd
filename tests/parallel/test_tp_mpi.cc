// Tensor parallelism under mpirun: every style alone and whole blocks / models against the
// single-device model (the same model built from the same seed on this rank's self mesh), the
// exact collectives issued (CommDebugMode), bit-exact initial weights, and wrong plans.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/parallel/distribute_module.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/transformer_plan.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/shape_ops.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using Catch::Contains;
using dt::CollectiveKind;

namespace {

constexpr double kTol = 2e-4;

dt::DeviceMesh tp_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
}

double max_diff(const dt::Tensor& a, const dt::Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  auto x = a.contiguous().to(dt::kFloat64).to_vector<double>();
  auto y = b.contiguous().to(dt::kFloat64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// This rank's chunk of `t` along `dim` (torch.chunk rule, empty trailing chunks included).
dt::Tensor my_chunk(const dt::Tensor& t, int64_t dim) {
  const auto b = dt::chunk_bounds(t.size(dim), dt::world_size(), dt::world_rank());
  return t.narrow(dim, b.offset, b.size);
}

// The same input on every rank (seeded, drawn on the CPU).
dt::Tensor same_randn(dt::IntSpan shape, uint64_t seed) {
  dt::Generator g(seed);
  return dt::randn(shape, {}, &g);
}

// Every parameter of `tp` gathered equals the reference model's, bit for bit.
void require_same_params(const nn::Module& tp, const nn::Module& ref) {
  auto a = tp.named_parameters();
  auto b = ref.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == b[i].first);
    REQUIRE(a[i].second.full_tensor().to_vector<float>() ==
            b[i].second.to_local().to_vector<float>());
  }
}

int64_t count(const dt::CommDebugMode& c, CollectiveKind k) {
  return c.count(k);
}

}  // namespace

TEST_CASE("ColwiseParallel Linear: local column shard, or Replicate output with one all-gather",
          "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t out = GENERATE_COPY(W * 3 + 1, W * 2, int64_t{1});
  const int64_t B = GENERATE(0, 3);
  dt::manual_seed(10);
  nn::Linear ref(6, out);
  dt::manual_seed(10);
  auto lin = std::make_shared<nn::Linear>(6, out);
  dt::parallelize_module(*lin, tp_mesh(), dt::ColwiseParallel());
  require_same_params(*lin, ref);
  REQUIRE(lin->param("weight").placements()[0] == dt::Shard(0));
  dt::Tensor x = same_randn({B, 2, 6}, 5);
  dt::Tensor expect = ref(nn::local_dtensor(x)).to_local();
  {
    dt::CommDebugMode comm;
    dt::DTensor y = (*lin)(nn::local_dtensor(x));
    REQUIRE(comm.total_count() == 0);
    REQUIRE(nn::is_local(y));
    REQUIRE(max_diff(y.to_local(), my_chunk(expect, 2)) < kTol);
  }
  dt::manual_seed(10);
  auto lin_r = std::make_shared<nn::Linear>(6, out);
  dt::parallelize_module(*lin_r, tp_mesh(),
                         dt::ColwiseParallel({.output_layouts = dt::Replicate()}));
  dt::CommDebugMode comm;
  dt::DTensor y = (*lin_r)(nn::local_dtensor(x));
  REQUIRE(count(comm, CollectiveKind::kAllGather) == (W > 1 ? 1 : 0));
  REQUIRE(comm.total_count() == count(comm, CollectiveKind::kAllGather));
  REQUIRE(max_diff(y.to_local(), expect) < kTol);
}

TEST_CASE("RowwiseParallel Linear: one all-reduce (Replicate) or one reduce-scatter (Shard(1))",
          "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t in = GENERATE_COPY(W * 3 + 1, W * 2);
  const int64_t S = GENERATE_COPY(W * 2, W + 1);
  dt::manual_seed(20);
  nn::Linear ref(in, 5);
  dt::manual_seed(20);
  nn::Linear lin(in, 5);
  dt::parallelize_module(lin, tp_mesh(), dt::RowwiseParallel());
  require_same_params(lin, ref);
  REQUIRE(lin.param("weight").placements()[0] == dt::Shard(1));
  REQUIRE(lin.param("bias").placements()[0] == dt::Replicate());
  dt::Tensor x = same_randn({2, S, in}, 6);
  dt::Tensor expect = ref(nn::local_dtensor(x)).to_local();
  {
    dt::CommDebugMode comm;
    dt::DTensor y = lin(nn::local_dtensor(my_chunk(x, 2).contiguous()));
    REQUIRE(count(comm, CollectiveKind::kAllReduce) == (W > 1 ? 1 : 0));
    REQUIRE(comm.total_count() == count(comm, CollectiveKind::kAllReduce));
    REQUIRE(max_diff(y.to_local(), expect) < kTol);
  }
  dt::manual_seed(20);
  nn::Linear lin_s(in, 5);
  dt::parallelize_module(lin_s, tp_mesh(), dt::RowwiseParallel({.output_layouts = dt::Shard(1)}));
  dt::CommDebugMode comm;
  dt::DTensor y = lin_s(nn::local_dtensor(my_chunk(x, 2).contiguous()));
  REQUIRE(count(comm, CollectiveKind::kReduceScatter) == (W > 1 ? 1 : 0));
  REQUIRE(comm.total_count() == count(comm, CollectiveKind::kReduceScatter));
  REQUIRE(max_diff(y.to_local(), my_chunk(expect, 1)) < kTol);
}

// The style's forward hook owns the layer's output (Module::operator() gives it up), so the
// Partial output of a rowwise Linear is all-reduced in its own memory, not copied first.
TEST_CASE("RowwiseParallel all-reduces the layer's Partial output in place", "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t in = W * 3;
  dt::manual_seed(21);
  nn::Linear ref(in, 6, /*bias=*/false);
  dt::manual_seed(21);
  nn::Linear lin(in, 6, /*bias=*/false);
  // Registered first, so it runs before the style's hook and sees the forward's own output.
  const void* forward_mem = nullptr;
  bool partial = false;
  lin.register_forward_hook(
      [&](nn::Module&, const dt::DTensor&, const dt::DTensor& y) -> std::optional<dt::DTensor> {
        forward_mem = y.to_local().data_ptr();
        partial = y.placements()[0].is_partial();
        return std::nullopt;
      });
  dt::parallelize_module(lin, tp_mesh(), dt::RowwiseParallel());
  const dt::Tensor x = same_randn({2, W + 1, in}, 8);
  const dt::DTensor y = lin(nn::local_dtensor(my_chunk(x, 2).contiguous()));
  CHECK(partial);
  CHECK(y.placements()[0] == dt::Replicate());
  CHECK(y.to_local().data_ptr() == forward_mem);
  CHECK(max_diff(y.to_local(), ref(nn::local_dtensor(x)).to_local()) < kTol);
}

TEST_CASE(
    "PrepareModuleOutput and distribute_module's output_fn reduce a Partial output in "
    "its own memory",
    "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t in = W * 3;
  const dt::DeviceMesh mesh = tp_mesh();
  dt::manual_seed(22);
  nn::Linear ref(in, 5, /*bias=*/false);
  const dt::Tensor x = same_randn({2, in}, 9);
  const dt::Tensor want = ref(nn::local_dtensor(x)).to_local();
  // Registered first, so it sees the forward's own output (Partial).
  const void* forward_mem = nullptr;
  auto capture = [&](nn::Module&, const dt::DTensor&,
                     const dt::DTensor& y) -> std::optional<dt::DTensor> {
    forward_mem = y.to_local().data_ptr();
    CHECK(y.placements()[0].is_partial());
    return std::nullopt;
  };
  {
    dt::manual_seed(22);
    nn::Linear lin(in, 5, /*bias=*/false);
    lin.register_forward_hook(capture);
    dt::parallelize_module(
        lin, mesh,
        dt::RowwiseParallel({.output_layouts = dt::Partial(), .use_local_output = false}));
    dt::parallelize_module(lin, mesh,
                           dt::PrepareModuleOutput({.output_layouts = dt::Partial(),
                                                    .desired_output_layouts = dt::Replicate()}));
    const dt::DTensor y = lin(nn::local_dtensor(my_chunk(x, 1).contiguous()));
    CHECK(y.placements()[0] == dt::Replicate());
    CHECK(y.to_local().data_ptr() == forward_mem);
    CHECK(max_diff(y.to_local(), want) < kTol);
  }
  {
    dt::manual_seed(22);
    nn::Linear lin(in, 5, /*bias=*/false);
    lin.register_forward_hook(capture);
    dt::distribute_module(
        lin, mesh,
        [](std::string_view, nn::Module& m, const dt::DeviceMesh& msh) {
          m.set_parameter("weight", dt::distribute_tensor(m.param("weight").to_local(), msh,
                                                          {dt::Shard(1)}, std::nullopt));
        },
        [&](nn::Module&, const dt::DTensor& input, const dt::DeviceMesh& msh) {
          return dt::DTensor::from_local(input.to_local(), msh, {dt::Shard(1)},
                                         /*run_check=*/false, x.sizes());
        },
        [](nn::Module&, dt::DTensor out, const dt::DeviceMesh&) {
          const dt::Placement r[] = {dt::Replicate()};
          return std::move(out).redistribute(r);
        });
    const dt::DTensor y = lin(nn::local_dtensor(my_chunk(x, 1).contiguous()));
    CHECK(y.placements()[0] == dt::Replicate());
    CHECK(y.to_local().data_ptr() == forward_mem);
    CHECK(max_diff(y.to_local(), want) < kTol);
  }
}

TEST_CASE("Embedding: RowwiseParallel (vocab-sharded) and ColwiseParallel", "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t vocab = W * 3 + 1;
  dt::manual_seed(30);
  nn::Embedding ref(vocab, 6);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 10; ++i) ids.push_back((i * 7) % vocab);
  dt::Tensor tokens = dt::from_vector(ids, {2, 5});
  dt::Tensor expect = ref(nn::local_dtensor(tokens)).to_local();

  dt::manual_seed(30);
  nn::Embedding row(vocab, 6);
  dt::parallelize_module(row, tp_mesh(), dt::RowwiseParallel());
  require_same_params(row, ref);
  {
    dt::CommDebugMode comm;
    dt::DTensor y = row(nn::local_dtensor(tokens));
    REQUIRE(count(comm, CollectiveKind::kAllReduce) == (W > 1 ? 1 : 0));
    REQUIRE(comm.total_count() == count(comm, CollectiveKind::kAllReduce));
    REQUIRE(max_diff(y.to_local(), expect) == 0.0);
  }
  dt::manual_seed(30);
  nn::Embedding col(vocab, 6);
  dt::parallelize_module(col, tp_mesh(), dt::ColwiseParallel());
  dt::CommDebugMode comm;
  dt::DTensor y = col(nn::local_dtensor(tokens));
  REQUIRE(comm.total_count() == 0);
  REQUIRE(max_diff(y.to_local(), my_chunk(expect, 2)) == 0.0);
}

TEST_CASE("TP MLP (fc1 colwise, fc2 rowwise) = exactly one all-reduce", "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t hidden = GENERATE_COPY(W * 3 + 1, W * 4);
  const int64_t B = GENERATE(0, 2);
  for (bool gelu : {true, false}) {
    auto act = gelu ? nn::Activation::kGelu : nn::Activation::kSilu;
    dt::manual_seed(40);
    nn::MLP ref(8, hidden, act);
    dt::manual_seed(40);
    nn::MLP mlp(8, hidden, act);
    dt::parallelize_module(mlp, tp_mesh(),
                           {{"fc1", dt::ColwiseParallel()}, {"fc2", dt::RowwiseParallel()}});
    require_same_params(mlp, ref);
    dt::Tensor x = same_randn({B, 3, 8}, 7);
    dt::CommDebugMode comm;
    dt::DTensor y = mlp(nn::local_dtensor(x));
    REQUIRE(count(comm, CollectiveKind::kAllReduce) == (W > 1 ? 1 : 0));
    REQUIRE(comm.total_count() == count(comm, CollectiveKind::kAllReduce));
    REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(x)).to_local()) < kTol);
  }
}

TEST_CASE("TP SwiGLU with sequence-parallel output = exactly one reduce-scatter", "[tp]") {
  const int64_t W = dt::world_size();
  dt::manual_seed(41);
  nn::SwiGLU ref(8, W * 5 + 1);
  dt::manual_seed(41);
  nn::SwiGLU sw(8, W * 5 + 1);
  dt::parallelize_module(sw, tp_mesh(),
                         {{"w1", dt::ColwiseParallel()},
                          {"w3", dt::ColwiseParallel()},
                          {"w2", dt::RowwiseParallel({.output_layouts = dt::Shard(1)})}});
  REQUIRE(sw.get_parameter("w2.weight").placements()[0] == dt::Shard(1));
  REQUIRE(sw.get_parameter("w3.weight").placements()[0] == dt::Shard(0));
  dt::Tensor x = same_randn({2, 2 * W, 8}, 8);
  dt::CommDebugMode comm;
  dt::DTensor y = sw(nn::local_dtensor(x));
  REQUIRE(count(comm, CollectiveKind::kReduceScatter) == (W > 1 ? 1 : 0));
  REQUIRE(comm.total_count() == count(comm, CollectiveKind::kReduceScatter));
  REQUIRE(max_diff(y.to_local(), my_chunk(ref(nn::local_dtensor(x)).to_local(), 1)) < kTol);
}

TEST_CASE("TP attention (q/k/v colwise, o rowwise) = exactly one all-reduce, heads split", "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t H = 2 * W, hd = 3, d = H * hd;
  const int64_t S = GENERATE(1, 5);
  dt::manual_seed(50);
  nn::Attention ref(d, H);
  dt::manual_seed(50);
  nn::Attention att(d, H);
  dt::parallelize_module(att, tp_mesh(),
                         {{"wq", dt::ColwiseParallel()},
                          {"wk", dt::ColwiseParallel()},
                          {"wv", dt::ColwiseParallel()},
                          {"wo", dt::RowwiseParallel()}});
  require_same_params(att, ref);
  dt::Tensor x = same_randn({2, S, d}, 9);
  dt::CommDebugMode comm;
  dt::DTensor y = att(nn::local_dtensor(x));
  REQUIRE(count(comm, CollectiveKind::kAllReduce) == (W > 1 ? 1 : 0));
  REQUIRE(comm.total_count() == count(comm, CollectiveKind::kAllReduce));
  REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(x)).to_local()) < kTol);
}

TEST_CASE("TP attention rejects heads not divisible by the TP size", "[tp]") {
  const int64_t W = dt::world_size();
  if (W == 1) return;
  dt::manual_seed(51);
  nn::Attention att(2 * (W + 1), W + 1);
  REQUIRE_THROWS_WITH(dt::parallelize_module(att, tp_mesh(),
                                             {{"wq", dt::ColwiseParallel()},
                                              {"wk", dt::ColwiseParallel()},
                                              {"wv", dt::ColwiseParallel()},
                                              {"wo", dt::RowwiseParallel()}}),
                      Contains("[Attention] n_heads"));
}

namespace {

dt::ParallelizePlan block_plan(const std::string& prefix) {
  return {{prefix + "attention.wq", dt::ColwiseParallel()},
          {prefix + "attention.wk", dt::ColwiseParallel()},
          {prefix + "attention.wv", dt::ColwiseParallel()},
          {prefix + "attention.wo", dt::RowwiseParallel()},
          {prefix + "mlp.fc1", dt::ColwiseParallel()},
          {prefix + "mlp.fc2", dt::RowwiseParallel()}};
}

nn::TransformerConfig small_config(int64_t W) {
  nn::TransformerConfig cfg;
  cfg.vocab_size = 4 * W + 3;
  cfg.dim = 8 * W;
  cfg.n_heads = 2 * W;
  cfg.n_layers = 2;
  cfg.hidden_dim = 6 * W + 2;
  return cfg;
}

}  // namespace

TEST_CASE("TP TransformerBlock = single-device block, two all-reduces", "[tp]") {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg = small_config(W);
  cfg.norm = nn::NormKind::kLayerNorm;
  cfg.mlp = nn::MLPKind::kGelu;
  cfg.bias = true;
  dt::manual_seed(60);
  nn::TransformerBlock ref(cfg);
  dt::manual_seed(60);
  nn::TransformerBlock blk(cfg);
  dt::parallelize_module(blk, tp_mesh(), block_plan(""));
  require_same_params(blk, ref);
  dt::Tensor x = same_randn({2, 5, cfg.dim}, 10);
  dt::CommDebugMode comm;
  dt::DTensor y = blk(nn::local_dtensor(x));
  REQUIRE(count(comm, CollectiveKind::kAllReduce) == (W > 1 ? 2 : 0));
  REQUIRE(comm.total_count() == count(comm, CollectiveKind::kAllReduce));
  REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(x)).to_local()) < kTol);
}

namespace {

// The Llama plan of the PyTorch TP tutorial: vocab-sharded embedding with sequence-parallel
// output, sequence-parallel norms, colwise/rowwise attention and SwiGLU, colwise lm head.
dt::ParallelizePlan llama_plan() {
  return {
      {"tok_embeddings",
       dt::RowwiseParallel({.input_layouts = dt::Replicate(), .output_layouts = dt::Shard(1)})},
      {"norm", dt::SequenceParallel()},
      {"output",
       dt::ColwiseParallel({.input_layouts = dt::Shard(1), .output_layouts = dt::Replicate()})},
      {"layers.*.attention_norm", dt::SequenceParallel()},
      {"layers.*.attention", dt::PrepareModuleInput({.input_layouts = dt::Shard(1),
                                                     .desired_input_layouts = dt::Replicate()})},
      {"layers.*.attention.wq", dt::ColwiseParallel()},
      {"layers.*.attention.wk", dt::ColwiseParallel()},
      {"layers.*.attention.wv", dt::ColwiseParallel()},
      {"layers.*.attention.wo", dt::RowwiseParallel({.output_layouts = dt::Shard(1)})},
      {"layers.*.mlp_norm", dt::SequenceParallel()},
      {"layers.*.mlp", dt::PrepareModuleInput({.input_layouts = dt::Shard(1),
                                               .desired_input_layouts = dt::Replicate()})},
      {"layers.*.mlp.w1", dt::ColwiseParallel()},
      {"layers.*.mlp.w3", dt::ColwiseParallel()},
      {"layers.*.mlp.w2", dt::RowwiseParallel({.output_layouts = dt::Shard(1)})},
  };
}

}  // namespace

TEST_CASE("TP Transformer with sequence parallelism = single-device model", "[tp]") {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg = small_config(W);  // RMSNorm + SwiGLU
  dt::manual_seed(70);
  nn::Transformer ref(cfg);
  dt::manual_seed(70);
  nn::Transformer model(cfg);
  // Even sequence shards, uneven ones, and (at 4 ranks: 6 = 2, 2, 2, 0) an empty one. The
  // test's own plan hands local tensors between modules (torchtitan's way), so its sequence
  // length must divide by tp (a local shard implies an even split); the library's plan keeps
  // DTensors in the residual stream, which carry the global length.
  const int64_t B = 2, S = GENERATE_COPY(2 * W, 2 * W - 1, W + 2);
  const bool even = S % W == 0;
  INFO("sequence length " << S << ", " << W << " ranks, "
                          << (even ? "local tensors between modules" : "the library's plan"));
  dt::parallelize_module(
      model, tp_mesh(), even ? llama_plan() : dt::transformer_tp_plan({.sequence_parallel = true}));
  require_same_params(model, ref);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < B * S; ++i) ids.push_back((i * 5 + 1) % cfg.vocab_size);
  dt::Tensor tokens = dt::from_vector(ids, {B, S});
  dt::CommDebugMode comm;
  dt::DTensor y = model(nn::local_dtensor(tokens));
  if (W > 1) {
    // Embedding: 1 reduce-scatter; per layer: 2 all-gathers + 2 reduce-scatters; head: 2
    // all-gathers (sequence, then vocab).
    REQUIRE(count(comm, CollectiveKind::kReduceScatter) == 1 + 2 * cfg.n_layers);
    REQUIRE(count(comm, CollectiveKind::kAllGather) == 2 * cfg.n_layers + 2);
    REQUIRE(count(comm, CollectiveKind::kAllReduce) == 0);
  }
  REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(tokens)).to_local()) < 1e-3);
}

TEST_CASE("TP Transformer on the tp dim of a 2x2 dp x tp mesh", "[tp]") {
  if (dt::world_size() != 4) return;
  auto mesh = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
  nn::TransformerConfig cfg = small_config(2);
  cfg.mlp = nn::MLPKind::kSilu;
  dt::manual_seed(80);
  nn::Transformer ref(cfg);
  dt::manual_seed(80);
  nn::Transformer model(cfg);
  auto plan = block_plan("layers.*.");
  plan.push_back({"tok_embeddings", dt::RowwiseParallel()});
  plan.push_back({"output", dt::ColwiseParallel({.output_layouts = dt::Replicate()})});
  dt::parallelize_module(model, mesh["tp"], plan);
  require_same_params(model, ref);
  // Each dp group gets its own batch.
  const int64_t dp = mesh.get_local_rank("dp");
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 6; ++i) ids.push_back((i * 3 + 7 * dp) % cfg.vocab_size);
  dt::Tensor tokens = dt::from_vector(ids, {2, 3});
  dt::CommDebugMode comm;
  dt::DTensor y = model(nn::local_dtensor(tokens));
  REQUIRE(count(comm, CollectiveKind::kAllReduce) == 1 + 2 * cfg.n_layers);
  REQUIRE(count(comm, CollectiveKind::kAllGather) == 1);
  REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(tokens)).to_local()) < 1e-3);
}

TEST_CASE("Wrong plans fail clearly", "[tp]") {
  nn::TransformerConfig cfg = small_config(dt::world_size());
  cfg.norm = nn::NormKind::kLayerNorm;
  dt::manual_seed(90);
  nn::Transformer model(cfg);
  REQUIRE_THROWS_WITH(
      dt::parallelize_module(model, tp_mesh(), {{"layers.*.mlpp", dt::ColwiseParallel()}}),
      Contains("[parallelize_module] plan entry 'layers.*.mlpp' matches no submodule"));
  REQUIRE_THROWS_WITH(
      dt::parallelize_module(model, tp_mesh(), {{"norm", dt::ColwiseParallel()}}),
      Contains("[ColwiseParallel] expects Linear or Embedding, got LayerNorm at 'norm'"));
  REQUIRE_THROWS_WITH(
      dt::parallelize_module(model, tp_mesh(), {{"layers.0", dt::RowwiseParallel()}}),
      Contains("[RowwiseParallel] expects Linear or Embedding, got TransformerBlock"));
  if (dt::world_size() == 4) {
    auto mesh2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
    REQUIRE_THROWS_WITH(dt::parallelize_module(model, mesh2, {{"output", dt::ColwiseParallel()}}),
                        Contains("expects a 1-d mesh"));
  }
  nn::Linear lin(4, 4);
  dt::parallelize_module(lin, tp_mesh(), dt::ColwiseParallel());
  REQUIRE_THROWS_WITH(dt::parallelize_module(lin, tp_mesh(), dt::RowwiseParallel()),
                      Contains("already distributed"));
}

TEST_CASE("fqn patterns match component by component", "[tp]") {
  REQUIRE(dt::fqn_matches("layers.*.mlp.fc1", "layers.12.mlp.fc1"));
  REQUIRE_FALSE(dt::fqn_matches("layers.*.mlp.fc1", "layers.1.mlp.fc1.x"));
  REQUIRE_FALSE(dt::fqn_matches("layers.*", "layers.1.mlp"));
  REQUIRE(dt::fqn_matches("layers.*.attention.w*", "layers.0.attention.wq"));
  REQUIRE(dt::fqn_matches("*", "output"));
  REQUIRE_FALSE(dt::fqn_matches("out", "output"));
  REQUIRE(dt::fqn_matches("o*t", "output"));
}

TEST_CASE("reset_parameters on a sharded model equals the single-device reset, no collectives",
          "[tp]") {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg = small_config(W);
  cfg.vocab_size = 3 * W + 1;  // uneven vocab shards
  cfg.norm = nn::NormKind::kLayerNorm;
  cfg.mlp = nn::MLPKind::kGelu;
  cfg.bias = true;
  dt::manual_seed(100);
  nn::Transformer ref(cfg);
  dt::manual_seed(100);
  nn::Transformer model(cfg);
  auto plan = block_plan("layers.*.");
  plan.push_back({"tok_embeddings", dt::RowwiseParallel()});
  plan.push_back({"output", dt::ColwiseParallel()});
  dt::parallelize_module(model, tp_mesh(), plan);
  dt::Generator g1(555), g2(555);
  {
    dt::CommDebugMode comm;
    model.reset_parameters(&g1);
    REQUIRE(comm.total_count() == 0);
  }
  ref.reset_parameters(&g2);
  REQUIRE(g1.offset() == g2.offset());
  require_same_params(model, ref);
  // The reset values are those the constructors draw after manual_seed(555).
  dt::manual_seed(555);
  nn::Transformer fresh(cfg);
  require_same_params(fresh, ref);
}

TEST_CASE("SequenceParallel norm alone: local sequence chunk, no collectives", "[tp]") {
  const int64_t W = dt::world_size();
  for (bool rms : {false, true}) {
    dt::manual_seed(110);
    nn::ModulePtr ref = rms ? nn::ModulePtr(std::make_shared<nn::RMSNorm>(6))
                            : nn::ModulePtr(std::make_shared<nn::LayerNorm>(6));
    dt::Generator g(3);
    ref->reset_parameters(&g);
    ref->set_parameter("weight", nn::local_dtensor(same_randn({6}, 4)));
    nn::ModulePtr sp = rms ? nn::ModulePtr(std::make_shared<nn::RMSNorm>(6))
                           : nn::ModulePtr(std::make_shared<nn::LayerNorm>(6));
    sp->set_parameter("weight", nn::local_dtensor(same_randn({6}, 4)));
    dt::parallelize_module(*sp, tp_mesh(), dt::SequenceParallel());
    REQUIRE(sp->param("weight").placements()[0] == dt::Replicate());
    dt::Tensor x = same_randn({2, 3 * W, 6}, 12);
    dt::CommDebugMode comm;
    dt::DTensor y = (*sp)(nn::local_dtensor(my_chunk(x, 1).contiguous()));
    REQUIRE(comm.total_count() == 0);
    REQUIRE(y.placements()[0] == dt::Shard(1));  // stays a DTensor (use_local_output = false)
    REQUIRE(y.shape() == x.shape());
    REQUIRE(max_diff(y.to_local(), my_chunk((*ref)(nn::local_dtensor(x)).to_local(), 1)) < kTol);
    REQUIRE(max_diff(y.full_tensor(), (*ref)(nn::local_dtensor(x)).to_local()) < kTol);
  }
}

TEST_CASE("use_local_output = false keeps DTensors, PrepareModuleOutput lays out outputs", "[tp]") {
  const int64_t W = dt::world_size();
  dt::manual_seed(120);
  nn::MLP ref(5, 2 * W + 1);
  dt::manual_seed(120);
  nn::MLP mlp(5, 2 * W + 1);
  auto mesh = tp_mesh();
  dt::parallelize_module(
      mlp, mesh,
      {{"fc1", dt::ColwiseParallel({.use_local_output = false})},
       {"fc2", dt::RowwiseParallel({.output_layouts = dt::Shard(0), .use_local_output = false})}});
  dt::parallelize_module(mlp, mesh,
                         dt::PrepareModuleOutput({.output_layouts = dt::Shard(0),
                                                  .desired_output_layouts = dt::Replicate(),
                                                  .use_local_output = true}));
  dt::Tensor x = same_randn({2 * W + 1, 5}, 13);
  dt::CommDebugMode comm;
  dt::DTensor y = mlp(nn::local_dtensor(x));
  REQUIRE(nn::is_local(y));
  if (W > 1) {
    REQUIRE(count(comm, CollectiveKind::kReduceScatter) == 1);
    REQUIRE(count(comm, CollectiveKind::kAllGather) == 1);
    REQUIRE(comm.total_count() == 2);
  }
  REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(x)).to_local()) < kTol);
}

TEST_CASE("Attention with DTensor q/k/v (use_local_output = false) and a bfloat16 TP MLP", "[tp]") {
  const int64_t W = dt::world_size();
  const int64_t H = W, d = 4 * H;
  dt::manual_seed(130);
  nn::Attention ref(d, H, false);
  dt::manual_seed(130);
  nn::Attention att(d, H, false);
  const dt::ColwiseParallel col({.use_local_output = false});
  dt::parallelize_module(att, tp_mesh(),
                         {{"wq", col}, {"wk", col}, {"wv", col}, {"wo", dt::RowwiseParallel()}});
  dt::Tensor x = same_randn({3, 4, d}, 14);
  {
    dt::CommDebugMode comm;
    dt::DTensor y = att(nn::local_dtensor(x));
    REQUIRE(comm.total_count() == (W > 1 ? 1 : 0));
    REQUIRE(max_diff(y.to_local(), ref(nn::local_dtensor(x)).to_local()) < kTol);
  }

  nn::ModuleOptions bf16;
  bf16.dtype = dt::kBFloat16;
  dt::manual_seed(131);
  nn::MLP mref(8, 4 * W, nn::Activation::kGelu, true, bf16);
  dt::manual_seed(131);
  nn::MLP mlp(8, 4 * W, nn::Activation::kGelu, true, bf16);
  dt::parallelize_module(mlp, tp_mesh(),
                         {{"fc1", dt::ColwiseParallel()}, {"fc2", dt::RowwiseParallel()}});
  require_same_params(mlp, mref);
  dt::Tensor xb = same_randn({2, 3, 8}, 15).to(dt::kBFloat16);
  dt::DTensor yb = mlp(nn::local_dtensor(xb));
  REQUIRE(yb.dtype() == dt::kBFloat16);
  // bfloat16 keeps 8 bits: the partial sums are rounded before the all-reduce.
  REQUIRE(max_diff(yb.to_local(), mref(nn::local_dtensor(xb)).to_local()) < 5e-2);
}

TEST_CASE("functional ops: local parameters on mesh activations, heads kept sharded", "[tp]") {
  const int64_t W = dt::world_size();
  auto mesh = tp_mesh();
  auto dist = [&](const dt::Tensor& t, dt::Placement p) {
    return dt::distribute_tensor(t, mesh, {p}, std::nullopt);
  };
  // Batch-sharded activations (uneven: W * 2 + 1 rows) with self-mesh (local) parameters:
  // the parameters count as Replicate on the activations' mesh, nothing moves.
  const dt::Tensor x = same_randn({2 * W + 1, 3, 6}, 16);
  const dt::Tensor w = same_randn({5, 6}, 17), b = same_randn({5}, 18);
  const dt::Tensor g = same_randn({6}, 19), beta = same_randn({6}, 20);
  const dt::Tensor table = same_randn({7, 4}, 21);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < (2 * W + 1) * 3; ++i) ids.push_back((i * 5) % 7);
  const dt::Tensor idx = dt::from_vector(ids, {2 * W + 1, 3});
  {
    dt::CommDebugMode comm;
    // The modules' rule (functional::on_mesh) in front of the ops' one DTensor form.
    const dt::DTensor xs = dist(x, dt::Shard(0));
    auto on_x = [&](const dt::Tensor& p) {
      return nn::functional::on_mesh(nn::local_dtensor(p), xs.device_mesh());
    };
    const dt::DTensor y = dt::linear(xs, on_x(w), on_x(b));
    const int64_t last[] = {6};
    const dt::DTensor n = dt::layer_norm(xs, last, on_x(g), on_x(beta));
    REQUIRE(comm.total_count() == 0);
    // Batch-sharded ids: the ranks agree on the index check (one 8-byte all-reduce, so that a
    // bad id in one rank's shard raises on every rank); the lookup itself moves nothing.
    const dt::DTensor ids_s = dist(idx, dt::Shard(0));
    const dt::DTensor e = dt::embedding(
        ids_s, nn::functional::on_mesh(nn::local_dtensor(table), ids_s.device_mesh()));
    REQUIRE(comm.total_count() == (W > 1 ? 1 : 0));
    REQUIRE(comm.count(dt::CollectiveKind::kAllReduce) == (W > 1 ? 1 : 0));
    REQUIRE(y.placements()[0] == dt::Shard(0));
    REQUIRE(n.placements()[0] == dt::Shard(0));
    REQUIRE(e.placements()[0] == dt::Shard(0));
    REQUIRE(max_diff(y.to_local(), my_chunk(dt::linear(x, w, b), 0)) < kTol);
    REQUIRE(max_diff(n.to_local(), my_chunk(dt::layer_norm(x, {6}, g, beta), 0)) < kTol);
    REQUIRE(max_diff(e.to_local(), my_chunk(dt::embedding(idx, table), 0)) == 0.0);
  }
  // Attention with the heads split across ranks (S(2)) stays S(2) without communication.
  const int64_t hd = 3, H = 2 * W;
  const dt::Tensor q = same_randn({2, 5, H * hd}, 22), k = same_randn({2, 5, H * hd}, 23),
                   v = same_randn({2, 5, H * hd}, 24);
  const dt::Tensor want =
      nn::functional::packed_heads_attention(nn::local_dtensor(q), nn::local_dtensor(k),
                                             nn::local_dtensor(v), hd, true)
          .to_local();
  {
    dt::CommDebugMode comm;
    const dt::DTensor o = nn::functional::packed_heads_attention(
        dist(q, dt::Shard(2)), dist(k, dt::Shard(2)), dist(v, dt::Shard(2)), hd, true);
    REQUIRE(comm.total_count() == 0);
    REQUIRE(o.placements()[0] == dt::Shard(2));
    REQUIRE(max_diff(o.to_local(), my_chunk(want, 2)) < kTol);
  }
  if (W > 1) {
    // W + 1 heads of 2 over W ranks: a shard would split a head.
    const dt::Tensor u = same_randn({1, 2, 2 * (W + 1)}, 25);
    REQUIRE_THROWS_WITH(
        nn::functional::packed_heads_attention(dist(u, dt::Shard(2)), dist(u, dt::Shard(2)),
                                               dist(u, dt::Shard(2)), 2, false),
        Contains("[packed_heads_attention] local width"));
  }
}

TEST_CASE(
    "functional scaled_dot_product_attention: the fused op, and dropout equal on every layout") {
  const int64_t W = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W});
  const int64_t B = 2, H = 2 * W + 1, L = 6, S = 7, E = 4;
  const dt::Tensor q = same_randn({B, H, L, E}, 31), k = same_randn({B, H, S, E}, 32),
                   v = same_randn({B, H, S, E}, 33);
  auto on = [&](const dt::Tensor& t, dt::Placement p) {
    return dt::distribute_tensor(t, mesh, {p}, std::nullopt);
  };
  // dropout_p = 0: the registered op, head-sharded, equal to the replicated call.
  const dt::Tensor fused =
      nn::functional::scaled_dot_product_attention(on(q, dt::Replicate()), on(k, dt::Replicate()),
                                                   on(v, dt::Replicate()), dt::DTensor(), 0.0, true)
          .to_local();
  const dt::DTensor heads = nn::functional::scaled_dot_product_attention(
      on(q, dt::Shard(1)), on(k, dt::Shard(1)), on(v, dt::Shard(1)), dt::DTensor(), 0.0, true);
  REQUIRE(max_diff(heads.full_tensor(), fused) < kTol);
  // dropout_p > 0: the same draws whatever the layout (the RNG maps global positions).
  dt::Tensor dropped[2];
  for (int layout = 0; layout < 2; ++layout) {
    dt::manual_seed(77);
    const dt::Placement p =
        layout == 0 ? dt::Placement(dt::Replicate()) : dt::Placement(dt::Shard(1));
    dropped[layout] = nn::functional::scaled_dot_product_attention(on(q, p), on(k, p), on(v, p),
                                                                   dt::DTensor(), 0.4, true)
                          .full_tensor();
  }
  REQUIRE(max_diff(dropped[0], dropped[1]) < kTol);
  REQUIRE(max_diff(dropped[0], fused) > 1e-3);  // dropout did drop something
  REQUIRE_THROWS_WITH(
      nn::functional::scaled_dot_product_attention(on(q, dt::Replicate()), on(k, dt::Replicate()),
                                                   on(v, dt::Replicate()), dt::DTensor(), 1.0),
      Contains("dropout_p 1 is outside [0, 1)"));
}

namespace {
// x -> fc2(fc1(x)) where fc2's weight is fc1's (tied): [6, 6].
class TiedPair : public nn::Module {
 public:
  TiedPair() {
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(6, 6, true));
    fc2_ = register_module("fc2", std::make_shared<dt::test::TiedLinear>(fc1_->param("weight")));
  }
  std::string type_name() const override { return "TiedPair"; }
  dt::DTensor forward(const dt::DTensor& x) override { return (*fc2_)((*fc1_)(x)); }

 private:
  nn::ModulePtr fc1_, fc2_;
};
}  // namespace

TEST_CASE(
    "distribute_module: partition_fn places, the rest is replicated from the first rank, "
    "input_fn and output_fn wrap the forward") {
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::Tensor x = same_randn({3, 6}, 41);
  dt::manual_seed(1);
  TiedPair ref;
  const dt::Tensor want = ref(nn::local_dtensor(x)).to_local();

  // No partition_fn: ranks initialised differently all end with the first rank's values.
  dt::manual_seed(static_cast<uint64_t>(dt::world_rank()) + 1);
  TiedPair plain;
  dt::distribute_module(plain, mesh);
  REQUIRE(plain.named_parameters().size() == 2);  // the tie survives
  for (const auto& [name, p] : plain.named_parameters()) {
    INFO(name);
    REQUIRE(p.device_mesh() == mesh);
    REQUIRE(max_diff(p.full_tensor(), ref.get_parameter(name).to_local()) == 0.0);
  }
  REQUIRE(plain.get_parameter("fc2.weight").autograd_meta() ==
          plain.get_parameter("fc1.weight").autograd_meta());

  // fc1's bias sharded by partition_fn; inputs made DTensors on the mesh, outputs replicated.
  dt::manual_seed(1);
  TiedPair model;
  std::vector<std::string> seen;
  dt::distribute_module(
      model, mesh,
      [&](std::string_view name, nn::Module& m, const dt::DeviceMesh& msh) {
        seen.emplace_back(name);
        if (name == "fc1") {
          m.set_parameter("bias", dt::distribute_tensor(m.param("bias").to_local(), msh,
                                                        {dt::Shard(0)}, std::nullopt));
        }
      },
      [](nn::Module&, const dt::DTensor& in, const dt::DeviceMesh& msh) {
        return dt::DTensor::from_local(in.to_local(), msh, {dt::Replicate()});
      },
      [](nn::Module&, const dt::DTensor& out, const dt::DeviceMesh& msh) {
        return out.redistribute(msh, {dt::Replicate()});
      });
  REQUIRE(seen == std::vector<std::string>{"", "fc1", "fc2"});
  REQUIRE(model.get_parameter("fc1.bias").placements()[0] == dt::Shard(0));
  REQUIRE(model.get_parameter("fc1.weight").placements()[0] == dt::Replicate());
  const dt::DTensor y = model(nn::local_dtensor(x));
  REQUIRE(y.device_mesh() == mesh);
  REQUIRE(y.placements()[0] == dt::Replicate());
  REQUIRE(max_diff(y.to_local(), want) < kTol);
  // Gradients reach the placed parameters, in their placements.
  dt::sum(y).backward();
  REQUIRE(model.get_parameter("fc1.bias").grad().placements()[0] == dt::Shard(0));
}

TEST_CASE("rotary embeddings on sequence- or head-sharded activations need no communication") {
  const int64_t W = dt::world_size();
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t B = 2, S = 2 * W + 1, H = W + 1, D = 4;
  const dt::Tensor x = same_randn({B, S, H, D}, 51);
  const nn::functional::RotaryTables t = nn::functional::rotary_tables(S, D);
  const dt::Tensor want = nn::functional::apply_rotary_emb(nn::local_dtensor(x), t).to_local();
  for (int64_t dim : {1, 2}) {
    dt::CommDebugMode comm;
    const dt::DTensor y = nn::functional::apply_rotary_emb(
        dt::distribute_tensor(x, mesh, {dt::Shard(dim)}, std::nullopt), t);
    REQUIRE(comm.total_count() == 0);
    if (W > 1) REQUIRE(y.placements()[0] == dt::Shard(dim));  // one rank: any label holds it
    REQUIRE(max_diff(y.full_tensor(), want) < 1e-6);
  }
}

// Round 7a (PyTorch's PrepareModuleInput / PrepareModuleOutput): with use_local_output the
// local result is still part of the autograd graph, so the input and the parameters before the
// hook get their gradients (before, the hooks returned an unrecorded copy: the local input got
// no gradient, and a loss of a PrepareModuleOutput result could not be backpropagated at all).
TEST_CASE("PrepareModuleInput / PrepareModuleOutput with use_local_output keep the graph", "[tp]") {
  const int64_t W = dt::world_size();
  auto mesh = tp_mesh();
  const dt::Tensor x = same_randn({2, 2 * W, 4}, 71);
  const dt::Tensor w = same_randn({2, 2 * W, 2 * W}, 72);
  auto weighted = [&](const dt::DTensor& y) { return dt::sum(dt::mul(y, nn::local_dtensor(w))); };
  SECTION("PrepareModuleInput: a sequence shard gathered, the local input's gradient") {
    dt::manual_seed(73);
    nn::Linear ref(4, 2 * W);
    dt::manual_seed(73);
    nn::Linear lin(4, 2 * W);
    dt::parallelize_module(lin, mesh,
                           dt::PrepareModuleInput({.input_layouts = dt::Shard(1),
                                                   .desired_input_layouts = dt::Replicate(),
                                                   .use_local_output = true}));
    dt::DTensor xr = nn::local_dtensor(x.clone());
    xr.requires_grad_(true);
    weighted(ref(xr)).backward();
    dt::DTensor xl = nn::local_dtensor(my_chunk(x, 1).contiguous());
    xl.requires_grad_(true);
    weighted(lin(xl)).backward();
    REQUIRE(xl.grad().defined());
    CHECK(max_diff(xl.grad().to_local(), my_chunk(xr.grad().to_local(), 1)) < kTol);
    CHECK(max_diff(lin.param("weight").grad().to_local(), ref.param("weight").grad().to_local()) <
          kTol);
  }
  SECTION("PrepareModuleOutput: a colwise output gathered, the weight's gradient") {
    dt::manual_seed(74);
    nn::Linear ref(4, 2 * W);
    dt::manual_seed(74);
    nn::Linear lin(4, 2 * W);
    dt::parallelize_module(lin, mesh, dt::ColwiseParallel({.use_local_output = false}));
    dt::parallelize_module(lin, mesh,
                           dt::PrepareModuleOutput({.output_layouts = dt::Shard(-1),
                                                    .desired_output_layouts = dt::Replicate(),
                                                    .use_local_output = true}));
    weighted(ref(nn::local_dtensor(x))).backward();
    const dt::DTensor y = lin(nn::local_dtensor(x));
    REQUIRE(nn::is_local(y));
    weighted(y).backward();
    const dt::DTensor& g = lin.param("weight").grad();
    REQUIRE(g.defined());
    CHECK(g.placements() == dt::Placements{dt::Shard(0)});
    CHECK(max_diff(g.full_tensor(), ref.param("weight").grad().to_local()) < kTol);
  }
}

// PyTorch's PrepareModuleInput takes one layout per input, None leaving an input alone, and
// keyword layouts by input name: a one-input module, a loss (input, target) and a distance (x1,
// x2) against a single device (issue L2-2).
TEST_CASE("PrepareModuleInput: None entries, two-input modules, keyword layouts", "[tp]") {
  const int64_t W = dt::world_size();
  auto mesh = tp_mesh();
  const dt::Tensor x = same_randn({2 * W, 3}, 91);
  const dt::Tensor t = same_randn({2 * W, 3}, 92);
  // The reference loss and input gradient of `loss` on the full x and t.
  nn::MSELoss ref_loss;
  dt::DTensor xr = nn::local_dtensor(x.clone());
  xr.requires_grad_(true);
  const dt::DTensor want = ref_loss(xr, nn::local_dtensor(t));
  want.backward();
  dt::DTensor xl = nn::local_dtensor(my_chunk(x, 0).contiguous());
  xl.requires_grad_(true);
  // This rank's rows in, the gathered loss and the chunk of the reference gradient out.
  auto check_loss = [&](const dt::DTensor& got) {
    CHECK(max_diff(got.full_tensor(), want.to_local()) < kTol);
    got.backward();
    REQUIRE(xl.grad().defined());
    CHECK(max_diff(xl.grad().to_local(), my_chunk(xr.grad().to_local(), 0)) < kTol);
  };
  SECTION("a None entry: the one input passes as it is") {
    nn::Identity id;
    dt::parallelize_module(id, mesh,
                           dt::PrepareModuleInput({.input_layouts = {std::nullopt},
                                                   .desired_input_layouts = {std::nullopt}}));
    const dt::DTensor y = id(xl);
    CHECK(nn::is_local(y));
    CHECK(max_diff(y.to_local(), xl.to_local()) == 0);
  }
  SECTION("a loss: the input's rows gathered, the target (None) passed as it is") {
    nn::MSELoss loss;
    dt::parallelize_module(
        loss, mesh,
        dt::PrepareModuleInput({.input_layouts = {dt::Shard(0), std::nullopt},
                                .desired_input_layouts = {dt::Replicate(), std::nullopt},
                                .use_local_output = true}));
    check_loss(loss(xl, nn::local_dtensor(t)));
  }
  SECTION("a loss: the target by keyword, both gathered, DTensors on the mesh") {
    nn::MSELoss loss;
    dt::parallelize_module(
        loss, mesh,
        dt::PrepareModuleInput({.input_layouts = dt::Shard(0),
                                .desired_input_layouts = dt::Replicate(),
                                .input_kwarg_layouts = {{"target", dt::Shard(0)}},
                                .desired_input_kwarg_layouts = {{"target", dt::Replicate()}}}));
    const dt::DTensor got = loss(xl, nn::local_dtensor(my_chunk(t, 0).contiguous()));
    CHECK(got.device_mesh() == mesh);
    check_loss(got);
  }
  SECTION("a loss: PrepareModuleOutput lays out its output (module(a, b) runs forward hooks)") {
    nn::MSELoss loss;
    dt::parallelize_module(
        loss, mesh,
        dt::PrepareModuleInput({.input_layouts = {dt::Shard(0), std::nullopt},
                                .desired_input_layouts = {dt::Replicate(), std::nullopt},
                                .use_local_output = true}));
    dt::parallelize_module(loss, mesh,
                           dt::PrepareModuleOutput({.output_layouts = dt::Replicate(),
                                                    .desired_output_layouts = dt::Replicate(),
                                                    .use_local_output = false}));
    const dt::DTensor got = loss(xl, nn::local_dtensor(t));
    CHECK(got.device_mesh() == mesh);
    check_loss(got);
  }
  SECTION("a distance: x2 by keyword, x1 (None) passed as it is; no desired layout: wrap only") {
    nn::PairwiseDistance dist;
    const dt::DTensor ref = dist(nn::local_dtensor(x), nn::local_dtensor(t));
    dt::parallelize_module(
        dist, mesh,
        dt::PrepareModuleInput({.input_layouts = {std::nullopt},
                                .desired_input_layouts = {std::nullopt},
                                .input_kwarg_layouts = {{"x2", dt::Shard(0)}},
                                .desired_input_kwarg_layouts = {{"x2", dt::Shard(0)}}}));
    const dt::DTensor x1 = dt::distribute_tensor(x, mesh, {dt::Shard(0)}, std::nullopt);
    const dt::DTensor got = dist(x1, nn::local_dtensor(my_chunk(t, 0).contiguous()));
    CHECK(got.placements() == dt::Placements{dt::Shard(0)});
    CHECK(max_diff(got.full_tensor(), ref.to_local()) < kTol);
  }
  SECTION("layouts that do not give each input once are refused, naming the module") {
    nn::MSELoss loss;
    nn::Identity id;
    using Opts = dt::PrepareModuleInput::Options;
    auto apply = [&](nn::Module& m, const Opts& o) {
      dt::parallelize_module(m, mesh, dt::PrepareModuleInput(o));
    };
    REQUIRE_THROWS_WITH(apply(loss, Opts{}), Contains("MSELoss) takes 2 input(s) (input, target)"));
    REQUIRE_THROWS_WITH(apply(id, {.input_layouts = {dt::Shard(0), std::nullopt},
                                   .desired_input_layouts = {dt::Replicate(), std::nullopt}}),
                        Contains("takes 1 input(s) (input); input_layouts gives 2"));
    REQUIRE_THROWS_WITH(apply(loss, {.input_layouts = dt::Shard(0),
                                     .desired_input_layouts = {dt::Replicate(), std::nullopt}}),
                        Contains("input_layouts has 1 entries and desired_input_layouts 2"));
    REQUIRE_THROWS_WITH(apply(loss, {.input_kwarg_layouts = {{"x2", dt::Shard(0)}},
                                     .desired_input_kwarg_layouts = {{"x2", dt::Shard(0)}}}),
                        Contains("names 'x2', which is not an input of"));
    REQUIRE_THROWS_WITH(apply(loss, {.input_kwarg_layouts = {{"target", dt::Shard(0)}},
                                     .desired_input_kwarg_layouts = {{"input", dt::Shard(0)}}}),
                        Contains("desired_input_kwarg_layouts does not"));
  }
}

// Round 7a: SequenceParallel takes any module, as PyTorch's (which replicates the parameters of
// whatever module it is given): an MLP under it (its Linears' parameters replicated, children
// included) on a sequence-sharded input gives the single-device output, input gradient and
// parameter gradients; before, anything but LayerNorm / RMSNorm was refused.
TEST_CASE("SequenceParallel on any module: an MLP on the sequence shard", "[tp]") {
  const int64_t W = dt::world_size();
  auto mesh = tp_mesh();
  const dt::Tensor x = same_randn({2, 2 * W, 4}, 81);
  const dt::Tensor w = same_randn({2, 2 * W, 4}, 82);
  auto weighted = [&](const dt::DTensor& y) { return dt::sum(dt::mul(y, nn::local_dtensor(w))); };
  dt::manual_seed(83);
  nn::MLP ref(4, 3);
  dt::manual_seed(83);
  nn::MLP mlp(4, 3);
  dt::parallelize_module(mlp, mesh, dt::SequenceParallel());
  for (const auto& [name, p] : mlp.named_parameters()) {
    INFO(name);
    REQUIRE(p.placements() == dt::Placements{dt::Replicate()});
  }
  dt::DTensor xr = nn::local_dtensor(x.clone());
  xr.requires_grad_(true);
  weighted(ref(xr)).backward();
  dt::DTensor xl = nn::local_dtensor(my_chunk(x, 1).contiguous());
  xl.requires_grad_(true);
  const dt::DTensor y = mlp(xl);
  REQUIRE(y.placements() == dt::Placements{dt::Shard(1)});
  CHECK(max_diff(y.full_tensor(), ref(nn::local_dtensor(x)).to_local()) < kTol);
  dt::sum(dt::mul(y, dt::distribute_tensor(w, mesh, {dt::Shard(1)}, std::nullopt))).backward();
  REQUIRE(xl.grad().defined());
  CHECK(max_diff(xl.grad().to_local(), my_chunk(xr.grad().to_local(), 1)) < kTol);
  const auto want = ref.named_parameters();
  const auto got = mlp.named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(max_diff(got[i].second.grad().full_tensor(), want[i].second.grad().to_local()) < kTol);
  }
}
