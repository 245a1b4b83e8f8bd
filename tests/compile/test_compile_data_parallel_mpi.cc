// dtensor::compile of steps that train through data parallel's own hooks (replicate, fully_shard,
// TP x FSDP on a 2-D mesh, mixed precision), under mpirun at 1, 2 and 4 ranks: the compiled step
// equals the eager step of a twin model bit for bit over 10 steps, replay issues the recorded
// collectives (all_gather, reduce_scatter, bucket all_reduce) and nothing else, and what cannot be
// captured (no_sync accumulation) is refused with a clear error on every rank. With every block
// under activation checkpointing (dtensor/nn/activation_checkpoint.h, "Under dtensor::compile")
// the compiled step equals the eager checkpointed step and the plain one, and holds the recompute.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/dtensor.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;

namespace {

nn::TransformerConfig small_config() {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg;
  cfg.vocab_size = 4 * W + 3;  // uneven shards
  cfg.dim = 8;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  cfg.max_seq_len = 5;  // pos_embeddings [5, 8]: uneven on dp
  return cfg;
}

enum class Layout { kReplicate, kFullyShard, kFullyShardMixed, kTpFsdp };

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kReplicate:
      return "replicate (small buckets)";
    case Layout::kFullyShard:
      return "fully_shard per block";
    case Layout::kFullyShardMixed:
      return "fully_shard, float32 compute over float64 shards";
    case Layout::kTpFsdp:
      return "TP x FSDP";
  }
  return "";
}

// A transformer trained through data parallel's hooks with AdamW and clip_grad_norm_; `ac`: every
// block under checkpoint_wrapper. Two built alike train identically.
struct DpTrainer {
  nn::Transformer model;
  dt::DeviceMesh mesh;
  std::shared_ptr<dt::DataParallel> dp;
  std::unique_ptr<dt::optim::AdamW> opt;
  int64_t vocab;

  DpTrainer(const nn::TransformerConfig& cfg, Layout layout, bool ac = false)
      : model((dt::manual_seed(21), cfg),
              {.dtype = layout == Layout::kFullyShardMixed ? dt::kFloat64 : dt::kFloat32}),
        mesh(make_mesh(layout)),
        vocab(cfg.vocab_size) {
    const dt::GroupingPolicy blocks{.module_types = {"TransformerBlock"}};
    switch (layout) {
      case Layout::kReplicate:
        dp = dt::replicate(model, mesh, {.bucket_cap_bytes = 512});
        break;
      case Layout::kFullyShard:
        dp = dt::fully_shard(model, mesh, {.grouping = blocks});
        break;
      case Layout::kFullyShardMixed:
        dp = dt::fully_shard(model, mesh, {.grouping = blocks, .param_dtype = dt::kFloat32});
        break;
      case Layout::kTpFsdp:
        dt::parallelize_module(model, mesh[{"tp"}], dt::transformer_tp_plan());
        dp = dt::fully_shard(model, mesh, {.grouping = blocks});
        break;
    }
    if (ac) nn::apply_activation_checkpointing(model, "layers", 1);
    opt = std::make_unique<dt::optim::AdamW>(model.parameters(), dt::optim::AdamWOptions(1e-2));
  }

  static dt::DeviceMesh make_mesh(Layout layout) {
    const int64_t W = dt::world_size();
    if (layout != Layout::kTpFsdp) return dt::init_device_mesh(dt::kCPU, {W}, {"dp"});
    const int64_t tp = W >= 2 ? 2 : 1;
    return dt::init_device_mesh(dt::kCPU, {W / tp, tp}, {"dp", "tp"});
  }

  // One step on this rank's rows: zero_grad, forward, loss, backward, clip, update.
  dt::DTensorList step(const dt::DTensorList& batch) {
    opt->zero_grad();
    const int64_t rows[] = {-1, vocab};
    const dt::DTensor loss = dt::cross_entropy(dt::reshape(model(batch[0]), rows), batch[1]);
    loss.backward();
    dt::optim::clip_grad_norm_(opt->parameters(), 0.5);
    opt->step();
    return {loss.detach()};
  }
};

// This rank's rows of step i's batch (rows differ by dp rank, agree across tp), as local
// DTensors: what each rank feeds a data-parallel model.
dt::DTensorList rank_batch(const DpTrainer& t, int i) {
  const int64_t dp_rank = t.mesh.get_local_rank(0);
  dt::Generator g(500 + 37 * i + dp_rank);
  const dt::Tensor tok = dt::randint(0, t.vocab, {2, 5}, dt::TensorOptions(dt::kInt64), &g);
  const dt::Tensor tgt = dt::randint(0, t.vocab, {10}, dt::TensorOptions(dt::kInt64), &g);
  return {nn::local_dtensor(tok), nn::local_dtensor(tgt)};
}

double scalar(const dt::DTensor& t) {
  return t.full_tensor().to(dt::kFloat64).item<double>();
}

// t's step compiled (CompileOptions::module its model), with or without the scheduling pass.
dt::CompiledStep compile_step(DpTrainer& t, bool schedule) {
  dt::CompileOptions options;
  options.module = &t.model;
  options.schedule_collectives = schedule;
  return dt::compile([&t](const dt::DTensorList& batch) { return t.step(batch); }, options);
}

// The parameters and gradients of `got` equal those of `want` bit for bit on this rank.
void check_same_state(const DpTrainer& got, const DpTrainer& want) {
  const auto pg = got.model.named_parameters();
  const auto pw = want.model.named_parameters();
  REQUIRE(pg.size() == pw.size());
  for (size_t k = 0; k < pw.size(); ++k) {
    INFO(pw[k].first);
    REQUIRE(pg[k].second.placements() == pw[k].second.placements());
    REQUIRE(dt::test::max_diff(pg[k].second.to_local(), pw[k].second.to_local()) == 0.0);
    REQUIRE(dt::test::max_diff(pg[k].second.grad().to_local(), pw[k].second.grad().to_local()) ==
            0.0);
  }
}

}  // namespace

TEST_CASE("a compiled step trains through data parallel's hooks bit for bit", "[compile][dp]") {
  const Layout layout =
      GENERATE(Layout::kReplicate, Layout::kFullyShard, Layout::kFullyShardMixed, Layout::kTpFsdp);
  const bool schedule = GENERATE(false, true);
  INFO(layout_name(layout) << ", " << dt::world_size() << " ranks, schedule " << schedule);
  const nn::TransformerConfig cfg = small_config();
  DpTrainer eager(cfg, layout), compiled(cfg, layout);
  dt::CompiledStep step = compile_step(compiled, schedule);
  for (int i = 0; i < 10; ++i) {
    INFO("step " << i);
    if (i == 6) {  // a learning-rate change: read when the update runs
      eager.opt->options().lr(3e-3);
      compiled.opt->options().lr(3e-3);
    }
    const dt::DTensorList batch = rank_batch(eager, i);
    CHECK(scalar(step(batch)[0]) == scalar(eager.step(batch)[0]));
    check_same_state(compiled, eager);
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 9);
  const std::string text = step.graph().str();
  INFO(text);
  const bool sharded = layout != Layout::kReplicate;
  CHECK((text.find("dp all_gather") != std::string::npos) == sharded);
  CHECK((text.find("dp reduce_scatter") != std::string::npos) == sharded);
  if (layout == Layout::kReplicate) {
    CHECK(text.find("dp all_reduce") != std::string::npos);
    CHECK(eager.dp->num_buckets() > 1);
  }
  CHECK(text.find("grad accumulate") != std::string::npos);
  // Replay issues exactly the recorded collectives (the data-parallel ones among them).
  dt::CommDebugMode comm;
  step(rank_batch(eager, 10));
  CHECK(comm.total_count() == step.graph().stats().collectives);
  if (eager.mesh.size(0) > 1) CHECK(comm.total_count() > 0);
}

TEST_CASE("a compiled step with activation checkpointing equals the eager step bit for bit",
          "[compile][dp][checkpoint]") {
  const Layout layout = GENERATE(Layout::kFullyShard, Layout::kTpFsdp);
  const bool schedule = GENERATE(false, true);
  INFO(layout_name(layout) << ", " << dt::world_size() << " ranks, schedule " << schedule);
  const nn::TransformerConfig cfg = small_config();
  DpTrainer eager(cfg, layout, /*ac=*/true), plain(cfg, layout, /*ac=*/false);
  DpTrainer compiled(cfg, layout, /*ac=*/true);
  dt::CompiledStep step = compile_step(compiled, schedule);
  for (int i = 0; i < 10; ++i) {
    INFO("step " << i << " (0: the capture, then replays)");
    const dt::DTensorList batch = rank_batch(eager, i);
    const double got = scalar(step(batch)[0]);
    CHECK(got == scalar(eager.step(batch)[0]));
    CHECK(got == scalar(plain.step(batch)[0]));
    check_same_state(compiled, eager);
    check_same_state(compiled, plain);
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 9);
  // The graph holds the blocks' recompute: the plain twin's step, captured, has fewer nodes (no
  // second forward of the blocks in backward).
  DpTrainer plain_compiled(cfg, layout, /*ac=*/false);
  dt::CompiledStep plain_step = compile_step(plain_compiled, schedule);
  plain_step(rank_batch(eager, 0));
  INFO(step.graph().str());
  CHECK(step.graph().nodes().size() > plain_step.graph().nodes().size());
  // Replay issues exactly the recorded collectives.
  dt::CommDebugMode comm;
  step(rank_batch(eager, 10));
  CHECK(comm.total_count() == step.graph().stats().collectives);
}

TEST_CASE("a data-parallel step without gradient synchronisation is refused", "[compile][dp]") {
  const nn::TransformerConfig cfg = small_config();
  DpTrainer t(cfg, Layout::kReplicate);
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return t.step(batch); }, {});
  {
    dt::NoSync no_sync(*t.dp);
    REQUIRE_THROWS_WITH(step(rank_batch(t, 0)),
                        Catch::Contains("[data_parallel] a step whose gradients are not "
                                        "synchronised") &&
                            Catch::Contains("cannot be captured by dtensor::compile"));
  }
  // Nothing half-done stays behind: the same step runs eagerly and then compiles.
  t.opt->zero_grad();
  t.step(rank_batch(t, 1));
  step(rank_batch(t, 2));
  CHECK(step.captures() == 1);
}

TEST_CASE("expansion: a single-device step compiled over a dp mesh is the data-parallel step",
          "[compile][dp]") {
  const dt::DataParallelStyle style =
      GENERATE(dt::DataParallelStyle::kReplicate, dt::DataParallelStyle::kFullyShard,
               dt::DataParallelStyle::kDefault);
  const int64_t W = dt::world_size();
  INFO("style " << static_cast<int>(style) << ", " << W << " ranks");
  const nn::TransformerConfig cfg = small_config();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {W}, {"dp"});
  const dt::GroupingPolicy blocks{.module_types = {"TransformerBlock"}};
  // Written for one device: a model, its optimizer, a step on a whole batch.
  dt::manual_seed(21);
  nn::Transformer model(cfg);
  dt::optim::AdamW opt(model.parameters(), dt::optim::AdamWOptions(1e-2));
  const int64_t rows[] = {-1, cfg.vocab_size};
  auto single_device_step = [&](const dt::DTensorList& batch) {
    opt.zero_grad();
    const dt::DTensor loss = dt::cross_entropy(dt::reshape(model(batch[0]), rows), batch[1]);
    loss.backward();
    dt::optim::clip_grad_norm_(opt.parameters(), 0.5);
    opt.step();
    return dt::DTensorList{loss.detach()};
  };
  dt::CompileOptions options;
  options.module = &model;
  options.optimizer = &opt;
  options.data_parallel.grouping = blocks;
  dt::CompiledStep step = dt::compile(single_device_step, mesh, style, options);
  // The eager data-parallel twin, fed each rank's share by hand.
  dt::manual_seed(21);
  nn::Transformer twin(cfg);
  auto dp = dt::data_parallel(twin, mesh, style, {.grouping = blocks});
  dt::optim::AdamW twin_opt(twin.parameters(), dt::optim::AdamWOptions(1e-2));
  for (int i = 0; i < 6; ++i) {
    INFO("step " << i);
    dt::Generator g(900 + i);  // the same global batch on every rank
    const dt::Tensor tok =
        dt::randint(0, cfg.vocab_size, {2 * W, 5}, dt::TensorOptions(dt::kInt64), &g);
    const dt::Tensor tgt =
        dt::randint(0, cfg.vocab_size, {2 * W * 5}, dt::TensorOptions(dt::kInt64), &g);
    const double got = scalar(step({nn::local_dtensor(tok), nn::local_dtensor(tgt)})[0]);
    const int64_t r = mesh.get_local_rank(0);
    twin_opt.zero_grad();
    const dt::DTensor loss = dt::cross_entropy(
        dt::reshape(twin(nn::local_dtensor(tok.narrow(0, 2 * r, 2).contiguous())), rows),
        nn::local_dtensor(tgt.narrow(0, 10 * r, 10).contiguous()));
    loss.backward();
    dt::optim::clip_grad_norm_(twin_opt.parameters(), 0.5);
    twin_opt.step();
    CHECK(got == scalar(loss));
    const auto pe = twin.named_parameters();
    const auto pc = model.named_parameters();
    for (size_t k = 0; k < pe.size(); ++k) {
      INFO(pe[k].first);
      REQUIRE(pc[k].second.placements() == pe[k].second.placements());
      REQUIRE(dt::test::max_diff(pc[k].second.to_local(), pe[k].second.to_local()) == 0.0);
    }
  }
  CHECK(step.captures() == 1);
  // The optimizer follows the data-parallel parameters; its states have their placements.
  CHECK(opt.parameters()[0].device_mesh() == mesh);
  for (const auto& [name, s] : opt.state_dict()) {
    if (!name.ends_with("step") && !name.starts_with("param_groups."))
      CHECK(s.device_mesh() == mesh);
  }
  // A batch the dp ranks cannot share equally is refused on every rank.
  if (W > 1) {
    const dt::Tensor odd = dt::zeros({2 * W + 1, 5}, dt::TensorOptions(dt::kInt64));
    CHECK_THROWS_WITH(
        step({nn::local_dtensor(odd), nn::local_dtensor(odd.reshape({-1}))}),
        Catch::Contains("not a multiple of the") && Catch::Contains("data-parallel ranks"));
  }
}

TEST_CASE("expansion needs the module; the optimizer must follow before its first step",
          "[compile][dp]") {
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"dp"});
  auto fn = [](const dt::DTensorList& b) { return b; };
  CHECK_THROWS_WITH(dt::compile(fn, mesh, dt::DataParallelStyle::kReplicate, {}),
                    Catch::Contains("needs CompileOptions::module"));
  dt::manual_seed(3);
  nn::Linear lin(4, 4);
  dt::optim::SGD opt(lin.parameters(), dt::optim::SGDOptions(0.1));
  opt.zero_grad();
  dt::sum(lin(nn::local_dtensor(dt::ones({2, 4})))).backward();
  opt.step();
  dt::CompileOptions options;
  options.module = &lin;
  options.optimizer = &opt;
  CHECK_THROWS_WITH(dt::compile(fn, mesh, dt::DataParallelStyle::kReplicate, options),
                    Catch::Contains("[optimizer] replace_parameters: the optimizer has state"));
  // An optimizer over a parameter the module does not hold: refused before the module changes.
  nn::Linear other(4, 4);
  dt::optim::SGD stranger(other.parameters(), dt::optim::SGDOptions(0.1));
  options.optimizer = &stranger;
  CHECK_THROWS_WITH(dt::compile(fn, mesh, dt::DataParallelStyle::kReplicate, options),
                    Catch::Contains("is not a parameter of CompileOptions::module"));
  CHECK(dt::is_local(lin.get_parameter("weight")));
}
