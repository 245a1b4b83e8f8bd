// nn modules on one process (self mesh): forward against naive loops, the module tree, and
// errors.
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "nn_reference.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace ref = dtensor::testref;
using Catch::Contains;

namespace {

constexpr double kTol = 1e-4;

ref::Vec P(const nn::Module& m, const char* fqn) {
  return ref::vec(m.get_parameter(fqn).to_local());
}

// Sets every parameter of `m` to fresh random values (norm weights included), so tests do not
// rely on ones/zeros initialisation.
void randomize(nn::Module& root, uint64_t seed) {
  dt::Generator gen(seed);
  for (auto& [name, m] : root.named_modules()) {
    for (auto& [pname, p] : m->own_parameters()) {
      dt::Tensor t = dt::randn(p.shape(), dt::TensorOptions(p.dtype()), &gen);
      m->set_parameter(pname, nn::local_dtensor(t));
    }
  }
}

// A small Transformer config: dim 8, 2 heads, defaults otherwise.
nn::TransformerConfig tiny_config(int64_t vocab, int64_t layers) {
  nn::TransformerConfig cfg;
  cfg.vocab_size = vocab;
  cfg.dim = 8;
  cfg.n_layers = layers;
  cfg.n_heads = 2;
  return cfg;
}

ref::Vec mlp_ref(const nn::Module& m, const ref::Vec& x, int64_t n, int64_t d, int64_t h, bool gelu,
                 bool bias) {
  ref::Vec b1, b2;
  if (bias) {
    b1 = P(m, "fc1.bias");
    b2 = P(m, "fc2.bias");
  }
  ref::Vec a = ref::linear(x, P(m, "fc1.weight"), bias ? &b1 : nullptr, n, d, h);
  for (double& v : a) v = gelu ? ref::gelu(v) : ref::silu(v);
  return ref::linear(a, P(m, "fc2.weight"), bias ? &b2 : nullptr, n, h, d);
}

ref::Vec swiglu_ref(const nn::Module& m, const ref::Vec& x, int64_t n, int64_t d, int64_t h) {
  ref::Vec a = ref::linear(x, P(m, "w1.weight"), nullptr, n, d, h);
  ref::Vec c = ref::linear(x, P(m, "w3.weight"), nullptr, n, d, h);
  for (size_t i = 0; i < a.size(); ++i) a[i] = ref::silu(a[i]) * c[i];
  return ref::linear(a, P(m, "w2.weight"), nullptr, n, h, d);
}

ref::Vec attention_ref(const nn::Module& m, const ref::Vec& x, int64_t B, int64_t S, int64_t d,
                       int64_t H, bool causal) {
  const int64_t n = B * S;
  ref::Vec q = ref::linear(x, P(m, "wq.weight"), nullptr, n, d, d);
  ref::Vec k = ref::linear(x, P(m, "wk.weight"), nullptr, n, d, d);
  ref::Vec v = ref::linear(x, P(m, "wv.weight"), nullptr, n, d, d);
  ref::Vec o = ref::attention(q, k, v, B, S, H, d / H, causal);
  return ref::linear(o, P(m, "wo.weight"), nullptr, n, d, d);
}

}  // namespace

TEST_CASE("Linear forward matches a naive loop (bias, no bias, zero-size)", "[nn]") {
  const auto dims = GENERATE(std::vector<int64_t>{2, 3, 5, 7}, std::vector<int64_t>{0, 4, 3, 2},
                             std::vector<int64_t>{1, 1, 5, 0}, std::vector<int64_t>{4, 1, 0, 3});
  const int64_t B = dims[0], S = dims[1], in = dims[2], out = dims[3];
  for (bool bias : {true, false}) {
    dt::manual_seed(7);
    nn::Linear lin(in, out, bias);
    dt::Tensor x = dt::randn({B, S, in});
    dt::DTensor y = lin(nn::local_dtensor(x));
    REQUIRE(nn::is_local(y));
    REQUIRE(y.shape() == dt::Shape{B, S, out});
    ref::Vec b = bias ? P(lin, "bias") : ref::Vec();
    ref::Vec expect =
        ref::linear(ref::vec(x), P(lin, "weight"), bias ? &b : nullptr, B * S, in, out);
    REQUIRE(ref::max_abs_diff(ref::vec(y.to_local()), expect) < kTol);
  }
}

TEST_CASE("Linear initialisation is uniform within 1/sqrt(in) and reproducible", "[nn]") {
  dt::manual_seed(3);
  nn::Linear a(16, 9);
  dt::manual_seed(3);
  nn::Linear b(16, 9);
  const ref::Vec wa = P(a, "weight");
  REQUIRE(wa == P(b, "weight"));
  REQUIRE(P(a, "bias") == P(b, "bias"));
  for (double v : wa) REQUIRE(std::abs(v) <= 0.25);
  nn::Linear c(16, 9);  // the generator moved on
  REQUIRE(P(c, "weight") != wa);
}

TEST_CASE("Embedding forward matches a naive gather and rejects bad indices", "[nn]") {
  dt::manual_seed(1);
  nn::Embedding emb(10, 6);
  const std::vector<int64_t> idx = {0, 9, 3, 3, 7, 1};
  dt::DTensor y = emb(nn::local_dtensor(dt::from_vector(idx, {2, 3})));
  REQUIRE(y.shape() == dt::Shape{2, 3, 6});
  const ref::Vec w = P(emb, "weight"), got = ref::vec(y.to_local());
  for (size_t i = 0; i < idx.size(); ++i) {
    for (int64_t k = 0; k < 6; ++k) REQUIRE(got[i * 6 + k] == w[idx[i] * 6 + k]);
  }
  dt::DTensor empty = emb(nn::local_dtensor(dt::from_vector(std::vector<int64_t>{}, {0, 4})));
  REQUIRE(empty.shape() == dt::Shape{0, 4, 6});
  REQUIRE_THROWS_WITH(emb(nn::local_dtensor(dt::from_vector(std::vector<int64_t>{12}, {1}))),
                      Contains("[embedding]"));
}

TEST_CASE("LayerNorm and RMSNorm match naive loops", "[nn]") {
  const int64_t rows = GENERATE(0, 1, 7);
  const int64_t d = 5;
  dt::manual_seed(5);
  dt::Tensor x = dt::randn({rows, d});
  nn::LayerNorm ln(d, 1e-5);
  nn::RMSNorm rn(d, 1e-6);
  randomize(ln, 11);
  randomize(rn, 12);
  ref::Vec lw = P(ln, "weight"), lb = P(ln, "bias"), rw = P(rn, "weight");
  REQUIRE(ref::max_abs_diff(ref::vec(ln(nn::local_dtensor(x)).to_local()),
                            ref::layer_norm(ref::vec(x), &lw, &lb, rows, d, 1e-5)) < kTol);
  REQUIRE(ref::max_abs_diff(ref::vec(rn(nn::local_dtensor(x)).to_local()),
                            ref::rms_norm(ref::vec(x), &rw, rows, d, 1e-6)) < kTol);
}

TEST_CASE("MLP (gelu, silu) and SwiGLU match naive loops", "[nn]") {
  const int64_t n = GENERATE(0, 6);
  const int64_t d = 8, h = 13;
  dt::manual_seed(9);
  dt::Tensor x = dt::randn({n, d});
  for (bool gelu : {true, false}) {
    nn::MLP mlp(d, h, gelu ? nn::Activation::kGelu : nn::Activation::kSilu, true);
    REQUIRE(ref::max_abs_diff(ref::vec(mlp(nn::local_dtensor(x)).to_local()),
                              mlp_ref(mlp, ref::vec(x), n, d, h, gelu, true)) < kTol);
  }
  nn::SwiGLU sw(d, h);
  REQUIRE(ref::max_abs_diff(ref::vec(sw(nn::local_dtensor(x)).to_local()),
                            swiglu_ref(sw, ref::vec(x), n, d, h)) < kTol);
}

TEST_CASE("Attention matches a naive multi-head loop (causal and not)", "[nn]") {
  const auto shape = GENERATE(std::vector<int64_t>{2, 5}, std::vector<int64_t>{1, 1},
                              std::vector<int64_t>{0, 3}, std::vector<int64_t>{3, 0});
  const int64_t B = shape[0], S = shape[1], d = 12, H = 3;
  for (bool causal : {true, false}) {
    dt::manual_seed(21);
    nn::Attention att(d, H, causal);
    dt::Tensor x = dt::randn({B, S, d});
    dt::DTensor y = att(nn::local_dtensor(x));
    REQUIRE(y.shape() == dt::Shape{B, S, d});
    REQUIRE(ref::max_abs_diff(ref::vec(y.to_local()),
                              attention_ref(att, ref::vec(x), B, S, d, H, causal)) < kTol);
  }
  REQUIRE_THROWS_WITH(nn::Attention(10, 3), Contains("[Attention]"));
}

TEST_CASE("TransformerBlock matches the composition of naive pieces", "[nn]") {
  nn::TransformerConfig cfg;
  cfg.dim = 8;
  cfg.n_heads = 2;
  cfg.hidden_dim = 11;
  cfg.norm = nn::NormKind::kLayerNorm;
  cfg.mlp = nn::MLPKind::kGelu;
  cfg.bias = false;
  const int64_t B = 2, S = 4, d = cfg.dim, n = B * S;
  dt::manual_seed(4);
  nn::TransformerBlock blk(cfg);
  randomize(blk, 99);
  dt::Tensor x = dt::randn({B, S, d});
  ref::Vec xv = ref::vec(x);
  ref::Vec w1 = P(blk, "attention_norm.weight"), b1 = P(blk, "attention_norm.bias");
  ref::Vec a = ref::layer_norm(xv, &w1, &b1, n, d, cfg.norm_eps);
  ref::Vec att = attention_ref(blk.get_submodule("attention"), a, B, S, d, cfg.n_heads, true);
  ref::Vec h(xv.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = xv[i] + att[i];
  ref::Vec w2 = P(blk, "mlp_norm.weight"), b2 = P(blk, "mlp_norm.bias");
  ref::Vec m = ref::layer_norm(h, &w2, &b2, n, d, cfg.norm_eps);
  ref::Vec f = mlp_ref(blk.get_submodule("mlp"), m, n, d, cfg.hidden_dim, true, false);
  for (size_t i = 0; i < h.size(); ++i) h[i] += f[i];
  REQUIRE(ref::max_abs_diff(ref::vec(blk(nn::local_dtensor(x)).to_local()), h) < 1e-3);
}

TEST_CASE("Module tree: names, lookup, replacement and errors", "[nn]") {
  const nn::TransformerConfig cfg = tiny_config(17, 2);
  dt::manual_seed(1);
  nn::Transformer model(cfg);
  std::vector<std::string> names;
  for (auto& [n, p] : model.named_parameters()) names.push_back(n);
  REQUIRE(names.front() == "tok_embeddings.weight");
  REQUIRE(names.back() == "output.weight");
  REQUIRE(std::find(names.begin(), names.end(), "layers.1.mlp.w3.weight") != names.end());
  REQUIRE(std::find(names.begin(), names.end(), "layers.0.attention.wq.weight") != names.end());
  // 1 + 2 * (1 block + norm + attention + 4 linears + norm + swiglu + 3 linears) + layers + norm
  // + output + tok_embeddings
  REQUIRE(model.named_modules().size() == 1 + 1 + 1 + 2 * 12 + 1 + 1);
  REQUIRE(model.get_submodule("layers.1.attention.wq").type_name() == "Linear");
  REQUIRE(model.get_parameter("norm.weight").shape() == dt::Shape{8});
  dt::Tensor tokens = dt::from_vector(std::vector<int64_t>{1, 2, 3, 16, 0, 5}, {2, 3});
  dt::DTensor logits = model(nn::local_dtensor(tokens));
  REQUIRE(logits.shape() == dt::Shape{2, 3, 17});
  // Same seed, same model, same logits, bit for bit.
  dt::manual_seed(1);
  nn::Transformer again(cfg);
  REQUIRE(again(nn::local_dtensor(tokens)).to_local().to_vector<float>() ==
          logits.to_local().to_vector<float>());
  REQUIRE_THROWS_WITH(model.get_submodule("layers.5"), Contains("[get_submodule]"));
  REQUIRE_THROWS_WITH(model.get_parameter("norm.bias"), Contains("[get_parameter]"));
  auto& lin = model.get_submodule("output");
  REQUIRE_THROWS_WITH(lin.set_parameter("weight", nn::local_dtensor(dt::zeros({3, 3}))),
                      Contains("[set_parameter]"));
  lin.set_parameter("weight", nn::local_dtensor(dt::zeros({17, 8})));
  REQUIRE(model.get_parameter("output.weight").to_local().to_vector<float>() ==
          std::vector<float>(17 * 8, 0.0f));
  REQUIRE_THROWS_WITH(lin.register_parameter("weight", nn::local_dtensor(dt::zeros({1}))),
                      Contains("[Module]"));
  REQUIRE_THROWS_WITH(lin.register_module("a.b", std::make_shared<nn::ModuleList>()),
                      Contains("[Module]"));
  REQUIRE_THROWS_WITH(model.forward(nn::local_dtensor(dt::zeros({2, 3}))), Contains("[embedding]"));
  REQUIRE_THROWS_WITH(nn::ModuleList().Module::forward(nn::local_dtensor(dt::zeros({1}))).defined(),
                      Contains("[Module]"));
}

TEST_CASE("functional ops reject mismatched operands", "[nn]") {
  dt::DTensor x = nn::local_dtensor(dt::zeros({2, 3}));
  REQUIRE_THROWS_WITH(dt::linear(x, nn::local_dtensor(dt::zeros({4, 5}))), Contains("[linear]"));
  REQUIRE_THROWS_WITH(dt::add(x, nn::local_dtensor(dt::zeros({3, 2}))), Contains("[add]"));
  const dt::DTensor packed = nn::local_dtensor(dt::zeros({1, 2, 6}));
  REQUIRE_THROWS_WITH(nn::functional::packed_heads_attention(packed, packed, packed, 4, true),
                      Contains("[packed_heads_attention]"));
  const int64_t last[] = {3};
  REQUIRE_THROWS_WITH(dt::layer_norm(x, last, nn::local_dtensor(dt::ones({2}))),
                      Contains("[layer_norm]"));
  // The modules' rule for parameters on another mesh than the input's (functional::on_mesh).
  nn::Linear lin(3, 4, /*bias=*/false);
  REQUIRE_THROWS_WITH(lin(nn::local_dtensor(dt::zeros({2, 5}))), Contains("[linear]"));
  nn::LayerNorm norm(2);
  REQUIRE_THROWS_WITH(norm(x), Contains("[layer_norm]"));
}

TEST_CASE("Modules run through the propagation engine: a repeated forward is all cache hits",
          "[nn]") {
  const nn::TransformerConfig cfg = tiny_config(11, 1);
  dt::manual_seed(6);
  nn::Transformer model(cfg);
  dt::Tensor tokens = dt::from_vector(std::vector<int64_t>{1, 2, 3, 10, 0, 5}, {2, 3});
  const std::vector<float> first = model(nn::local_dtensor(tokens)).to_local().to_vector<float>();
  const dt::PropagationCacheStats before = dt::propagation_cache_stats();
  const std::vector<float> second = model(nn::local_dtensor(tokens)).to_local().to_vector<float>();
  const dt::PropagationCacheStats after = dt::propagation_cache_stats();
  REQUIRE(after.misses == before.misses);
  REQUIRE(after.hits > before.hits);
  REQUIRE(first == second);
}

TEST_CASE("rotary embeddings rotate each pair by pos * theta^(-2i/D), swiglu gates", "[nn]") {
  const int64_t B = 2, S = 5, H = 3, D = 6;
  dt::Generator gen(11);
  const dt::Tensor x = dt::randn({B, S, H, D}, dt::TensorOptions(dt::kFloat64), &gen);
  const dt::Tensor u = dt::randn({B, S, H, D}, dt::TensorOptions(dt::kFloat64), &gen);
  const nn::functional::RotaryTables t = nn::functional::rotary_tables(8, D, 500.0, dt::kFloat64);
  dt::DTensor dx = nn::local_dtensor(x.clone());
  dx.requires_grad_();
  const dt::DTensor out = nn::functional::apply_rotary_emb(dx, t);
  dt::sum(dt::mul(out, nn::local_dtensor(u))).backward();
  const std::vector<double> xv = x.to_vector<double>(), uv = u.to_vector<double>();
  const std::vector<double> ov = out.to_local().to_vector<double>();
  const std::vector<double> gv = dx.grad().to_local().to_vector<double>();
  double err = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < D / 2; ++i) {
          const double a = static_cast<double>(s) * std::pow(500.0, -2.0 * i / D);
          const size_t k = static_cast<size_t>(((b * S + s) * H + h) * D + 2 * i);
          const double c = std::cos(a), sn = std::sin(a);
          err = std::max(err, std::abs(ov[k] - (xv[k] * c - xv[k + 1] * sn)));
          err = std::max(err, std::abs(ov[k + 1] - (xv[k] * sn + xv[k + 1] * c)));
          // The gradient is the transposed rotation of the upstream gradient.
          err = std::max(err, std::abs(gv[k] - (uv[k] * c + uv[k + 1] * sn)));
          err = std::max(err, std::abs(gv[k + 1] - (-uv[k] * sn + uv[k + 1] * c)));
        }
      }
    }
  }
  CHECK(err < 1e-12);
  // Positions from start_pos (decoding after a prefix): rotating x[:, 2:5] from position 2
  // gives the full sequence's rotation at positions 2..4, bit for bit; from position 0 it does
  // not.
  {
    const dt::Tensor part = x.narrow(1, 2, 3).contiguous();
    const dt::Tensor want = nn::functional::apply_rotary_emb(nn::local_dtensor(x), t)
                                .to_local()
                                .narrow(1, 2, 3)
                                .contiguous();
    CHECK(dt::equal(nn::functional::apply_rotary_emb(nn::local_dtensor(part), t, 2).to_local(),
                    want));
    CHECK_FALSE(dt::allclose(
        nn::functional::apply_rotary_emb(nn::local_dtensor(part), t).to_local(), want, 0, 1e-3));
  }
  REQUIRE_THROWS_WITH(
      nn::functional::apply_rotary_emb(nn::local_dtensor(dt::zeros({1, 9, 1, 6})), t),
      Catch::Contains("[apply_rotary_emb] positions [0, 9) of x"));
  REQUIRE_THROWS_WITH(
      nn::functional::apply_rotary_emb(nn::local_dtensor(dt::zeros({1, 4, 1, 6})), t, 5),
      Catch::Contains("outside the tables' 8 positions"));
  REQUIRE_THROWS_WITH(nn::functional::rotary_tables(4, 5), Catch::Contains("[rotary_tables]"));
  const dt::Tensor g = dt::randn({4}, dt::TensorOptions(dt::kFloat64), &gen);
  const dt::Tensor up = dt::randn({4}, dt::TensorOptions(dt::kFloat64), &gen);
  const std::vector<double> sw = nn::functional::swiglu(nn::local_dtensor(g), nn::local_dtensor(up))
                                     .to_local()
                                     .to_vector<double>();
  for (int64_t i = 0; i < 4; ++i) {
    const double gi = g.to_vector<double>()[i];
    CHECK(std::abs(sw[i] - gi / (1 + std::exp(-gi)) * up.to_vector<double>()[i]) < 1e-14);
  }
}

// ---- module hooks, against PyTorch (tests/autograd/torch_autograd_api_references.py, "Module
// forward hooks and handles": the values and orders below are its output) ----
namespace {

using dt::DTensor;
using Args = absl::Span<const DTensor>;
using Events = std::vector<std::string>;

DTensor vals(std::vector<double> v, dt::Shape shape, bool requires_grad = false) {
  DTensor x = nn::local_dtensor(dt::from_vector<double>(v, shape));
  if (requires_grad) x.requires_grad_();
  return x;
}

std::string str(const DTensor& t) {
  if (!t.defined()) return "None";
  std::vector<std::string> parts;
  for (double v : t.to_local().to_vector<double>()) {
    parts.push_back(absl::StrFormat("%g", std::round(v * 1e6) / 1e6 + 0.0));
  }
  return "[" + absl::StrJoin(parts, ", ") + "]";
}

std::shared_ptr<nn::Linear> lin22() {
  auto lin = std::make_shared<nn::Linear>(2, 2, false, nn::ModuleOptions{dt::kFloat64});
  lin->set_parameter("weight", vals({1, 2, 3, 4}, {2, 2}));
  return lin;
}

// A module of three inputs through Module::call_with_hooks (what a multi-input module's call
// does).
class Add3 : public nn::Module {
 public:
  std::string type_name() const override { return "Add3"; }
  DTensor forward(const DTensor& a, const DTensor& b, const DTensor& c) { return a + b + c; }
  DTensor operator()(const DTensor& a, const DTensor& b, const DTensor& c) {
    const DTensor args[] = {a, b, c};
    return call_with_hooks(args, [this](Args in) { return forward(in[0], in[1], in[2]); });
  }
};

}  // namespace

TEST_CASE("module hooks: forward hooks see the input, nullopt keeps, prepend, handles remove",
          "[nn]") {
  auto lin = lin22();
  Events events;
  lin->register_forward_pre_hook([&](nn::Module&, const DTensor& x) -> std::optional<DTensor> {
    events.push_back("pre " + str(x));
    return std::nullopt;
  });
  lin->register_forward_pre_hook([](nn::Module&, const DTensor& x) { return x * 2.0; });
  lin->register_forward_pre_hook(
      [&](nn::Module&, const DTensor& x) -> std::optional<DTensor> {
        events.push_back("pre first " + str(x));
        return std::nullopt;
      },
      {.prepend = true});
  lin->register_forward_hook(
      [&](nn::Module&, const DTensor& x, const DTensor& y) -> std::optional<DTensor> {
        events.push_back("fwd " + str(x) + " " + str(y));
        return std::nullopt;
      });
  nn::HookHandle add = lin->register_forward_hook(
      [](nn::Module&, const DTensor&, const DTensor& y) { return y + 1.0; });
  lin->register_forward_hook(
      [&](nn::Module&, const DTensor&, const DTensor& y) -> std::optional<DTensor> {
        events.push_back("fwd first " + str(y));
        return std::nullopt;
      },
      {.prepend = true});
  const DTensor x = vals({1, -1}, {1, 2});
  CHECK(str((*lin)(x)) == "[-1, -1]");
  CHECK(events ==
        Events{"pre first [1, -1]", "pre [1, -1]", "fwd first [-2, -2]", "fwd [2, -2] [-2, -2]"});
  add.remove();
  add.remove();  // idempotent
  CHECK(str((*lin)(x)) == "[-2, -2]");
  // A handle outliving its module: remove() does nothing; a default handle too.
  nn::HookHandle orphan = lin22()->register_forward_hook(
      [](nn::Module&, const DTensor&, const DTensor& y) { return y; });
  orphan.remove();
  nn::HookHandle().remove();
  CHECK_THROWS_WITH(lin->register_forward_pre_hook([](nn::Module&, const DTensor& x) { return x; },
                                                   {.always_call = true}),
                    Contains("[Linear] register_forward_pre_hook: always_call applies to forward "
                             "hooks only"));
}

TEST_CASE("module hooks: removal inside a hook, always_call on a raising forward", "[nn]") {
  auto lin = lin22();
  Events events;
  nn::HookHandle h2;
  lin->register_forward_hook(
      [&](nn::Module&, const DTensor&, const DTensor&) -> std::optional<DTensor> {
        events.push_back("f1");
        h2.remove();
        return std::nullopt;
      });
  h2 = lin->register_forward_hook(
      [&](nn::Module&, const DTensor&, const DTensor&) -> std::optional<DTensor> {
        events.push_back("f2");
        return std::nullopt;
      });
  (*lin)(vals({1, -1}, {1, 2}));
  (*lin)(vals({1, -1}, {1, 2}));
  CHECK(events == Events{"f1", "f2", "f1"});  // the call in progress still runs f2

  // A hook registered by a hook runs from the next call on; one removed by a later hook of the
  // same call ran in it; once the last one is removed (by itself) no hook runs.
  auto lin2 = lin22();
  events.clear();
  nn::HookHandle self, added;
  self = lin2->register_forward_hook(
      [&](nn::Module& m, const DTensor&, const DTensor&) -> std::optional<DTensor> {
        events.push_back("self");
        if (events.size() > 1) return std::nullopt;
        added = m.register_forward_hook(
            [&](nn::Module&, const DTensor&, const DTensor&) -> std::optional<DTensor> {
              events.push_back("added");
              self.remove();
              if (events.size() == 4) added.remove();
              return std::nullopt;
            });
        return std::nullopt;
      });
  for (int i = 0; i < 4; ++i) (*lin2)(vals({1, -1}, {1, 2}));
  CHECK(events == Events{"self", "self", "added", "added"});

  auto bad = lin22();
  events.clear();
  bad->register_forward_hook(
      [&](nn::Module&, const DTensor&, const DTensor&) -> std::optional<DTensor> {
        events.push_back("plain");
        return std::nullopt;
      });
  bad->register_forward_hook(
      [&](nn::Module&, const DTensor& x, const DTensor& y) -> std::optional<DTensor> {
        events.push_back("always " + std::to_string(x.shape()[1]) + " " + str(y));
        throw dt::Error("swallowed");  // the forward's error propagates, not this one
      },
      {.always_call = true});
  CHECK_THROWS_WITH((*bad)(vals({1}, {1, 1})), Contains("[linear]"));
  CHECK(events == Events{"always 1 None"});
}

TEST_CASE("module hooks on a two-input module: args of two, grad_input of two, replacement",
          "[nn]") {
  const DTensor a = vals({0.1, 0.5, -0.3, 0.8}, {4}, true);
  const DTensor b = vals({0.0, 1.0, 0.5, -0.5}, {4});
  nn::MSELoss mse;
  Events events;
  mse.register_forward_pre_hook([](nn::Module&, Args args) -> std::optional<std::vector<DTensor>> {
    return std::vector<DTensor>{args[0] * 2.0, args[1]};
  });
  mse.register_forward_hook(
      [&](nn::Module&, Args args, const DTensor& y) -> std::optional<DTensor> {
        events.push_back("fwd " + str(args[0]) + " " + str(y));
        return std::nullopt;
      });
  mse.register_full_backward_pre_hook([&](nn::Module&, const DTensor& go) {
    events.push_back("bwd pre " + str(go));
    return DTensor();
  });
  mse.register_full_backward_hook(
      [&](nn::Module&, Args gi, const DTensor& go) -> std::optional<std::vector<DTensor>> {
        REQUIRE(gi.size() == 2);
        events.push_back("bwd " + str(gi[0]) + " " + str(gi[1]) + " " + str(go));
        return std::vector<DTensor>{gi[0] * 0.5, gi[1]};
      });
  nn::HookHandle second = mse.register_full_backward_hook(
      [&](nn::Module&, Args gi, const DTensor&) -> std::optional<std::vector<DTensor>> {
        events.push_back("bwd 2 " + str(gi[0]));
        return std::nullopt;
      });
  const DTensor loss = mse(a, b);
  second.remove();  // after the forward: this backward still runs it
  (loss * 3.0).backward();
  CHECK(events == Events{"fwd [0.2, 1, -0.6, 1.6] [1.415]", "bwd pre [3]",
                         "bwd [0.3, 0, -1.65, 3.15] [0, 0, 0, 0] [3]",
                         "bwd 2 [0.15, 0, -0.825, 1.575]"});
  CHECK(str(a.grad()) == "[0.3, 0, -1.65, 3.15]");
  CHECK_FALSE(b.grad().defined());

  // Both inputs require grad: an undefined entry gives that input no gradient.
  const DTensor a2 = vals({0.1, 0.5, -0.3, 0.8}, {4}, true);
  const DTensor b2 = vals({0.0, 1.0, 0.5, -0.5}, {4}, true);
  nn::MSELoss mse2;
  mse2.register_full_backward_hook(
      [](nn::Module&, Args gi, const DTensor&) -> std::optional<std::vector<DTensor>> {
        return std::vector<DTensor>{DTensor(), gi[1] * 10.0};
      });
  mse2(a2, b2).backward();
  CHECK_FALSE(a2.grad().defined());
  CHECK(str(b2.grad()) == "[-0.5, 2.5, 4, -6.5]");
  // A hook returning the wrong number of entries.
  nn::MSELoss mse3;
  mse3.register_full_backward_hook(
      [](nn::Module&, Args gi, const DTensor&) -> std::optional<std::vector<DTensor>> {
        return std::vector<DTensor>{gi[0]};
      });
  CHECK_THROWS_WITH(mse3(a2, b2).backward(),
                    Contains("[register_full_backward_hook] MSELoss: a hook returned 1 "
                             "grad_input entries; the call has 2 inputs"));
}

// PyTorch 2.15's values (nn.TripletMarginLoss with the same hooks, float64): the backward hook's
// grad_input has 3 entries, the positive's (no grad) zeros, the negative's that of the input the
// pre-hook left (n * 2).
TEST_CASE("module hooks on a three-input loss: args of three, grad_input of three", "[nn]") {
  const DTensor a = vals({1.0, 2.0, 0.5, -1.0}, {2, 2}, true);
  const DTensor p = vals({0.5, 1.5, 0.0, 0.0}, {2, 2});
  const DTensor n = vals({1.0, 2.5, 0.5, -0.5}, {2, 2}, true);
  nn::TripletMarginLoss triplet;
  Events events;
  triplet.register_forward_pre_hook(
      [](nn::Module&, Args args) -> std::optional<std::vector<DTensor>> {
        return std::vector<DTensor>{args[0], args[1], args[2] * 2.0};
      });
  triplet.register_forward_hook(
      [&](nn::Module&, Args args, const DTensor& y) -> std::optional<DTensor> {
        events.push_back("fwd " + str(args[2]) + " " + str(y));
        return std::nullopt;
      });
  triplet.register_full_backward_hook(
      [&](nn::Module&, Args gi, const DTensor& go) -> std::optional<std::vector<DTensor>> {
        events.push_back(absl::StrFormat("bwd %d %s %s %s %s", gi.size(), str(gi[0]), str(gi[1]),
                                         str(gi[2]), str(go)));
        return std::nullopt;
      });
  (triplet(a, p, n) * 3.0).backward();
  CHECK(events == Events{"fwd [2, 5, 1, -1] [0.809017]",
                         "bwd 3 [0, 0, 2.17082, -1.34164] [0, 0, 0, 0] [0, 0, -1.5, 3e-06] [3]"});
  CHECK(str(a.grad()) == "[0, 0, 2.17082, -1.34164]");
  CHECK(str(n.grad()) == "[0, 0, -3, 6e-06]");
  CHECK_THROWS_WITH(
      triplet.register_forward_hook(
          [](nn::Module&, const DTensor&, const DTensor& y) { return y; }),
      Contains(
          "[TripletMarginLoss] register_forward_hook: one-input forward hooks need a one-input "
          "module (TripletMarginLoss's forward takes anchor, positive and negative;"));
}

TEST_CASE("module hooks: a multi-input module's call_with_hooks and the one-input forms", "[nn]") {
  Add3 add;
  const DTensor x = vals({1, 2}, {2});
  CHECK(str(add(x, x, x)) == "[3, 6]");  // no hooks
  add.register_forward_pre_hook([](nn::Module&, Args in) -> std::optional<std::vector<DTensor>> {
    return std::vector<DTensor>{in[0], in[1], in[2] * 0.0};
  });
  CHECK(str(add(x, x, x)) == "[2, 4]");
  add.register_forward_pre_hook([](nn::Module&, Args in) -> std::optional<std::vector<DTensor>> {
    return std::vector<DTensor>{in[0]};
  });
  CHECK_THROWS_WITH(add(x, x, x), Contains("[register_forward_pre_hook] Add3: a pre-hook returned "
                                           "1 inputs; the call has 3"));
  Add3 add2;
  add2.register_forward_hook([](nn::Module&, const DTensor&, const DTensor& y) { return y; });
  CHECK_THROWS_WITH(add2(x, x, x), Contains("[Add3] register_forward_hook: a one-input hook on a "
                                            "call with 3 inputs (register the args form"));
}
