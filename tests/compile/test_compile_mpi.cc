// dtensor::compile under mpirun (1, 2 and 4 ranks): a captured training step replays bit for
// bit what the eager step computes (tensor-parallel transformer, AdamW, SGD with momentum, Adam,
// RMSprop and Adagrad,
// clip_grad_norm_, a learning rate changed between steps), guards re-capture or raise, a
// changed op sequence is detected, host scalars are guarded on their values, what cannot be
// captured is refused with a clear error, and the passes do what they claim (one collective per
// moved value; memory freed at last use). Cross-rank agreement: test_compile_agree_mpi.cc.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/dtensor.h"
#include "tests/parallel/parallel_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
using dt::CollectiveKind;

namespace {

dt::DeviceMesh tp_mesh() {
  return dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"tp"});
}

nn::TransformerConfig small_config() {
  const int64_t W = dt::world_size();
  nn::TransformerConfig cfg;
  cfg.vocab_size = 4 * W + 3;  // uneven vocabulary shards
  cfg.dim = 8 * W;
  cfg.n_heads = 2 * W;
  cfg.n_layers = 2;
  cfg.max_seq_len = 6;
  return cfg;
}

// A tensor-parallel transformer and its optimizer: two built alike train identically.
struct Trainer {
  nn::Transformer model;
  std::unique_ptr<dt::optim::Optimizer> opt;
  dt::DeviceMesh mesh;

  int64_t vocab;

  // `kind`: "AdamW", "SGD" (with momentum), "Adam" (L2, amsgrad), "RMSprop" (centered, momentum)
  // or "Adagrad" (lr_decay, initial_accumulator_value).
  Trainer(const nn::TransformerConfig& cfg, const std::string& kind)
      : model((dt::manual_seed(77), cfg)), mesh(tp_mesh()), vocab(cfg.vocab_size) {
    dt::parallelize_module(model, mesh, dt::transformer_tp_plan({.loss_parallel = true}));
    namespace o = dt::optim;
    const auto params = model.parameters();
    if (kind == "AdamW") {
      opt = std::make_unique<o::AdamW>(params, o::AdamWOptions(1e-2));
    } else if (kind == "SGD") {
      opt = std::make_unique<o::SGD>(params, o::SGDOptions(5e-2).momentum(0.9).weight_decay(1e-3));
    } else if (kind == "Adam") {
      opt =
          std::make_unique<o::Adam>(params, o::AdamOptions(1e-2).weight_decay(1e-2).amsgrad(true));
    } else if (kind == "RMSprop") {
      opt = std::make_unique<o::RMSprop>(params,
                                         o::RMSpropOptions(1e-3).centered(true).momentum(0.5));
    } else {
      opt = std::make_unique<o::Adagrad>(
          params, o::AdagradOptions(5e-2).lr_decay(0.1).initial_accumulator_value(0.1));
    }
  }

  // One step: zero_grad, forward, loss, backward, clip, update; returns the loss.
  dt::DTensorList step(const dt::DTensorList& batch) {
    opt->zero_grad();
    const dt::DTensor logits = model(batch[0]);
    const int64_t rows[] = {-1, vocab};
    const dt::DTensor loss = dt::cross_entropy(dt::reshape(logits, rows), batch[1]);
    loss.backward();
    dt::optim::clip_grad_norm_(opt->parameters(), 0.5);
    opt->step();
    return {loss.detach()};
  }
};

dt::DTensorList make_batch(const dt::DeviceMesh& mesh, int64_t vocab, int64_t seq, int i) {
  dt::Generator g(1000 + i);
  const dt::Tensor tokens = dt::randint(0, vocab, {3, seq}, dt::TensorOptions(dt::kInt64), &g);
  const dt::Tensor targets = dt::randint(0, vocab, {3 * seq}, dt::TensorOptions(dt::kInt64), &g);
  return {dt::DTensor::from_local(tokens, mesh, {dt::Replicate()}),
          dt::DTensor::from_local(targets, mesh, {dt::Replicate()})};
}

// Bit equality of two models' parameters (their local shards).
void require_same_parameters(const nn::Module& a, const nn::Module& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    REQUIRE(dt::test::max_diff(pa[i].second.to_local(), pb[i].second.to_local()) == 0.0);
  }
}

double scalar(const dt::DTensor& t) {
  return t.full_tensor().to(dt::kFloat64).item<double>();
}

}  // namespace

TEST_CASE("a compiled TP training step replays the eager step bit for bit", "[compile]") {
  const std::string kind = GENERATE("AdamW", "SGD", "Adam", "RMSprop", "Adagrad");
  const bool schedule = GENERATE(false, true);
  // Scheduling the collectives does not depend on the optimizer: AdamW and SGD cover it, the
  // others run unscheduled only (CI time at 4 ranks).
  if (schedule && kind != "AdamW" && kind != "SGD") return;
  INFO(kind << ", " << dt::world_size() << " ranks, schedule " << schedule);
  const nn::TransformerConfig cfg = small_config();
  Trainer eager(cfg, kind), compiled(cfg, kind);
  dt::CompileOptions options;
  options.schedule_collectives = schedule;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); }, options);
  for (int i = 0; i < 10; ++i) {
    INFO("step " << i);
    if (i == 6) {  // a learning-rate schedule: a runtime scalar, read when the update runs
      eager.opt->set_lr(eager.opt->lr() * 0.3);
      compiled.opt->set_lr(compiled.opt->lr() * 0.3);
    }
    const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, i);
    const double want = scalar(eager.step(batch)[0]);
    const double got = scalar(step(batch)[0]);
    CHECK(got == want);
    require_same_parameters(compiled.model, eager.model);
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 9);
  CHECK(compiled.opt->step_count() == 10);
  const std::string text = step.graph().str();
  CHECK(text.find("op mm") != std::string::npos);
  const std::map<std::string, std::string> update = {{"AdamW", "optim adamw_update"},
                                                     {"SGD", "optim sgd_update"},
                                                     {"Adam", "optim adam_update"},
                                                     {"RMSprop", "optim rmsprop_update"},
                                                     {"Adagrad", "optim adagrad_update"}};
  CHECK(text.find(update.at(kind)) != std::string::npos);
  CHECK(text.find("grad accumulate") != std::string::npos);
  CHECK(text.find("clip_grad_norm_.scale") != std::string::npos);
  // Roles: every parameter, its gradient and its state tensors (AdamW: two, SGD: one, Adam with
  // amsgrad: three, RMSprop centered with momentum: three, Adagrad: one).
  int64_t roles[6] = {};
  for (const dt::compiler::Value& v : step.graph().values()) roles[static_cast<int>(v.role)] += 1;
  const auto n_params = static_cast<int64_t>(compiled.model.parameters().size());
  CHECK(roles[static_cast<int>(dt::compiler::Role::kParam)] == n_params);
  CHECK(roles[static_cast<int>(dt::compiler::Role::kGrad)] >= n_params);
  const std::map<std::string, int64_t> states = {
      {"AdamW", 2}, {"SGD", 1}, {"Adam", 3}, {"RMSprop", 3}, {"Adagrad", 1}};
  CHECK(roles[static_cast<int>(dt::compiler::Role::kState)] == states.at(kind) * n_params);
  CHECK(roles[static_cast<int>(dt::compiler::Role::kInput)] == 2);
  if (dt::world_size() > 1) {
    // Tensor parallel: the step's collectives are in the graph and replay issues them.
    CHECK(step.graph().stats().collectives > 0);
    CHECK(text.find("all_reduce") != std::string::npos);
    dt::CommDebugMode comm;
    const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 10);
    step(batch);
    CHECK(comm.total_count() == step.graph().stats().collectives);
    // Scheduled: the moves run on the communication thread.
    CHECK((text.find(") async") != std::string::npos) == schedule);
  }
}

TEST_CASE("data parallel by DTensor semantics: batch-sharded inputs, replicated parameters",
          "[compile][dp]") {
  // The DTensor expand mode: the user lays out the inputs (batch Shard(0)) and the parameters
  // (Replicate); the gradients arrive Partial and are reduced to the parameters' placements in
  // the graph, in buckets. Replay equals the eager step bit for bit at every rank count (a
  // bucket's all-reduce sums each element in rank order, as each gradient's own all-reduce does:
  // dtensor/collectives/mpi/rank_ordered_reduce.h) and single-device training closely.
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {dt::world_size()}, {"dp"});
  const int64_t W = dt::world_size(), dim = 6, rows = 4 * W + 1;  // uneven batch shards
  const int64_t bucket = GENERATE(int64_t{0}, int64_t{200}, int64_t{1} << 20);
  const bool schedule = GENERATE(false, true);
  INFO("bucket_bytes " << bucket << ", schedule " << schedule);
  const nn::ModuleOptions f64{.dtype = dt::kFloat64};
  auto make = [&] {
    dt::manual_seed(3);
    return std::make_unique<nn::MLP>(dim, 2 * dim, nn::Activation::kSilu, true, f64);
  };
  auto eager = make(), compiled = make(), single = make();
  dt::distribute_module(*eager, mesh);
  dt::distribute_module(*compiled, mesh);
  dt::optim::AdamW opt_e(eager->parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW opt_c(compiled->parameters(), dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW opt_s(single->parameters(), dt::optim::AdamWOptions(1e-2));
  auto train = [](nn::Module& m, dt::optim::Optimizer& o, const dt::DTensorList& in) {
    o.zero_grad();
    const dt::DTensor loss = dt::mse_loss(m(in[0]), in[1]);
    loss.backward();
    o.step();
    return dt::DTensorList{loss.detach()};
  };
  dt::CompileOptions options;
  options.bucket_bytes = bucket;
  options.schedule_collectives = schedule;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& in) { return train(*compiled, opt_c, in); }, options);
  for (int i = 0; i < 6; ++i) {
    dt::Generator g(300 + i);
    const dt::Tensor x = dt::randn({rows, dim}, dt::TensorOptions(dt::kFloat64), &g);
    const dt::Tensor y = dt::randn({rows, dim}, dt::TensorOptions(dt::kFloat64), &g);
    const dt::DTensorList in = {dt::distribute_tensor(x, mesh, {dt::Shard(0)}),
                                dt::distribute_tensor(y, mesh, {dt::Shard(0)})};
    const double want = scalar(train(*eager, opt_e, in)[0]);
    const double got = scalar(step(in)[0]);
    const double one =
        scalar(train(*single, opt_s, {nn::local_dtensor(x), nn::local_dtensor(y)})[0]);
    INFO("step " << i);
    CHECK(got == want);  // bit for bit, buckets or not, at any rank count
    CHECK(std::abs(got - one) < 1e-12);
  }
  const auto pc = compiled->named_parameters();
  const auto pe = eager->named_parameters();
  const auto ps = single->named_parameters();
  int64_t grad_bytes = 0;
  for (size_t i = 0; i < pc.size(); ++i) {
    INFO(pc[i].first);
    CHECK(pc[i].second.placements()[0].is_replicate());
    CHECK(dt::test::max_diff(pc[i].second.to_local(), pe[i].second.to_local()) == 0.0);
    CHECK(dt::test::max_diff(pc[i].second.to_local(), ps[i].second.to_local()) < 1e-12);
    grad_bytes += static_cast<int64_t>(pc[i].second.to_local().nbytes());
  }
  if (W > 1) {
    // The forward needs no collective; the gradients' reductions: one each without buckets,
    // at most ceil(gradient bytes / bucket size) + 1 with them.
    const int64_t n = step.graph().stats().collectives;
    INFO(step.graph().str());
    if (bucket == 0) {
      CHECK(n == static_cast<int64_t>(pc.size()));
    } else {
      CHECK(n <= (grad_bytes + bucket - 1) / bucket + 1);
      if (bucket >= grad_bytes) CHECK(n == 1);  // one bucket holds every gradient
      dt::CommDebugMode comm;
      dt::Generator g(99);
      const dt::Tensor x = dt::randn({rows, dim}, dt::TensorOptions(dt::kFloat64), &g);
      step({dt::distribute_tensor(x, mesh, {dt::Shard(0)}),
            dt::distribute_tensor(x, mesh, {dt::Shard(0)})});
      CHECK(comm.count(CollectiveKind::kAllReduce) == n);
    }
  }
}

namespace {

// fc2 of an MLP kept out of the trace: its forward and backward run as user code at every
// replay (an EagerFunction), on the original's parameters.
class EagerLinear : public nn::Module {
 public:
  explicit EagerLinear(std::shared_ptr<nn::Module> original) : original_(std::move(original)) {}
  std::string type_name() const override { return "EagerLinear"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    dt::compiler::EagerFunction f;
    f.name = "fc2";
    f.forward = [](const dt::DTensorList& in) {
      return dt::DTensorList{dt::linear(in[0], in[1], in[2])};
    };
    f.backward = [](const dt::DTensorList& in, const dt::DTensorList& g) {
      const int64_t batch_dim[] = {0};
      return dt::DTensorList{dt::matmul(g[0], in[1]), dt::matmul(dt::transpose(g[0], 0, 1), in[0]),
                             dt::sum(g[0], batch_dim)};
    };
    return dt::compiler::call_eager(f,
                                    {x, original_->param("weight"), original_->param("bias")})[0];
  }

 private:
  std::shared_ptr<nn::Module> original_;
};

// fc1 (the first layer) kept eager: its input needs no gradient, so backward returns none for it.
class EagerFirstLinear : public nn::Module {
 public:
  explicit EagerFirstLinear(std::shared_ptr<nn::Module> original)
      : original_(std::move(original)) {}
  std::string type_name() const override { return "EagerFirstLinear"; }
  dt::DTensor forward(const dt::DTensor& x) override {
    dt::compiler::EagerFunction f;
    f.name = "fc1";
    f.forward = [](const dt::DTensorList& in) {
      return dt::DTensorList{dt::linear(in[0], in[1], in[2])};
    };
    f.backward = [](const dt::DTensorList& in, const dt::DTensorList& g) {
      const int64_t batch_dim[] = {0};
      return dt::DTensorList{dt::DTensor(), dt::matmul(dt::transpose(g[0], 0, 1), in[0]),
                             dt::sum(g[0], batch_dim)};
    };
    return dt::compiler::call_eager(f,
                                    {x, original_->param("weight"), original_->param("bias")})[0];
  }

 private:
  std::shared_ptr<nn::Module> original_;
};

struct KeepFc2Eager : dt::compiler::Override {
  bool fuse = false;  // transform: put a local computation in place of the eager forward
  int64_t fused = 0;
  bool first_too = false;  // also keep fc1 eager (its backward returns no input gradient)
  std::shared_ptr<nn::Module> replacement(const std::string& fqn,
                                          const std::shared_ptr<nn::Module>& original) override {
    if (fqn == "fc1" && first_too) return std::make_shared<EagerFirstLinear>(original);
    return fqn == "fc2" ? std::make_shared<EagerLinear>(original) : nullptr;
  }
  void transform(dt::compiler::Graph& graph) override {
    if (!fuse) return;
    const int64_t k = graph.find("fc2.forward");
    REQUIRE(k >= 0);
    graph.node(k).fn = [](absl::Span<const dt::Tensor> in, absl::Span<dt::Tensor> out) {
      out[0] = dt::add(dt::mm(in[0], in[1].transpose(0, 1)), in[2]);
    };
    graph.node(k).kind = "fused";
    ++fused;
  }
};

}  // namespace

TEST_CASE("Override: a submodule kept eager, and a transform around its node", "[compile]") {
  const int64_t dim = 5;
  const nn::ModuleOptions f64{.dtype = dt::kFloat64};
  auto make = [&] {
    dt::manual_seed(8);
    return std::make_unique<nn::MLP>(dim, 3, nn::Activation::kSilu, true, f64);
  };
  for (const int variant : {0, 1, 2}) {
    const bool fuse = variant == 1, first_too = variant == 2;
    INFO("fuse " << fuse << ", fc1 eager too " << first_too);
    auto eager = make(), compiled = make();
    dt::optim::SGD opt_e(eager->parameters(), dt::optim::SGDOptions(0.1).momentum(0.9));
    dt::optim::SGD opt_c(compiled->parameters(), dt::optim::SGDOptions(0.1).momentum(0.9));
    auto train = [](nn::Module& m, dt::optim::Optimizer& o, const dt::DTensorList& in) {
      o.zero_grad();
      const dt::DTensor loss = dt::mse_loss(m(in[0]), in[1]);
      loss.backward();
      o.step();
      return dt::DTensorList{loss.detach()};
    };
    auto keep = std::make_shared<KeepFc2Eager>();
    keep->fuse = fuse;
    keep->first_too = first_too;
    dt::CompileOptions options;
    options.module = compiled.get();
    options.overrides = {keep};
    dt::CompiledStep step = dt::compile(
        [&](const dt::DTensorList& in) { return train(*compiled, opt_c, in); }, options);
    for (int i = 0; i < 5; ++i) {
      dt::Generator g(50 + i);
      const dt::DTensorList in = {
          nn::local_dtensor(dt::randn({7, dim}, dt::TensorOptions(dt::kFloat64), &g)),
          nn::local_dtensor(dt::randn({7, dim}, dt::TensorOptions(dt::kFloat64), &g))};
      const double want = scalar(train(*eager, opt_e, in)[0]);
      const double got = scalar(step(in)[0]);
      INFO("step " << i);
      CHECK(std::abs(got - want) <= 1e-14 * std::abs(want));
    }
    const auto pe = eager->named_parameters();
    const auto pc = compiled->named_parameters();
    REQUIRE(pe.size() == pc.size());
    for (size_t i = 0; i < pe.size(); ++i) {
      INFO(pc[i].first);
      CHECK(dt::test::max_diff(pc[i].second.to_local(), pe[i].second.to_local()) < 1e-13);
    }
    const std::string text = step.graph().str();
    INFO(text);
    CHECK(text.find(fuse ? "fused fc2.forward" : "eager fc2.forward") != std::string::npos);
    CHECK(text.find("eager fc2.backward") != std::string::npos);
    CHECK(keep->fused == (fuse ? 1 : 0));
    // The original submodule is back after the capture.
    CHECK(compiled->get_submodule("fc2").type_name() == "Linear");
  }
  // A transform that leaves a node reading a value nothing makes is refused.
  struct Broken : KeepFc2Eager {
    void transform(dt::compiler::Graph& graph) override { graph.erase(graph.find("fc2.forward")); }
  };
  auto model = make();
  dt::optim::SGD opt(model->parameters(), dt::optim::SGDOptions(0.1));
  dt::CompileOptions options;
  options.module = model.get();
  options.overrides = {std::make_shared<Broken>()};
  dt::CompiledStep step = dt::compile(
      [&](const dt::DTensorList& in) {
        opt.zero_grad();
        const dt::DTensor loss = dt::mse_loss((*model)(in[0]), in[1]);
        loss.backward();
        opt.step();
        return dt::DTensorList{loss.detach()};
      },
      options);
  const dt::DTensor x = nn::local_dtensor(dt::ones({2, dim}, dt::TensorOptions(dt::kFloat64)));
  const dt::DTensor y = nn::local_dtensor(dt::zeros({2, dim}, dt::TensorOptions(dt::kFloat64)));
  REQUIRE_THROWS_WITH(step({x, y}), Catch::Contains("before any node makes it"));
}

TEST_CASE("replay follows state the capture did not see", "[compile]") {
  const int64_t dim = 4;
  const nn::ModuleOptions f64{.dtype = dt::kFloat64};
  auto make = [&] {
    dt::manual_seed(12);
    return std::make_unique<nn::MLP>(dim, 3, nn::Activation::kSilu, true, f64);
  };
  auto batch = [&](int i) {
    dt::Generator g(70 + i);
    return dt::DTensorList{
        nn::local_dtensor(dt::randn({5, dim}, dt::TensorOptions(dt::kFloat64), &g)),
        nn::local_dtensor(dt::randn({5, dim}, dt::TensorOptions(dt::kFloat64), &g))};
  };
  SECTION("gradients accumulated over calls without zero_grad") {
    // Captured on a call that found no gradient, replayed on calls that find one: the replay
    // adds, as eager does; the optimizer steps every second call, outside the step.
    auto eager = make(), compiled = make();
    dt::optim::SGD opt_e(eager->parameters(), dt::optim::SGDOptions(0.1));
    dt::optim::SGD opt_c(compiled->parameters(), dt::optim::SGDOptions(0.1));
    auto micro = [](nn::Module& m, const dt::DTensorList& in) {
      const dt::DTensor loss = dt::mse_loss(m(in[0]), in[1]);
      loss.backward();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step =
        dt::compile([&](const dt::DTensorList& in) { return micro(*compiled, in); });
    for (int i = 0; i < 6; ++i) {
      CHECK(scalar(step(batch(i))[0]) == scalar(micro(*eager, batch(i))[0]));
      if (i % 2 == 1) {
        opt_e.step();
        opt_c.step();
        opt_e.zero_grad();
        opt_c.zero_grad();
      }
    }
    require_same_parameters(*compiled, *eager);
  }
  SECTION("optimizer state loaded after the capture") {
    auto eager = make(), compiled = make();
    dt::optim::AdamW opt_e(eager->parameters(), dt::optim::AdamWOptions(1e-2));
    dt::optim::AdamW opt_c(compiled->parameters(), dt::optim::AdamWOptions(1e-2));
    auto train = [](nn::Module& m, dt::optim::Optimizer& o, const dt::DTensorList& in) {
      o.zero_grad();
      const dt::DTensor loss = dt::mse_loss(m(in[0]), in[1]);
      loss.backward();
      o.step();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step =
        dt::compile([&](const dt::DTensorList& in) { return train(*compiled, opt_c, in); });
    for (int i = 0; i < 3; ++i) {
      train(*eager, opt_e, batch(i));
      step(batch(i));
    }
    // Both load the eager optimizer's state (moments and step count) of step 3, then go on.
    const auto saved = opt_e.state_dict();
    opt_c.load_state_dict(saved);
    for (int i = 3; i < 6; ++i) {
      CHECK(scalar(step(batch(i))[0]) == scalar(train(*eager, opt_e, batch(i))[0]));
    }
    require_same_parameters(*compiled, *eager);
  }
  SECTION("a load that switches a captured optimizer state on or off, or drops one, raises") {
    // The captured updates keep the state tensors they were recorded with (R2's finding: SGD
    // captured with momentum 0 then loaded with momentum 0.9 replayed plain SGD silently; AdamW
    // loaded with amsgrad on read an undefined tensor; a dropped slot kept being updated unseen).
    auto model = make();
    auto train = [&](dt::optim::Optimizer& o, const dt::DTensorList& in) {
      o.zero_grad();
      const dt::DTensor loss = dt::mse_loss((*model)(in[0]), in[1]);
      loss.backward();
      o.step();
      return dt::DTensorList{loss.detach()};
    };
    // A state_dict with its param_groups.<key> entry set to `v`.
    auto with_group_value = [](std::vector<std::pair<std::string, dt::DTensor>> state,
                               const std::string& key, double v) {
      for (auto& [name, value] : state) {
        if (name == "param_groups." + key)
          value = nn::local_dtensor(dt::full({1}, v, dt::TensorOptions(dt::kFloat64)));
      }
      return state;
    };
    dt::optim::SGD sgd(model->parameters(), dt::optim::SGDOptions(0.1));
    dt::CompiledStep sgd_step =
        dt::compile([&](const dt::DTensorList& in) { return train(sgd, in); });
    sgd_step(batch(0));
    sgd_step(batch(1));
    sgd.load_state_dict(with_group_value(sgd.state_dict(), "momentum", 0.9));
    REQUIRE_THROWS_WITH(sgd_step(batch(2)),
                        Catch::Contains("[SGD] the 'momentum_buffer' state of parameter 0 changed "
                                        "since this update was recorded by a compiled step"));
    dt::optim::AdamW adamw(model->parameters(), dt::optim::AdamWOptions(1e-2));
    dt::CompiledStep adamw_step =
        dt::compile([&](const dt::DTensorList& in) { return train(adamw, in); });
    adamw_step(batch(0));
    adamw_step(batch(1));
    auto without_first = adamw.state_dict();
    std::erase_if(without_first, [](const auto& e) { return e.first == "0.exp_avg"; });
    adamw.load_state_dict(without_first);
    REQUIRE_THROWS_WITH(adamw_step(batch(2)),
                        Catch::Contains("[AdamW] the 'exp_avg' state of parameter 0 changed"));
    dt::CompiledStep again =
        dt::compile([&](const dt::DTensorList& in) { return train(adamw, in); });
    again(batch(3));
    again(batch(4));
    adamw.load_state_dict(with_group_value(adamw.state_dict(), "amsgrad", 1.0));
    REQUIRE_THROWS_WITH(again(batch(5)), Catch::Contains("'max_exp_avg_sq' state of parameter 0"));
    // RMSprop's centered (grad_avg) switched on by set_hyper_parameters.
    dt::optim::RMSprop rmsprop(model->parameters(), dt::optim::RMSpropOptions(1e-3));
    dt::CompiledStep rmsprop_step =
        dt::compile([&](const dt::DTensorList& in) { return train(rmsprop, in); });
    rmsprop_step(batch(0));
    rmsprop_step(batch(1));
    rmsprop.set_hyper_parameters({{"centered", 1.0}});
    REQUIRE_THROWS_WITH(rmsprop_step(batch(2)),
                        Catch::Contains("[RMSprop] the 'grad_avg' state of parameter 0 changed"));
  }
  SECTION("batch norm's running statistics and counter") {
    auto bn_e = std::make_unique<nn::BatchNorm1d>(dim, 1e-5, 0.1, true, true, f64);
    auto bn_c = std::make_unique<nn::BatchNorm1d>(dim, 1e-5, 0.1, true, true, f64);
    auto fwd = [](nn::Module& m, const dt::DTensorList& in) {
      return dt::DTensorList{dt::sum(m(in[0]))};
    };
    dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) { return fwd(*bn_c, in); });
    for (int i = 0; i < 4; ++i) {
      CHECK(scalar(step(batch(i))[0]) == scalar(fwd(*bn_e, batch(i))[0]));
    }
    CHECK(dt::test::max_diff(bn_c->running_mean().to_local(), bn_e->running_mean().to_local()) ==
          0.0);
    CHECK(dt::test::max_diff(bn_c->running_var().to_local(), bn_e->running_var().to_local()) ==
          0.0);
    CHECK(bn_c->num_batches_tracked() == 4);
  }
  SECTION("the same tensor passed as two inputs is refused") {
    const dt::DTensorList in = batch(0);
    dt::CompiledStep step = dt::compile(
        [&](const dt::DTensorList& xs) { return dt::DTensorList{dt::sum(dt::add(xs[0], xs[1]))}; });
    REQUIRE_THROWS_WITH(step({in[0], in[0]}), Catch::Contains("are the same tensor"));
  }
}

TEST_CASE("guards: another input layout re-captures, or raises when asked to", "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  dt::Generator g(5);
  const dt::Tensor w = dt::randn({8, 8}, {}, &g);
  const dt::DTensor weight = dt::distribute_tensor(w, mesh, {dt::Shard(0)});
  auto fn = [&](const dt::DTensorList& in) {
    return dt::DTensorList{dt::sum(dt::matmul(in[0], dt::transpose(weight, 0, 1)))};
  };
  dt::CompiledStep step = dt::compile(fn);
  auto input = [&](int64_t rows) {
    return dt::distribute_tensor(dt::randn({rows, 8}, {}, &g), mesh, {dt::Replicate()});
  };
  const dt::DTensor a = input(4), b = input(6);
  const double ea = scalar(fn({a})[0]), eb = scalar(fn({b})[0]);
  CHECK(scalar(step({a})[0]) == ea);
  CHECK(scalar(step({a})[0]) == ea);
  CHECK(step.captures() == 1);
  CHECK(scalar(step({b})[0]) == eb);  // another shape: captured again
  CHECK(step.captures() == 2);
  CHECK(scalar(step({a})[0]) == ea);  // the first graph is kept
  CHECK(scalar(step({b})[0]) == eb);
  CHECK(step.captures() == 2);
  CHECK(step.replays() == 3);
  // Another placement of the same shape is another layout too.
  const dt::DTensor sharded = dt::distribute_tensor(a.full_tensor(), mesh, {dt::Shard(0)});
  CHECK(scalar(step({sharded})[0]) == Approx(ea).epsilon(1e-6));
  CHECK(step.captures() == 3);

  dt::CompileOptions strict;
  strict.recapture_on_guard_failure = false;
  dt::CompiledStep fixed = dt::compile(fn, strict);
  fixed({a});
  REQUIRE_THROWS_WITH(fixed({b}), Catch::Contains("[compile] the step's inputs do not match"));
}

TEST_CASE("a step whose op sequence changes is detected", "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::DTensor x = dt::distribute_tensor(dt::ones({4, 4}), mesh, {dt::Shard(0)});
  int calls = 0;
  dt::CompileOptions options;
  options.validate_every = 1;
  dt::CompiledStep step = dt::compile(
      [&](const dt::DTensorList& in) {
        // Host-side control flow: replay alone could not see it change.
        dt::DTensor y = dt::mul(in[0], in[0]);
        if (++calls >= 3) y = dt::exp(y);
        return dt::DTensorList{dt::sum(y)};
      },
      options);
  step({x});  // captured
  step({x});  // validated: the same ops
  REQUIRE_THROWS_WITH(step({x}), Catch::Contains("op sequence changed") && Catch::Contains("exp") &&
                                     Catch::Contains("node"));
}

TEST_CASE("a step or graph run again from code its own replay runs raises, and runs on after",
          "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::DTensor x = dt::distribute_tensor(
      dt::full({4, 4}, 0.25, dt::TensorOptions(dt::kFloat64)), mesh, {dt::Shard(0)});
  for (const bool scheduled : {false, true}) {
    INFO("schedule_collectives " << scheduled);
    // 0: the eager node computes; 1: it calls the compiled step; 2: it replays the step's graph.
    int reenter = 0;
    dt::CompiledStep* self = nullptr;
    dt::compiler::EagerFunction f;
    f.name = "calls_itself";
    f.forward = [&](const dt::DTensorList& in) {
      if (reenter == 1) (*self)({x});
      if (reenter == 2) self->graph().run({x});
      return dt::DTensorList{dt::exp(in[0])};
    };
    f.backward = [](const dt::DTensorList& in, const dt::DTensorList& g) {
      return dt::DTensorList{dt::mul(g[0], dt::exp(in[0]))};
    };
    dt::CompileOptions options;
    options.schedule_collectives = scheduled;
    dt::CompiledStep step = dt::compile(
        [&](const dt::DTensorList& in) {
          // A move before the eager node and one after it (collectives at 2 and 4 ranks).
          const dt::DTensor y = dt::mul(in[0], in[0]).redistribute(mesh, {dt::Replicate()});
          const dt::DTensor z = dt::compiler::call_eager(f, {y})[0];
          return dt::DTensorList{dt::sum(dt::add(z, y.redistribute(mesh, {dt::Shard(1)})))};
        },
        options);
    self = &step;
    const double want = scalar(step({x})[0]);  // captured
    CHECK(scalar(step({x})[0]) == want);       // replayed
    const int64_t kept = step.graph().kept_bytes();
    // Every rank raises at the eager node (it runs there on every rank): no rank is left in a
    // collective the others skipped. Before, a graph replayed from its own replay waited for
    // its own pool forever.
    reenter = 1;
    REQUIRE_THROWS_WITH(step({x}),
                        Catch::Contains("[compile] the compiled step was called from inside its "
                                        "own capture or replay") &&
                            Catch::Contains("uncompiled"));
    reenter = 2;
    REQUIRE_THROWS_WITH(step({x}), Catch::Contains("[compile] Graph::run: the graph was replayed "
                                                   "from inside its own replay"));
    // The refused calls leave the step whole: it replays as before, its pool usable.
    reenter = 0;
    CHECK(scalar(step({x})[0]) == want);
    CHECK(scalar(step({x})[0]) == want);
    CHECK(step.graph().kept_bytes() == kept);
    CHECK(step.captures() == 1);
  }
  // A step calling itself while it is captured (it recursed without end before).
  dt::CompiledStep* self = nullptr;
  dt::CompiledStep recursive =
      dt::compile([&](const dt::DTensorList& in) { return (*self)({dt::mul(in[0], in[0])}); });
  self = &recursive;
  REQUIRE_THROWS_WITH(recursive({x}), Catch::Contains("called from inside its own capture"));
  CHECK(scalar(dt::sum(x)) == 4.0);  // eager work runs as before
}

TEST_CASE("what cannot be captured is refused on every rank", "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::DTensor x = dt::distribute_tensor(dt::ones({4, 4}), mesh, {dt::Shard(0)});
  dt::CompiledStep random = dt::compile([&](const dt::DTensorList& in) {
    return dt::DTensorList{dt::add(in[0], dt::rand_like(in[0]))};
  });
  REQUIRE_THROWS_WITH(random({x}), Catch::Contains("[compile] the step cannot be captured") &&
                                       Catch::Contains("random op"));
  dt::CompiledStep nothing =
      dt::compile([&](const dt::DTensorList& in) { return dt::DTensorList{in[0]}; });
  REQUIRE_THROWS_WITH(nothing({x}), Catch::Contains("ran no DTensor op"));
  // Local Tensor computation inside the step: replay could not redo it, so it is refused rather
  // than baked in as a constant.
  dt::CompiledStep local = dt::compile([&](const dt::DTensorList& in) {
    const dt::Tensor doubled = dt::add(in[0].to_local(), in[0].to_local());
    return dt::DTensorList{dt::sum(dt::DTensor::from_local(doubled, mesh, {dt::Shard(0)}))};
  });
  REQUIRE_THROWS_WITH(local({x}), Catch::Contains("local Tensor computation outside DTensor ops"));
  // The recorder is gone after a refusal: eager work runs as before.
  CHECK(scalar(dt::sum(x)) == 16.0);
}

TEST_CASE("dedup: a value moved twice the same way is moved once", "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t W = dt::world_size();
  // A Partial input consumed by two ops that each need it Replicate: eagerly, two all-reduces.
  dt::Generator g(9);
  const dt::Tensor part = dt::randn({3, 5}, {}, &g);
  const dt::DTensor p = dt::DTensor::from_local(part, mesh, {dt::Partial()});
  auto fn = [](const dt::DTensorList& in) {
    return dt::DTensorList{dt::add(dt::exp(in[0]), dt::sin(in[0]))};
  };
  int64_t eager_moves = 0;
  dt::DTensor eager_out;
  {
    dt::CommDebugMode comm;
    eager_out = fn({p})[0];
    eager_moves = comm.total_count();
  }
  const dt::Tensor want = eager_out.full_tensor();

  for (const bool dedup : {true, false}) {
    INFO("dedup " << dedup);
    dt::CompileOptions options;
    options.dedup_collectives = dedup;
    dt::CompiledStep step = dt::compile(fn, options);
    step({p});
    INFO(step.graph().str());
    CHECK(step.graph().stats().deduplicated == (dedup && W > 1 ? 1 : 0));
    dt::DTensor out;
    int64_t moves = 0;
    {
      dt::CommDebugMode comm;
      out = step({p})[0];
      moves = comm.total_count();
    }
    const dt::Tensor got = out.full_tensor();
    CHECK(dt::test::max_diff(got, want) == 0.0);
    if (W > 1) {
      // Each consumer reduces the Partial value (all-reduce or reduce-scatter) on its own.
      CHECK(eager_moves == 2);
      CHECK(moves == (dedup ? 1 : 2));
      CHECK(step.graph().stats().collectives == moves);
    }
  }
}

TEST_CASE("a move undone by the next is removed", "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t W = dt::world_size();
  dt::Generator g(21);
  const dt::DTensor x =
      dt::distribute_tensor(dt::randn({4 * W + 1, 3}, {}, &g), mesh, {dt::Shard(0)});
  // Gathered, then cut again as it was: the second move gives x back.
  auto fn = [](const dt::DTensorList& in) {
    const dt::DTensor whole = in[0].redistribute({dt::Replicate()});
    return dt::DTensorList{dt::mul(whole.redistribute({dt::Shard(0)}), dt::Scalar(2.0))};
  };
  const dt::Tensor want = fn({x})[0].full_tensor();
  for (const bool pass : {true, false}) {
    INFO("pass " << pass);
    dt::CompileOptions options;
    options.remove_redundant_moves = pass;
    dt::CompiledStep step = dt::compile(fn, options);
    step({x});
    INFO(step.graph().str());
    CHECK(step.graph().stats().redundant_moves == (pass ? 2 : 0));
    dt::DTensor out;
    int64_t moves = 0;
    {
      dt::CommDebugMode comm;
      out = step({x})[0];
      moves = comm.total_count();
    }
    CHECK(dt::test::max_diff(out.full_tensor(), want) == 0.0);
    if (W > 1) CHECK(moves == (pass ? 0 : 1));
  }
  // A Partial source is not restored by R -> P: that pair stays.
  const dt::DTensor p = dt::DTensor::from_local(dt::randn({3, 2}, {}, &g), mesh, {dt::Partial()});
  dt::CompiledStep keep = dt::compile([](const dt::DTensorList& in) {
    const dt::DTensor whole = in[0].redistribute({dt::Replicate()});
    return dt::DTensorList{whole.redistribute({dt::Partial()})};
  });
  keep({p});
  CHECK(keep.graph().stats().redundant_moves == 0);
}

TEST_CASE("memory plan: replay frees values at their last use", "[compile]") {
  const bool schedule = GENERATE(false, true);
  INFO("schedule_collectives " << schedule);
  const nn::TransformerConfig cfg = small_config();
  Trainer eager(cfg, "AdamW"), compiled(cfg, "AdamW"), unplanned(cfg, "AdamW");
  dt::CompileOptions options;
  options.schedule_collectives = schedule;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); }, options);
  dt::CompileOptions keep;
  keep.memory_plan = false;
  keep.schedule_collectives = schedule;
  dt::CompiledStep step_unplanned =
      dt::compile([&](const dt::DTensorList& batch) { return unplanned.step(batch); }, keep);
  const auto all_steps = [&](int i) {
    const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, i);
    eager.step(batch);
    step(batch);
    step_unplanned(batch);
  };
  for (int i = 0; i < 4; ++i) all_steps(i);  // a capture, two recorded replays, a planned one
  const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 4);
  // The most bytes held by tensors during f beyond those held before it. The storages a graph
  // keeps between replays count as cached, as the allocator's own cache does (PyTorch's
  // memory_allocated vs memory_reserved); taken back by a replay they count as held again.
  const auto peak_of = [](const std::function<void()>& f) {
    dt::reset_peak_memory_stats();
    const int64_t before = dt::memory_stats().current_bytes;
    f();
    return dt::memory_stats().peak_bytes - before;
  };
  const int64_t eager_peak = peak_of([&] { eager.step(batch); });
  const int64_t cached_before = dt::memory_stats().cached_bytes;
  const int64_t kept_before = step.graph().kept_bytes();
  const int64_t held_before = dt::memory_stats().current_bytes;
  const int64_t replay_peak = peak_of([&] { step(batch); });
  // What the compiled step holds beyond its resting state (the eager step's: the same model,
  // gradients and optimizer state) after a replay: the bytes the replay left held, plus the
  // storages kept for the next replay.
  const int64_t kept = step.graph().kept_bytes();
  const int64_t held_and_kept = dt::memory_stats().current_bytes - held_before + kept;
  const int64_t unplanned_peak = peak_of([&] { step_unplanned(batch); });
  INFO("peak bytes: eager " << eager_peak << ", replay " << replay_peak << " (" << kept
                            << " kept after it, " << kept_before << " before), replay without "
                            << "plan " << unplanned_peak << "; held and kept after the replay "
                            << held_and_kept << "; arena " << step.graph().arena_bytes()
                            << ", planned live peak " << step.graph().planned_live_peak());
  // The plan keeps storages from replay to replay (counted as cached); without it none.
  CHECK(kept > 0);
  CHECK(cached_before >= kept_before);
  CHECK(kept == kept_before);  // each replay needs what the last one did
  CHECK(step_unplanned.graph().kept_bytes() == 0);
  CHECK(replay_peak < unplanned_peak);
  CHECK(held_and_kept <= kept_before);
  // The static offset plan: one arena of the most bytes the replay has alive at once (the
  // gradients, carried from replay to replay, included): the packing reaches that bound here
  // (its fixed orders lost 576 B of 56,896 at 4 ranks; the local search closes it). What the
  // arena takes beside what the step holds anyway (cached between replays but for the gradients
  // in it), with what the allocator holds beside it, stays within the eager step's peak, also
  // with scheduled moves: the communication thread's allocations have arena slots too, each
  // alive from its move's issue to its wait (or its free on the replaying thread). Unplanned,
  // they took 23,232 B at 4 ranks against the eager 21,376 (2,304 B beside the arena).
  // Exact-size reuse kept 1.48x / 1.92x / 3.33x the eager peak here.
  const int64_t arena = step.graph().arena_bytes(), live = step.graph().planned_live_peak();
  CHECK(step.graph().plan_deviations() == 0);
  CHECK(arena == live);
  CHECK(held_and_kept <= eager_peak);
  CHECK(replay_peak <= eager_peak);
  const dt::compiler::GraphStats& s = step.graph().stats();
  CHECK(s.peak_bytes_planned < s.peak_bytes_unplanned);
  require_same_parameters(compiled.model, eager.model);
  require_same_parameters(unplanned.model, eager.model);
  // empty_cpu_cache() releases the kept storages (with the allocator's own cache); the next
  // replay allocates afresh and keeps again, still bit for bit the eager step.
  dt::empty_cpu_cache();
  CHECK(step.graph().kept_bytes() == 0);
  CHECK(dt::memory_stats().cached_bytes == 0);
  all_steps(5);
  CHECK(step.graph().kept_bytes() == kept);
  require_same_parameters(compiled.model, eager.model);
}

TEST_CASE("memory plan: a replay keeps no storage no replay takes", "[compile]") {
  // Scheduled moves run on the communication thread, whose allocations never take kept storages:
  // their results, given back on the replaying thread, would pile up from replay to replay.
  const nn::TransformerConfig cfg = small_config();
  Trainer eager(cfg, "AdamW"), compiled(cfg, "AdamW");
  dt::CompileOptions options;
  options.schedule_collectives = true;
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); }, options);
  std::vector<int64_t> kept;
  for (int i = 0; i < 6; ++i) {
    const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, i);
    const double want = scalar(eager.step(batch)[0]);
    CHECK(scalar(step(batch)[0]) == want);
    kept.push_back(step.graph().kept_bytes());
  }
  INFO("kept after each call: " << kept[0] << " " << kept[1] << " " << kept[2] << " " << kept[3]
                                << " " << kept[4] << " " << kept[5]);
  CHECK(kept[1] == 0);  // the first two replays record the plan
  CHECK(kept[3] > 0);
  CHECK(kept[5] == kept[3]);
  require_same_parameters(compiled.model, eager.model);
}

TEST_CASE("memory plan: a scheduled move's planned memory and a replay that deviates",
          "[compile]") {
  // The move's task allocates on the communication thread, in arena slots of its own; a replay
  // whose eager node allocates a size the plan does not have deviates there (the move landed
  // before it: the node calls user code), stays bit-equal, and the plan is recorded again.
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::TensorOptions f64(dt::kFloat64);
  const dt::DTensor x =
      dt::distribute_tensor(dt::full({8 * dt::world_size(), 16}, 0.5, f64), mesh, {dt::Shard(0)});
  bool extra = false;
  dt::compiler::EagerFunction f;
  f.name = "varies";
  f.forward = [&](const dt::DTensorList& in) {
    if (extra) CHECK(dt::sum(dt::ones({37}, f64)).item<double>() == 37.0);
    return dt::DTensorList{dt::exp(in[0])};
  };
  f.backward = [](const dt::DTensorList& in, const dt::DTensorList& g) {
    return dt::DTensorList{dt::mul(g[0], dt::exp(in[0]))};
  };
  dt::CompileOptions options;
  options.schedule_collectives = true;
  dt::CompiledStep step = dt::compile(
      [&](const dt::DTensorList& in) {
        const dt::DTensor a = dt::mul(in[0], in[0]);
        const dt::DTensor whole = a.redistribute({dt::Replicate()});  // a scheduled all-gather
        const dt::DTensor b = dt::compiler::call_eager(f, {dt::mul(in[0], 2.0)})[0];
        const dt::DTensor c = dt::add(whole, whole);
        return dt::DTensorList{dt::sum(c), dt::sum(b)};
      },
      options);
  const auto run = [&] {
    const dt::DTensorList out = step({x});
    return std::make_pair(out[0].full_tensor().item<double>(), out[1].full_tensor().item<double>());
  };
  const auto want = run();  // captured
  CHECK(want.first == 0.5 * 8 * dt::world_size() * 16);
  for (int i = 0; i < 4; ++i) CHECK(run() == want);  // recorded, then planned
  REQUIRE(step.graph().arena_bytes() > 0);
  CHECK(step.graph().arena_bytes() == step.graph().planned_live_peak());
  CHECK(step.graph().plan_deviations() == 0);
  if (dt::world_size() > 1) CHECK(step.graph().stats().collectives > 0);
  extra = true;
  CHECK(run() == want);
  CHECK(step.graph().plan_deviations() == 1);
  extra = false;
  for (int i = 0; i < 4; ++i) CHECK(run() == want);  // recorded again, then planned
  CHECK(step.graph().plan_deviations() == 1);
  CHECK(step.graph().arena_bytes() > 0);
}

TEST_CASE("memory plan: a replay that deviates from its plan never overlaps live memory",
          "[compile]") {
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::TensorOptions f64(dt::kFloat64);
  const dt::DTensor x =
      dt::distribute_tensor(dt::full({8 * dt::world_size(), 16}, 0.5, f64), mesh, {dt::Shard(0)});
  // 0: the eager node computes; 1: it also allocates a size the plan does not have; 2: it keeps
  // its input (memory the plan gives to a later value of the replay) past its last use.
  int mode = 0;
  dt::Tensor stashed;
  dt::compiler::EagerFunction f;
  f.name = "varies";
  f.forward = [&](const dt::DTensorList& in) {
    if (mode == 1) CHECK(dt::sum(dt::ones({37}, f64)).item<double>() == 37.0);
    if (mode == 2) stashed = in[0].to_local();
    return dt::DTensorList{dt::exp(in[0])};
  };
  f.backward = [](const dt::DTensorList& in, const dt::DTensorList& g) {
    return dt::DTensorList{dt::mul(g[0], dt::exp(in[0]))};
  };
  // Values of one size: the plan puts c where a was (a dies at the eager node).
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& in) {
    const dt::DTensor a = dt::mul(in[0], in[0]);
    const dt::DTensor b = dt::compiler::call_eager(f, {a})[0];
    const dt::DTensor c = dt::add(b, b);
    const dt::DTensor d = dt::mul(c, dt::Scalar(3.0));
    return dt::DTensorList{dt::sum(dt::sub(d, b))};
  });
  const double want = scalar(step({x})[0]);  // captured
  CHECK(want == Approx(5.0 * std::exp(0.25) * 8 * dt::world_size() * 16));
  for (int i = 0; i < 4; ++i) CHECK(scalar(step({x})[0]) == want);  // recorded, then planned
  REQUIRE(step.graph().arena_bytes() > 0);
  CHECK(step.graph().arena_bytes() == step.graph().planned_live_peak());
  CHECK(step.graph().plan_deviations() == 0);
  // One replay in `m`, bit-equal and counted as the deviation number `deviations`, then `after`
  // replays as planned (recorded again, then followed).
  const auto deviate = [&](int m, int deviations, int after) {
    mode = m;
    CHECK(scalar(step({x})[0]) == want);
    CHECK(step.graph().plan_deviations() == deviations);
    mode = 0;
    for (int i = 0; i < after; ++i) CHECK(scalar(step({x})[0]) == want);
    CHECK(step.graph().plan_deviations() == deviations);
  };
  // Another allocation size: the rest of that replay is the allocator's; two replays record the
  // plan again, and the replays after them follow it.
  deviate(1, 1, 4);
  CHECK(step.graph().arena_bytes() > 0);
  // A value kept past its last use: c does not take its memory (the replay deviates there), and
  // the next replays run on a new arena while the old one's value is alive. It is never
  // overwritten.
  deviate(2, 2, 0);
  REQUIRE(stashed.defined());
  for (int i = 0; i < 4; ++i) {
    CHECK(scalar(step({x})[0]) == want);
    CHECK(dt::test::max_diff(stashed, dt::full(stashed.sizes(), 0.25, f64)) == 0.0);
  }
  stashed = dt::Tensor();
  CHECK(scalar(step({x})[0]) == want);
  CHECK(step.graph().plan_deviations() == 2);
  // A third deviating plan: the graph gives planning up and reuses storages of exact sizes.
  deviate(1, 3, 3);
  CHECK(step.graph().arena_bytes() == 0);
  CHECK(step.graph().kept_bytes() > 0);
}

TEST_CASE(
    "memory plan: a graph's kept storages go with it, and with empty_cpu_cache() called "
    "on another thread during replays",
    "[compile]") {
  const nn::TransformerConfig cfg = small_config();
  Trainer eager(cfg, "AdamW"), compiled(cfg, "AdamW");
  {
    dt::CompiledStep step =
        dt::compile([&](const dt::DTensorList& batch) { return compiled.step(batch); });
    // Another thread empties the caches again and again: a pool replaying is released when its
    // replay ends, never under it.
    std::atomic<bool> stop{false};
    std::thread releaser([&] {
      while (!stop.load()) {
        dt::empty_cpu_cache();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    for (int i = 0; i < 12; ++i) {
      const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, i);
      const double want = scalar(eager.step(batch)[0]);
      CHECK(scalar(step(batch)[0]) == want);
    }
    stop.store(true);
    releaser.join();
    require_same_parameters(compiled.model, eager.model);
    step(make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 12));
    eager.step(make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 12));
    const int64_t kept = step.graph().kept_bytes();
    REQUIRE(kept > 0);
    const int64_t cached = dt::memory_stats().cached_bytes;
    REQUIRE(cached >= kept);
    dt::empty_cpu_cache();  // the allocator's own cache too, so that what remains is the graph's
    CHECK(dt::memory_stats().cached_bytes == 0);
    step(make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 13));
    eager.step(make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 13));
    REQUIRE(step.graph().kept_bytes() == kept);
  }
  // The step (its graph) destroyed: nothing of it is kept (its storages are below the
  // allocator's large-block size, so none went to the allocator's cache either).
  CHECK(dt::memory_stats().cached_bytes == 0);
  require_same_parameters(compiled.model, eager.model);
}

TEST_CASE("memory plan: a graph replaced by a re-capture frees its kept storages first",
          "[compile]") {
  // A host scalar's new value, or validate_every, re-captures the layout's graph: the capture
  // runs the step eagerly, and the replaced graph's kept storages are freed before it.
  const nn::TransformerConfig cfg = small_config();
  for (const bool by_scalar : {true, false}) {
    INFO((by_scalar ? "a new host scalar" : "validate_every"));
    Trainer eager(cfg, "AdamW"), compiled(cfg, "AdamW");
    // What is cached (graphs' kept storages, the allocator's cache) when the step function
    // starts: it runs only while the step is captured.
    int64_t cached_at_capture = -1;
    dt::CompileOptions options;
    options.validate_every = by_scalar ? 0 : 4;
    dt::CompiledScalarStep step = dt::compile(
        [&](const dt::DTensorList& batch, const std::vector<double>& s) {
          cached_at_capture = dt::memory_stats().cached_bytes;
          return dt::DTensorList{dt::mul(compiled.step(batch)[0], s[0])};
        },
        options);
    for (int i = 0; i < 4; ++i) {  // a capture, then replays
      const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, i);
      const double want = scalar(eager.step(batch)[0]);
      CHECK(scalar(step(batch, {1.0})[0]) == want);
    }
    REQUIRE(step.captures() == 1);
    const int64_t kept = step.graph().kept_bytes();
    const int64_t cached = dt::memory_stats().cached_bytes;
    REQUIRE(kept > 0);
    REQUIRE(cached >= kept);
    const dt::DTensorList batch = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 4);
    const double want = scalar(eager.step(batch)[0]);
    const double factor = by_scalar ? 2.0 : 1.0;
    CHECK(scalar(step(batch, {factor})[0]) == factor * want);
    CHECK(step.captures() == 2);
    INFO("cached before the call " << cached << " (" << kept << " kept by the graph), at the "
                                   << "capture's start " << cached_at_capture);
    CHECK(cached_at_capture <= cached - kept);
    // The new graph replays as before.
    const dt::DTensorList next = make_batch(eager.mesh, cfg.vocab_size, cfg.max_seq_len, 5);
    const double next_want = scalar(eager.step(next)[0]);
    CHECK(scalar(step(next, {factor})[0]) == factor * next_want);
    require_same_parameters(compiled.model, eager.model);
  }
}

TEST_CASE("a replay whose optimizer was destroyed raises instead of touching it", "[compile]") {
  const nn::TransformerConfig cfg = small_config();
  Trainer t(cfg, "AdamW");
  dt::CompiledStep step = dt::compile([&](const dt::DTensorList& b) { return t.step(b); });
  step(make_batch(t.mesh, cfg.vocab_size, cfg.max_seq_len, 0));  // captured
  step(make_batch(t.mesh, cfg.vocab_size, cfg.max_seq_len, 1));  // replayed
  t.opt.reset();
  REQUIRE_THROWS_WITH(step(make_batch(t.mesh, cfg.vocab_size, cfg.max_seq_len, 2)),
                      Catch::Contains("[compile] the step's graph replays an optimizer's step "
                                      "count, which was destroyed"));
}

TEST_CASE("a runtime scalar passed as a 0-dim DTensor input follows each call", "[compile]") {
  // A loss scale that changes between steps (as a GradScaler's): a graph input, not a constant.
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::DTensor x = dt::distribute_tensor(dt::arange(0, 12).reshape({3, 4}).to(dt::kFloat64),
                                              mesh, {dt::Shard(0)});
  auto fn = [](const dt::DTensorList& in) {
    return dt::DTensorList{dt::sum(dt::div(dt::mul(in[0], in[0]), in[1])), dt::div(in[0], in[1])};
  };
  dt::CompiledStep step = dt::compile(fn);
  for (double scale : {1.0, 2.0, 8.0, 0.5, 3.0}) {
    INFO("scale " << scale);
    const dt::DTensor s = dt::DTensor::from_local(
        dt::full({}, scale, dt::TensorOptions(dt::kFloat64)), mesh, {dt::Replicate()});
    const dt::DTensorList got = step({x, s}), want = fn({x, s});
    CHECK(scalar(got[0]) == scalar(want[0]));
    // The sharded quotient itself, shard by shard (x's 3 rows are uneven over 2 and 4 ranks).
    CHECK(got[1].placements()[0] == dt::Shard(0));
    CHECK(dt::test::max_diff(got[1].to_local(), want[1].to_local()) == 0.0);
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 4);
}

TEST_CASE("host scalars are guarded on their values: another value re-captures, never stale",
          "[compile]") {
  // torch.compile specialises a Python float and guards on it; so does the scalar form of a step.
  const dt::DeviceMesh mesh = tp_mesh();
  const dt::DTensor x = dt::distribute_tensor(dt::arange(0, 12).reshape({3, 4}).to(dt::kFloat64),
                                              mesh, {dt::Shard(0)});
  auto fn = [](const dt::DTensorList& in, const std::vector<double>& s) {
    return dt::DTensorList{dt::div(dt::mul(in[0], s[0]), s[1])};
  };
  dt::CompileOptions options;
  options.max_graphs = 2;  // a value changing every call replaces its graph: never exhausted
  dt::CompiledScalarStep step = dt::compile(fn, options);
  const std::vector<std::vector<double>> calls = {{2, 3}, {2, 3},   {4, 3},  {4, 3}, {4, 5},
                                                  {1, 1}, {0.5, 7}, {-1, 3}, {8, 2}};
  for (const std::vector<double>& s : calls) {
    INFO("scalars " << s[0] << ", " << s[1]);
    const dt::DTensor got = step({x}, s)[0];
    CHECK(dt::test::max_diff(got.to_local(), fn({x}, s)[0].to_local()) == 0.0);
  }
  CHECK(step.captures() == 7);
  CHECK(step.scalar_recaptures() == 6);
  CHECK(step.replays() == 2);

  dt::CompileOptions strict;
  strict.recapture_on_guard_failure = false;
  dt::CompiledScalarStep fixed = dt::compile(fn, strict);
  fixed({x}, {2, 3});
  fixed({x}, {2, 3});
  REQUIRE_THROWS_WITH(fixed({x}, {2, 4}), Catch::Contains("[compile] the step's host scalars") &&
                                              Catch::Contains("scalar 1 was 3 at the capture"));
  // Another number of scalars is another layout.
  REQUIRE_THROWS_WITH(fixed({x}, {2, 3, 1}), Catch::Contains("number of scalars"));
}

TEST_CASE("backward formulas' fresh tensors (zeros_like, full_like) are replayed", "[compile]") {
  // vector_norm's, std's and sign's backward formulas make zeros (where(eq(...), zeros_like(d),
  // d); a zero gradient), clamp's and where's mask the gradient; ones_like in the step itself.
  // Made by recorded primitives, they replay; AdamW's lazily made moments (zeros_like as well)
  // stay the graph's own state. Before, the capture refused the step ("local Tensor computation
  // outside DTensor ops").
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t W = dt::world_size();
  auto make_w = [&] {
    dt::Generator g(5);
    dt::DTensor w = dt::distribute_tensor(dt::randn({4, 6}, dt::TensorOptions(dt::kFloat64), &g),
                                          mesh, {dt::Replicate()});
    w.requires_grad_(true);
    return w;
  };
  dt::DTensor w_e = make_w(), w_c = make_w();
  dt::optim::AdamW opt_e({w_e}, dt::optim::AdamWOptions(1e-2));
  dt::optim::AdamW opt_c({w_c}, dt::optim::AdamWOptions(1e-2));
  auto train = [&](dt::DTensor& w, dt::optim::Optimizer& opt, const dt::DTensorList& in) {
    opt.zero_grad();
    const dt::DTensor xw = dt::mul(in[0], w);  // [4 W, 4, 6], batch-sharded
    dt::DTensor loss = dt::sum(dt::vector_norm(xw, 2.0, {-1}));
    loss = dt::add(loss, dt::sum(dt::std(dt::clamp(xw, -0.5, 0.5), {-1})));
    loss = dt::add(loss, dt::sum(dt::where(dt::gt(in[0], 0.0), xw, dt::mul(dt::sign(xw), w))));
    loss = dt::add(loss, dt::sum(dt::mul(dt::ones_like(w), w)));
    loss.backward();
    opt.step();
    return dt::DTensorList{loss.detach()};
  };
  dt::CompiledStep step =
      dt::compile([&](const dt::DTensorList& in) { return train(w_c, opt_c, in); });
  for (int i = 0; i < 4; ++i) {
    dt::Generator g(300 + i);
    dt::Tensor x = dt::randn({4 * W, 4, 6}, dt::TensorOptions(dt::kFloat64), &g);
    x.narrow(0, 0, 1).zero_();  // whole zero rows: norm 0 and std 0, where the zeros are taken
    const dt::DTensorList in = {dt::distribute_tensor(x, mesh, {dt::Shard(0)})};
    INFO("step " << i);
    CHECK(scalar(step(in)[0]) == scalar(train(w_e, opt_e, in)[0]));
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 3);
  REQUIRE(dt::test::max_diff(w_c.to_local(), w_e.to_local()) == 0.0);
  // vector_norm's, std's and sign's zeros are nodes; AdamW's two moments are not (state the
  // graph keeps: a node would zero them every step, which the parameters' equality also rules
  // out).
  int64_t remade = 0;
  for (const auto& n : step.graph().nodes()) remade += n.name == "zeros_like" ? 1 : 0;
  CHECK(remade == 3);
  CHECK(step.graph().str().find("ones") != std::string::npos);
}

TEST_CASE("attention with a floating mask that requires grad replays, causal and not",
          "[compile]") {
  // The mask's gradient takes the composite backward (the fused kernel has no ds); under
  // is_causal it hides keys with a [L, S] tensor made in the backward: by a recorded primitive,
  // so the capture takes it (before, it refused the step: "local Tensor computation outside
  // DTensor ops"). A mask not requiring grad keeps the fused backward op (a node of the graph).
  // Heads sharded over the ranks, the mask whole; SGD on the query weight (and the mask).
  // With the default buckets (the two gradients' all-reduces fused into one): bit for bit at 4
  // ranks since floating sums associate in rank order at every message size (before, ~1e-17
  // apart in the last bit).
  const dt::DeviceMesh mesh = tp_mesh();
  const int64_t W = dt::world_size();
  const int64_t B = 2, H = 2 * W, L = 5, S = 5, D = 3;
  struct Variant {
    bool causal, mask_grad;
  };
  for (const Variant var : {Variant{false, true}, Variant{true, true}, Variant{true, false}}) {
    INFO("causal " << var.causal << ", mask requires grad " << var.mask_grad);
    auto make = [&](std::vector<int64_t> shape, uint64_t seed, bool grad) {
      dt::Generator g(seed);
      dt::DTensor p = dt::distribute_tensor(dt::randn(shape, dt::TensorOptions(dt::kFloat64), &g),
                                            mesh, {dt::Replicate()});
      p.requires_grad_(grad);
      return p;
    };
    dt::DTensor wq_e = make({D, D}, 7, true), wq_c = make({D, D}, 7, true);
    dt::DTensor m_e = make({L, S}, 8, var.mask_grad), m_c = make({L, S}, 8, var.mask_grad);
    const auto params = [&](const dt::DTensor& wq, const dt::DTensor& m) {
      return var.mask_grad ? std::vector<dt::DTensor>{wq, m} : std::vector<dt::DTensor>{wq};
    };
    dt::optim::SGD opt_e(params(wq_e, m_e), dt::optim::SGDOptions(5e-2));
    dt::optim::SGD opt_c(params(wq_c, m_c), dt::optim::SGDOptions(5e-2));
    auto train = [&](const dt::DTensor& wq, const dt::DTensor& m, dt::optim::Optimizer& opt,
                     const dt::DTensorList& in) {
      opt.zero_grad();
      const dt::DTensor q = dt::matmul(in[0], wq);
      const dt::DTensor out = dt::scaled_dot_product_attention(q, in[0], in[0], m, 0.0, var.causal);
      const dt::DTensor loss = dt::sum(dt::mul(out, out));
      loss.backward();
      opt.step();
      return dt::DTensorList{loss.detach()};
    };
    dt::CompiledStep step =
        dt::compile([&](const dt::DTensorList& in) { return train(wq_c, m_c, opt_c, in); });
    for (int i = 0; i < 4; ++i) {
      dt::Generator g(400 + i);
      const dt::Tensor x = dt::randn({B, H, L, D}, dt::TensorOptions(dt::kFloat64), &g);
      const dt::DTensorList in = {dt::distribute_tensor(x, mesh, {dt::Shard(1)})};
      INFO("step " << i);
      CHECK(scalar(step(in)[0]) == scalar(train(wq_e, m_e, opt_e, in)[0]));
    }
    CHECK(step.captures() == 1);
    CHECK(step.replays() == 3);
    CHECK(dt::test::max_diff(wq_c.to_local(), wq_e.to_local()) == 0.0);
    CHECK(dt::test::max_diff(m_c.to_local(), m_e.to_local()) == 0.0);
    // The mask moved when it requires grad (its gradient reached the update), else not.
    const double moved = dt::test::max_diff(m_c.to_local(), make({L, S}, 8, false).to_local());
    CHECK((moved > 0.0) == var.mask_grad);
    int64_t fused = 0, hidden = 0;
    for (const auto& n : step.graph().nodes()) {
      fused += n.name == "scaled_dot_product_attention_backward.mask" ? 1 : 0;
      hidden += n.name == "causal_hidden" ? 1 : 0;
    }
    CHECK(fused == (var.mask_grad ? 0 : 1));
    CHECK(hidden == (var.causal && var.mask_grad ? 1 : 0));
  }
}
