// Activation checkpointing on one process (dtensor/nn/activation_checkpoint.h): the gradients of
// inputs and parameters equal the plain run's bit for bit (float32 and float64; a transformer
// block, dropout through the default generator, nested checkpoints, a module used twice,
// several inputs and outputs, parameters with an input that needs no gradient); the activation
// memory kept by forward drops by the predicted bytes; what cannot work is refused; a step with
// a checkpoint, compiled (dtensor::compile), replays equal to the eager step.
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/compile/compile.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/memory_stats.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace st = dtensor::test;
using dt::DTensor;
using dt::Tensor;

namespace {

// The loss sum(y * r) for fixed r, so every output element has its own gradient.
DTensor weighted_sum(const DTensor& y, int salt) {
  const Tensor r = st::det_input(y.shape(), salt, -1.0, 0.25, y.dtype());
  return dt::sum(dt::mul(y, nn::local_dtensor(r)));
}

// What a run produced: the loss, the input's gradient, every parameter's gradient (in
// named_parameters order), and the default generator's offset afterwards.
struct Run {
  Tensor loss, x_grad;
  std::vector<Tensor> grads;
  uint64_t rng_offset = 0;
};

Run run(nn::Module& m, const Tensor& x, const std::function<DTensor(const DTensor&)>& f,
        bool x_requires_grad = true) {
  m.zero_grad();
  dt::manual_seed(1234);
  DTensor xd = nn::local_dtensor(x.clone());
  if (x_requires_grad) xd.requires_grad_();
  const DTensor loss = weighted_sum(f(xd), 3);
  loss.backward();
  Run r;
  r.loss = loss.to_local().clone();
  if (x_requires_grad) r.x_grad = xd.grad().to_local().clone();
  for (const auto& [name, p] : m.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    r.grads.push_back(p.grad().to_local().clone());
  }
  r.rng_offset = dt::default_generator().offset();
  return r;
}

// Bit for bit (tolerance 0), the input's gradient within x_tol.
void check_equal(const Run& got, const Run& want, double x_tol = 0.0) {
  CHECK(st::same_values(got.loss, want.loss, 0.0));
  CHECK(got.x_grad.defined() == want.x_grad.defined());
  if (want.x_grad.defined()) CHECK(st::same_values(got.x_grad, want.x_grad, x_tol));
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    INFO("parameter " << i);
    CHECK(st::same_values(got.grads[i], want.grads[i], 0.0));
  }
  CHECK(got.rng_offset == want.rng_offset);
}

nn::TransformerConfig block_config() {
  nn::TransformerConfig cfg;
  cfg.dim = 16;
  cfg.n_heads = 2;
  cfg.hidden_dim = 24;
  cfg.n_layers = 3;
  cfg.vocab_size = 32;
  return cfg;
}

// tanh(fc(x)) with dropout: a forward that draws from the default generator.
class DropoutMLP : public nn::Module {
 public:
  DropoutMLP(int64_t dim, double p, nn::ModuleOptions opts) : p_(p) {
    fc_ = std::static_pointer_cast<nn::Linear>(
        register_module("fc", std::make_shared<nn::Linear>(dim, dim, true, opts)));
  }
  std::string type_name() const override { return "DropoutMLP"; }
  DTensor forward(const DTensor& x) override {
    return dt::add(x, dt::dropout(dt::tanh((*fc_)(x)), p_));
  }

 private:
  double p_;
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace

TEMPLATE_TEST_CASE("checkpoint_wrapper: a transformer block's gradients equal the plain run",
                   "[checkpoint]", float, double) {
  const dt::DType dtype = std::is_same_v<TestType, float> ? dt::kFloat32 : dt::kFloat64;
  nn::ModuleOptions opts;
  opts.dtype = dtype;
  dt::manual_seed(7);
  nn::TransformerBlock block(block_config(), opts);
  const Tensor x = st::det_input({2, 5, 16}, 1, -1.0, 0.2, dtype);
  auto call = [&](const DTensor& in) { return block(in); };
  const Run plain = run(block, x, call);
  REQUIRE_FALSE(nn::is_checkpoint_wrapped(block));
  nn::checkpoint_wrapper(block);
  REQUIRE(nn::is_checkpoint_wrapped(block));
  SECTION("per block") {
    check_equal(run(block, x, call), plain);
  }
  SECTION("nested: the block and its MLP") {
    nn::checkpoint_wrapper(block.get_submodule("mlp"));
    check_equal(run(block, x, call), plain);
  }
  SECTION("the input needs no gradient: the parameters still get theirs") {
    nn::remove_checkpoint_wrapper(block);
    const Run want = run(block, x, call, false);
    nn::checkpoint_wrapper(block);
    check_equal(run(block, x, call, false), want);
  }
  SECTION("a module used twice") {
    auto twice = [&](const DTensor& in) { return block(block(in)); };
    nn::remove_checkpoint_wrapper(block);
    const Run want = run(block, x, twice);
    nn::checkpoint_wrapper(block);
    check_equal(run(block, x, twice), want);
  }
  SECTION("the graph kept with retain_graph recomputes again") {
    block.zero_grad();
    DTensor xd = nn::local_dtensor(x.clone());
    xd.requires_grad_();
    const DTensor loss = weighted_sum(block(xd), 3);
    loss.backward(DTensor(), true);
    loss.backward();
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      const Tensor twice = dt::mul(nn::local_dtensor(plain.grads[i]), 2.0).to_local();
      CHECK(st::same_values(block.parameters()[i].grad().to_local(), twice, 0.0));
    }
  }
}

TEST_CASE("checkpoint: dropout in the recompute draws the forward's mask", "[checkpoint]") {
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  dt::manual_seed(11);
  DropoutMLP mlp(12, 0.4, opts);
  const Tensor x = st::det_input({6, 12}, 2, -1.0, 0.2, dt::kFloat64);
  auto call = [&](const DTensor& in) { return mlp(in); };
  const Run plain = run(mlp, x, call);
  nn::checkpoint_wrapper(mlp);
  // Equal gradients, and the generator ends where the plain run left it (the recompute's draws
  // are undone).
  check_equal(run(mlp, x, call), plain);

  // Without restoring the generator the recompute draws another mask: the gradients differ
  // (what the restore protects against).
  nn::remove_checkpoint_wrapper(mlp);
  nn::CheckpointOptions no_rng;
  no_rng.module = &mlp;
  no_rng.preserve_rng_state = false;
  const Run other = run(mlp, x, [&](const DTensor& in) {
    return nn::checkpoint([&](const DTensor& v) { return mlp.forward(v); }, in, no_rng);
  });
  CHECK(st::same_values(other.loss, plain.loss, 0.0));  // the forward itself is the same
  CHECK_FALSE(st::same_values(other.x_grad, plain.x_grad, 0.0));
}

TEST_CASE("checkpoint: several inputs and outputs, an output without gradient", "[checkpoint]") {
  const Tensor a = st::det_input({4, 3}, 1, -1.0, 0.3, dt::kFloat64);
  const Tensor b = st::det_input({3, 5}, 2, -1.0, 0.2, dt::kFloat64);
  const Tensor c = st::det_input({4, 5}, 3, -1.0, 0.1, dt::kFloat64);
  // fn(a, b, c) = (tanh(a b) * c, a b + c, a): the second output is unused by the loss, the
  // third is an input returned as it is; c needs no gradient.
  auto fn = [](absl::Span<const DTensor> in) {
    const DTensor ab = dt::matmul(in[0], in[1]);
    return dt::DTensorList{dt::mul(dt::tanh(ab), in[2]), dt::add(ab, in[2]), in[0]};
  };
  auto grads = [&](bool use_checkpoint) {
    DTensor da = nn::local_dtensor(a.clone()), db = nn::local_dtensor(b.clone());
    da.requires_grad_();
    db.requires_grad_();
    const DTensor dc = nn::local_dtensor(c);
    const DTensor in[] = {da, db, dc};
    const dt::DTensorList out = use_checkpoint ? nn::checkpoint(fn, in) : fn(in);
    REQUIRE(out.size() == 3);
    CHECK(out[0].requires_grad());
    dt::add(weighted_sum(out[0], 1), weighted_sum(out[2], 2)).backward();
    return std::vector<Tensor>{da.grad().to_local().clone(), db.grad().to_local().clone()};
  };
  const std::vector<Tensor> want = grads(false), got = grads(true);
  CHECK(st::same_values(got[0], want[0], 0.0));
  CHECK(st::same_values(got[1], want[1], 0.0));
}

TEST_CASE("checkpoint: grad mode off, or nothing requiring grad, is the plain call",
          "[checkpoint]") {
  nn::Linear lin(4, 4, true, {});
  nn::checkpoint_wrapper(lin);
  const Tensor x = st::det_input({2, 4}, 1);
  {
    dt::autograd::NoGradGuard no_grad;
    CHECK_FALSE(lin(nn::local_dtensor(x)).requires_grad());
  }
  const DTensor in[] = {nn::local_dtensor(x)};
  const dt::DTensorList out = nn::checkpoint(
      [](absl::Span<const DTensor> v) { return dt::DTensorList{dt::tanh(v[0])}; }, in);
  CHECK_FALSE(out[0].requires_grad());
}

TEST_CASE("apply_activation_checkpointing: per layer, every k-th, by predicate", "[checkpoint]") {
  nn::TransformerConfig cfg = block_config();
  cfg.n_layers = 4;
  {
    nn::Transformer model(cfg, {});
    CHECK(nn::apply_activation_checkpointing(model, "layers") ==
          std::vector<std::string>{"layers.0", "layers.1", "layers.2", "layers.3"});
  }
  {
    nn::Transformer model(cfg, {});
    // torchtitan's ac_freq 2: the 2nd and 4th layers.
    CHECK(nn::apply_activation_checkpointing(model, "layers", 2) ==
          std::vector<std::string>{"layers.1", "layers.3"});
    CHECK(nn::is_checkpoint_wrapped(model.get_submodule("layers.1")));
    CHECK_FALSE(nn::is_checkpoint_wrapped(model.get_submodule("layers.0")));
  }
  {
    nn::Transformer model(cfg, {});
    const auto wrapped = nn::apply_activation_checkpointing(
        model, [](const std::string&, nn::Module& m) { return m.type_name() == "SwiGLU"; });
    CHECK(wrapped ==
          std::vector<std::string>{"layers.0.mlp", "layers.1.mlp", "layers.2.mlp", "layers.3.mlp"});
  }
  nn::Transformer model(cfg, {});
  CHECK_THROWS_WITH(nn::apply_activation_checkpointing(model, "layers", 0),
                    Catch::Contains("[apply_activation_checkpointing] every must be >= 1"));
  CHECK_THROWS_WITH(nn::apply_activation_checkpointing(model, "blocks"),
                    Catch::Contains("[get_submodule]"));
  CHECK_THROWS_WITH(nn::apply_activation_checkpointing(model, "norm"),
                    Catch::Contains("has no child modules"));
}

TEST_CASE("checkpoint_wrapper on a whole Transformer: equal gradients, and the layer-wise form",
          "[checkpoint]") {
  dt::manual_seed(5);
  nn::Transformer model(block_config(), {});
  const Tensor tokens = dt::from_vector<int64_t>({1, 5, 9, 2, 30, 7, 0, 3, 4, 11}, {2, 5});
  auto call = [&](const DTensor& t) { return model(t); };
  const Run plain = run(model, tokens, call, false);
  nn::apply_activation_checkpointing(model, "layers", 2);
  check_equal(run(model, tokens, call, false), plain);
  nn::apply_activation_checkpointing(model, "layers");
  check_equal(run(model, tokens, call, false), plain);
}

namespace {

// x + tanh(fc(x)) on x [batch, dim] (fc without bias): of its intermediates the plain run keeps
// exactly one [batch, dim] tensor per block for backward (tanh's output; fc's matmul saves x,
// which is the block's input anyway, and its weight; add saves nothing).
class TanhResidual : public nn::Module {
 public:
  TanhResidual(int64_t dim, nn::ModuleOptions opts) {
    fc_ = std::static_pointer_cast<nn::Linear>(
        register_module("fc", std::make_shared<nn::Linear>(dim, dim, false, opts)));
  }
  std::string type_name() const override { return "TanhResidual"; }
  DTensor forward(const DTensor& x) override { return dt::add(x, dt::tanh((*fc_)(x))); }

 private:
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace

TEST_CASE("checkpoint: forward keeps less activation memory, by the predicted bytes",
          "[checkpoint]") {
  constexpr int64_t kBlocks = 6, kBatch = 64, kDim = 96;  // one activation: 48 KiB in float64
  const int64_t activation = kBatch * kDim * 8;
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  nn::ModuleList blocks;
  for (int64_t i = 0; i < kBlocks; ++i) blocks.append(std::make_shared<TanhResidual>(kDim, opts));
  const Tensor x = st::det_input({kBatch, kDim}, 4, -1.0, 0.05, dt::kFloat64);
  // Bytes held after forward (the activations kept for backward, and the output) and the peak
  // during forward, both above what was held before it.
  auto measure = [&]() {
    const DTensor in = nn::local_dtensor(x);
    const int64_t before = dt::memory_stats().current_bytes;
    dt::reset_peak_memory_stats();
    DTensor y = blocks(in);
    const dt::MemoryStats after = dt::memory_stats();
    y.backward(nn::local_dtensor(dt::ones({kBatch, kDim}, dt::TensorOptions(dt::kFloat64))));
    return std::pair<int64_t, int64_t>{after.current_bytes - before, after.peak_bytes - before};
  };
  const auto [kept_plain, peak_plain] = measure();
  nn::apply_activation_checkpointing(blocks, "", 1);  // each block, not their Linears
  const auto [kept_ckpt, peak_ckpt] = measure();
  INFO("kept " << kept_plain << " -> " << kept_ckpt << ", peak " << peak_plain << " -> "
               << peak_ckpt << ", one activation " << activation);
  // Kept: one tanh output per block less, exactly.
  CHECK(kept_plain - kept_ckpt == kBlocks * activation);
  // Peak: the plain run peaks in its last block holding every block's tanh output; the
  // checkpointed one holds the current block's intermediates only (its fc output and tanh
  // output), so the peak is lower by at least kBlocks - 2 activations and at most kBlocks.
  CHECK(peak_plain - peak_ckpt >= (kBlocks - 2) * activation);
  CHECK(peak_plain - peak_ckpt <= kBlocks * activation);
}

TEST_CASE("checkpoint refuses what cannot work", "[checkpoint]") {
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  nn::Linear lin(4, 4, true, opts);
  nn::CheckpointOptions with_lin;
  with_lin.module = &lin;
  const Tensor x = st::det_input({3, 4}, 1, -1.0, 0.2, dt::kFloat64);

  SECTION("fn modifies its input in place") {
    const DTensor xd = nn::local_dtensor(x.clone());
    CHECK_THROWS_WITH(nn::checkpoint(
                          [&](const DTensor& v) {
                            dt::add_(v, 1.0);
                            return lin.forward(v);
                          },
                          xd, with_lin),
                      Catch::Contains("[checkpoint] the checkpointed function modified its "
                                      "input 0 in place"));
  }
  SECTION("an input modified in place between forward and backward") {
    const DTensor xd = nn::local_dtensor(x.clone());
    const DTensor y =
        nn::checkpoint([&](const DTensor& v) { return lin.forward(v); }, xd, with_lin);
    dt::add_(xd, 1.0);
    CHECK_THROWS_WITH(dt::sum(y).backward(),
                      Catch::Contains("[checkpoint] input 0 of the checkpointed function was "
                                      "modified in place after the forward"));
  }
  SECTION("fn reads a parameter it was not told about") {
    DTensor xd = nn::local_dtensor(x.clone());
    xd.requires_grad_();
    const DTensor y = nn::checkpoint([&](const DTensor& v) { return lin.forward(v); }, xd);
    CHECK_THROWS_WITH(dt::sum(y).backward(),
                      Catch::Contains("neither one of its inputs nor a parameter of "
                                      "CheckpointOptions::module"));
  }
  SECTION("the recompute computes something else") {
    DTensor xd = nn::local_dtensor(x.clone());
    xd.requires_grad_();
    int calls = 0;
    const DTensor y = nn::checkpoint(
        [&](const DTensor& v) { return ++calls == 1 ? dt::tanh(v) : dt::sum(v, {0}); }, xd);
    CHECK_THROWS_WITH(dt::sum(y).backward(),
                      Catch::Contains("[checkpoint] the recompute's output 0 is"));
  }
}

// checkpoint_wrapper recomputes one-input calls only: a wrapped module called with several inputs
// (module(tgt, memory), mha(q, k, v), loss(a, b)) raises instead of silently running unwrapped.
TEST_CASE("checkpoint_wrapper: a multi-input call of a wrapped module raises", "[checkpoint]") {
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  nn::TransformerDecoderLayer layer(4, 2, 8, 0.0, "relu", 1e-5, false, false, true, opts);
  CHECK(nn::apply_activation_checkpointing(layer, [](const std::string&, nn::Module& m) {
          return m.type_name() == "TransformerDecoderLayer";
        }) == std::vector<std::string>{""});
  const Tensor tgt = st::det_input({3, 2, 4}, 1, -1.0, 0.2, dt::kFloat64);
  const DTensor memory = nn::local_dtensor(st::det_input({5, 2, 4}, 2, -1.0, 0.2, dt::kFloat64));
  auto call = [&](const DTensor& x) { return layer(x, memory); };
  CHECK_THROWS_WITH(run(layer, tgt, call),
                    Catch::Contains("[checkpoint_wrapper] TransformerDecoderLayer is wrapped but "
                                    "called with 2 inputs"));
  nn::remove_checkpoint_wrapper(layer);
  const Run plain = run(layer, tgt, call);
  // self_attn(x) is a one-input call: wrapped, it checkpoints (same gradients; tgt's within
  // rounding: its query, key and value gradients are summed inside the recompute's graph before
  // the residual's is added); multihead_attn(x, memory, memory) is not.
  nn::checkpoint_wrapper(layer.get_submodule("self_attn"));
  check_equal(run(layer, tgt, call), plain, 1e-14);
  nn::checkpoint_wrapper(layer.get_submodule("multihead_attn"));
  CHECK_THROWS_WITH(run(layer, tgt, call),
                    Catch::Contains("[checkpoint_wrapper] MultiheadAttention 'multihead_attn' is "
                                    "wrapped but called with 3 inputs"));
  nn::MSELoss loss;
  nn::checkpoint_wrapper(loss);
  CHECK_THROWS_WITH(loss(memory, memory),
                    Catch::Contains("[checkpoint_wrapper] MSELoss is wrapped but called with 2 "
                                    "inputs"));
}

TEST_CASE("checkpoint_wrapper inside a dtensor::compile capture: replay equals the eager step",
          "[checkpoint][compile]") {
  nn::ModuleOptions opts;
  opts.dtype = dt::kFloat64;
  dt::manual_seed(7);
  nn::Linear eager(4, 4, true, opts);
  dt::manual_seed(7);
  nn::Linear compiled(4, 4, true, opts);
  nn::checkpoint_wrapper(eager);
  nn::checkpoint_wrapper(compiled);
  // One step: forward through the checkpointed Linear, backward (which recomputes it), and the
  // gradients as the step's outputs. The loss weights are made before the step (a tensor the
  // step made with local Tensor code would be refused by the capture).
  const DTensor r = nn::local_dtensor(st::det_input({3, 4}, 5, -1.0, 0.25, dt::kFloat64));
  auto step_of = [&r](nn::Linear& lin) {
    return [&lin, &r](const dt::DTensorList& batch) {
      lin.zero_grad();
      const DTensor loss = dt::sum(dt::mul(dt::tanh(lin(batch[0])), r));
      loss.backward();
      return dt::DTensorList{loss.detach(), lin.param("weight").grad().detach(),
                             lin.param("bias").grad().detach()};
    };
  };
  dt::CompiledStep step = dt::compile(step_of(compiled));
  for (int i = 0; i < 3; ++i) {
    INFO("call " << i << " (0: the capture, then replays)");
    const DTensor x = nn::local_dtensor(st::det_input({3, 4}, 11 + i, -1.0, 0.2, dt::kFloat64));
    const dt::DTensorList got = step({x});
    const dt::DTensorList want = step_of(eager)({x});
    for (size_t o = 0; o < want.size(); ++o) {
      INFO("output " << o << " (the loss, the weight's and the bias's gradients)");
      CHECK(st::same_values(got[o].to_local(), want[o].to_local(), 0.0));
    }
  }
  CHECK(step.captures() == 1);
  CHECK(step.replays() == 2);
  // The graph holds the recompute: more nodes than the same step captured without the wrapper
  // (whose gradients it equals too, as eagerly), and tanh, outside the checkpoint, once.
  size_t tanh_nodes = 0;
  for (const auto& n : step.graph().nodes()) tanh_nodes += n.name == "tanh" ? 1 : 0;
  CHECK(tanh_nodes == 1);
  nn::remove_checkpoint_wrapper(eager);
  dt::CompiledStep plain = dt::compile(step_of(eager));
  const DTensor x = nn::local_dtensor(st::det_input({3, 4}, 20, -1.0, 0.2, dt::kFloat64));
  const dt::DTensorList want = plain({x});
  const dt::DTensorList got = step({x});
  for (size_t o = 0; o < want.size(); ++o) {
    CHECK(st::same_values(got[o].to_local(), want[o].to_local(), 0.0));
  }
  INFO(step.graph().str() << "without the wrapper:\n" << plain.graph().str());
  CHECK(step.graph().nodes().size() > plain.graph().nodes().size());
}
