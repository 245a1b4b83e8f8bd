// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against PyTorch 2.15
// (tests/nn/torch_transformer_references.py writes tests/data/nn/transformer_reference.txt:
// float64 inputs, masks and parameters by name; outputs, attention weights and the gradients of
// sum(out * cout) [+ sum(weights * cweights)] w.r.t. the inputs and every parameter), the
// parameter names, shapes and initial values, the errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"
#include "tests/common/ops_dtensor_test_util.h"
#include "tests/nn/reference_case.h"

namespace dt = dtensor;
namespace nn = dtensor::nn;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Tensor;

namespace {

// "<name> <f64|bool> <d0,d1,..|-> <values...>" per line.
const std::map<std::string, Tensor>& reference() {
  static const std::map<std::string, Tensor> table = [] {
    std::map<std::string, Tensor> out;
    std::ifstream in(DTENSOR_NN_TRANSFORMER_REFERENCE);
    if (!in) throw std::runtime_error("cannot read " DTENSOR_NN_TRANSFORMER_REFERENCE);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream s(line);
      std::string name, kind, dims, v;
      s >> name >> kind >> dims;
      dt::Shape shape;
      if (dims != "-") {
        std::istringstream d(dims);
        for (std::string x; std::getline(d, x, ',');) shape.push_back(std::stoll(x));
      }
      std::vector<double> values;
      while (s >> v) values.push_back(std::stod(v));
      Tensor t = dt::from_vector<double>(values, shape);
      out.emplace(name, kind == "bool" ? t.to(dt::kBool) : t);
    }
    return out;
  }();
  return table;
}

bool has_want(const std::string& name) {
  return reference().count(name) > 0;
}
Tensor want(const std::string& name) {
  const auto it = reference().find(name);
  if (it == reference().end()) throw std::runtime_error("no reference " + name);
  return it->second;
}
DTensor want_local(const std::string& name) {
  return has_want(name) ? nn::local_dtensor(want(name)) : DTensor();
}

// Loads PyTorch's parameters by name; every parameter of `m` must have one, and no more.
void load(nn::Module& m, const std::string& c) {
  const std::string prefix = c + ".param.";
  size_t count = 0;
  for (const auto& [name, t] : reference()) count += name.rfind(prefix, 0) == 0 ? 1 : 0;
  const auto params = m.named_parameters();
  REQUIRE(params.size() == count);
  for (const auto& [fqn, p] : params) {
    INFO(fqn);
    const size_t dot = fqn.rfind('.');
    nn::Module& owner = dot == std::string::npos ? m : m.get_submodule(fqn.substr(0, dot));
    owner.set_parameter(dot == std::string::npos ? fqn : fqn.substr(dot + 1),
                        nn::local_dtensor(want(prefix + fqn)));
  }
}

DTensor leaf(const std::string& name) {
  DTensor x = nn::local_dtensor(want(name).clone());
  x.requires_grad_(true);
  return x;
}

constexpr double kTol = 1e-12;

// The loss of the reference, backward, and every comparison.
void check(nn::Module& m, const std::string& c,
           const std::vector<std::pair<std::string, DTensor>>& in, const DTensor& out,
           const DTensor& weights) {
  CHECK(tt::same_values(out.to_local(), want(c + ".out"), kTol));
  DTensor loss = dt::sum(dt::mul(out, want_local(c + ".cout")));
  CHECK(weights.defined() == has_want(c + ".weights"));
  if (weights.defined()) {
    CHECK(tt::same_values(weights.to_local(), want(c + ".weights"), kTol));
    loss = dt::add(loss, dt::sum(dt::mul(weights, want_local(c + ".cweights"))));
  }
  loss.backward();
  for (const auto& [name, x] : in) {
    INFO("grad of " << name);
    CHECK(tt::same_values(x.grad().to_local(), want(c + ".grad." + name), kTol));
  }
  for (const auto& [name, p] : m.named_parameters()) {
    INFO("grad of " << name);
    REQUIRE(p.grad().defined());
    CHECK(tt::same_values(p.grad().to_local(), want(c + ".grad.param." + name), kTol));
  }
}

}  // namespace

TEST_CASE("MultiheadAttention gives PyTorch's outputs, weights and gradients", "[nn]") {
  constexpr int64_t E = 4, H = 2;
  const std::optional<int64_t> none;
  struct Case {
    const char* name;
    bool bias = true, add_bias_kv = false, add_zero_attn = false;
    std::optional<int64_t> kdim, vdim;
    bool batch_first = false;
    bool self = true;
    nn::MultiheadAttentionArgs args;
  };
  auto args = [](bool need_weights, bool average = true, bool is_causal = false) {
    nn::MultiheadAttentionArgs a;
    a.need_weights = need_weights;
    a.average_attn_weights = average;
    a.is_causal = is_causal;
    return a;
  };
  const std::vector<Case> cases = {
      {"mha_self_weights", true, false, false, none, none, false, true, args(true)},
      {"mha_self_sdpa_bool", true, false, false, none, none, false, true, args(false)},
      {"mha_cross_kvdim", true, false, false, 5, 3, false, false, args(true, false)},
      {"mha_cross_kvdim_sdpa", true, false, false, 5, 3, false, false, args(false)},
      {"mha_bias_kv_zero_attn", true, true, true, none, none, false, false, args(true)},
      {"mha_bias_kv_zero_attn_sdpa", true, true, true, none, none, false, false, args(false)},
      {"mha_batch_first_causal", true, false, false, none, none, true, true,
       args(false, true, true)},
      {"mha_causal_kpm", false, false, false, none, none, false, true, args(false, true, true)},
      {"mha_unbatched", true, false, false, 5, 5, false, false, args(true, false)},
  };
  for (const Case& k : cases) {
    const std::string c = k.name;
    INFO(c);
    nn::MultiheadAttention m(E, H, 0.0, k.bias, k.add_bias_kv, k.add_zero_attn, k.kdim, k.vdim,
                             k.batch_first, tt::f64());
    load(m, c);
    m.eval();
    nn::MultiheadAttentionArgs a = k.args;
    a.attn_mask = want_local(c + ".attn_mask");
    a.key_padding_mask = want_local(c + ".key_padding_mask");
    std::vector<std::pair<std::string, DTensor>> in = {{"query", leaf(c + ".query")}};
    if (!k.self) {
      in.emplace_back("key", leaf(c + ".key"));
      in.emplace_back("value", leaf(c + ".value"));
    }
    const DTensor& q = in[0].second;
    const nn::MultiheadAttentionOutput r =
        k.self ? m.forward(q, q, q, a) : m.forward(q, in[1].second, in[2].second, a);
    check(m, c, in, r.attn_output, r.attn_weights);
  }
}

TEST_CASE("TransformerEncoderLayer and TransformerEncoder give PyTorch's values", "[nn]") {
  constexpr int64_t E = 4, H = 2, FF = 6;
  struct Case {
    const char* name;
    std::string activation;
    bool batch_first, norm_first, bias, is_causal;
  };
  for (const Case& k : {Case{"enc_post_relu", "relu", false, false, true, false},
                        Case{"enc_pre_gelu_bf", "gelu", true, true, true, false},
                        Case{"enc_pre_nobias_causal", "relu", false, true, false, true}}) {
    const std::string c = k.name;
    INFO(c);
    nn::TransformerEncoderLayer m(E, H, FF, 0.1, k.activation, 1e-5, k.batch_first, k.norm_first,
                                  k.bias, tt::f64());
    load(m, c);
    m.eval();
    const DTensor src = leaf(c + ".src");
    const DTensor out = m.forward(src, want_local(c + ".src_mask"),
                                  want_local(c + ".src_key_padding_mask"), k.is_causal);
    check(m, c, {{"src", src}}, out, DTensor());
  }
  const std::string c = "encoder2";
  nn::TransformerEncoderLayer layer(E, H, FF, 0.1, "relu", 1e-5, false, false, true, tt::f64());
  nn::TransformerEncoder enc(layer, 2, std::make_shared<nn::LayerNorm>(E, 1e-5, true, tt::f64()));
  load(enc, c);
  enc.eval();
  const DTensor src = leaf(c + ".src");
  const DTensor out =
      enc.forward(src, want_local(c + ".src_mask"), want_local(c + ".src_key_padding_mask"), true);
  check(enc, c, {{"src", src}}, out, DTensor());
}

TEST_CASE("MultiheadAttention and TransformerEncoderLayer have PyTorch's names, init and errors",
          "[nn]") {
  using Names = std::vector<std::pair<std::string, dt::Shape>>;
  auto names = [](const nn::Module& m) {
    Names out;
    for (const auto& [n, p] : m.named_parameters()) out.emplace_back(n, p.shape());
    return out;
  };
  nn::MultiheadAttention sep(8, 2, 0.0, true, true, false, 5, 3);
  CHECK(names(sep) == Names{{"q_proj_weight", {8, 8}},
                            {"k_proj_weight", {8, 5}},
                            {"v_proj_weight", {8, 3}},
                            {"in_proj_bias", {24}},
                            {"bias_k", {1, 1, 8}},
                            {"bias_v", {1, 1, 8}},
                            {"out_proj.weight", {8, 8}},
                            {"out_proj.bias", {8}}});
  CHECK(names(nn::MultiheadAttention(8, 2, 0.0, false)) ==
        Names{{"in_proj_weight", {24, 8}}, {"out_proj.weight", {8, 8}}});
  nn::TransformerEncoderLayer layer(8, 2, 16);
  std::vector<std::string> children;
  for (const auto& [n, c] : layer.named_children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1",
                                             "norm2", "dropout1", "dropout2"});
  CHECK(layer.named_parameters().size() == 12);
  // Init: xavier_uniform_ bounds, zero in_proj_bias and out_proj.bias (after a reset too).
  nn::MultiheadAttention m(8, 2);
  for (int pass = 0; pass < 2; ++pass) {
    INFO("pass " << pass);
    const Tensor w = m.param("in_proj_weight").to_local();
    const double bound = std::sqrt(6.0 / (24 + 8));
    CHECK(dt::amax(dt::abs(w)).item<float>() <= bound);
    CHECK(dt::amax(dt::abs(w)).item<float>() > bound / 2);
    CHECK(dt::amax(dt::abs(m.param("in_proj_bias").to_local())).item<float>() == 0);
    CHECK(dt::amax(dt::abs(m.get_parameter("out_proj.bias").to_local())).item<float>() == 0);
    m.reset_parameters();
  }
  // TransformerEncoder's layers start as copies of the given layer.
  nn::TransformerEncoder enc(layer, 2);
  for (const auto& [n, p] : layer.named_parameters()) {
    INFO(n);
    CHECK(tt::same_values(enc.get_parameter("layers.0." + n).to_local(), p.to_local(), 0));
    CHECK(tt::same_values(enc.get_parameter("layers.1." + n).to_local(), p.to_local(), 0));
  }
  // Module's forward(x): self-attention without weights.
  const DTensor x = nn::local_dtensor(tt::det_input({3, 2, 8}, 1, -1.0, 0.25));
  nn::MultiheadAttentionArgs no_weights;
  no_weights.need_weights = false;
  const nn::MultiheadAttentionOutput r = m.forward(x, x, x, no_weights);
  CHECK(!r.attn_weights.defined());
  CHECK(tt::same_values(m(x).to_local(), r.attn_output.to_local(), 0));

  CHECK_THROWS_WITH(nn::MultiheadAttention(5, 2),
                    Catch::Contains("[MultiheadAttention] embed_dim 5 must be divisible by "
                                    "num_heads 2"));
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"),
                    Catch::Contains("activation should be relu/gelu, not tanh"));
  nn::MultiheadAttentionArgs causal;
  causal.is_causal = true;
  CHECK_THROWS_WITH(m.forward(x, x, x, causal), Catch::Contains("Need attn_mask"));
  nn::MultiheadAttentionArgs bad;
  bad.attn_mask = nn::local_dtensor(dt::zeros({3, 4}));
  CHECK_THROWS_WITH(m.forward(x, x, x, bad),
                    Catch::Contains("attn_mask of shape [3, 4]: expected [L, S] = [3, 3]"));
  bad.attn_mask = nn::local_dtensor(dt::zeros({3, 3}, dt::kInt64));
  CHECK_THROWS_WITH(m.forward(x, x, x, bad),
                    Catch::Contains("only bool and floating types of attn_mask"));
}

TEST_CASE("TransformerEncoderLayer's masks reach a checkpointed self_attn's recompute", "[nn]") {
  // self_attn runs through Module's call with the layer's masks as its forward context; a
  // checkpoint_wrapper on it recomputes under the same masks although a second forward (no
  // masks) ran in between.
  auto make = [] {
    auto l = std::make_shared<nn::TransformerEncoderLayer>(4, 2, 6, 0.0, "relu", 1e-5, false, false,
                                                           true, tt::f64());
    load(*l, "enc_post_relu");
    return l;
  };
  const std::string c = "enc_post_relu";
  auto plain = make(), wrapped = make();
  nn::checkpoint_wrapper(wrapped->get_submodule("self_attn"));
  std::vector<DTensor> srcs;
  for (auto* l : {plain.get(), wrapped.get()}) {
    const DTensor src = leaf(c + ".src");
    const DTensor out =
        l->forward(src, want_local(c + ".src_mask"), want_local(c + ".src_key_padding_mask"));
    (*l)(leaf(c + ".src"));  // another forward, no masks, its graph dropped
    dt::sum(dt::mul(out, want_local(c + ".cout"))).backward();
    srcs.push_back(src);
  }
  CHECK(tt::same_values(srcs[1].grad().to_local(), want(c + ".grad.src"), kTol));
  CHECK(tt::same_values(srcs[1].grad().to_local(), srcs[0].grad().to_local(), kTol));
}

TEST_CASE("TransformerDecoderLayer and TransformerDecoder give PyTorch's values", "[nn]") {
  constexpr int64_t E = 4, H = 2, FF = 6;
  struct Case {
    const char* name;
    std::string activation;
    bool batch_first, norm_first;
    int64_t layers;  // 0: the layer alone
  };
  const std::vector<Case> cases = {{"dec_post_relu", "relu", false, false, 0},
                                   {"dec_pre_gelu_bf_causal", "gelu", true, true, 0},
                                   {"decoder2", "gelu", false, true, 2}};
  for (const Case& k : cases) {
    const std::string c = k.name;
    INFO(c);
    nn::TransformerDecoderLayer layer(E, H, FF, 0.1, k.activation, 1e-5, k.batch_first,
                                      k.norm_first, true, tt::f64());
    nn::TransformerDecoder dec(layer, k.layers,
                               std::make_shared<nn::LayerNorm>(E, 1e-5, true, tt::f64()));
    nn::Module& m = k.layers > 0 ? static_cast<nn::Module&>(dec) : layer;
    load(m, c);
    m.eval();
    nn::TransformerDecoderArgs a;
    a.tgt_mask = want_local(c + ".tgt_mask");
    a.memory_mask = want_local(c + ".memory_mask");
    a.tgt_key_padding_mask = want_local(c + ".tgt_key_padding_mask");
    a.memory_key_padding_mask = want_local(c + ".memory_key_padding_mask");
    a.tgt_is_causal = c != "dec_post_relu";
    const DTensor tgt = leaf(c + ".tgt"), memory = leaf(c + ".memory");
    const DTensor out = k.layers > 0 ? dec.forward(tgt, memory, a) : layer.forward(tgt, memory, a);
    check(m, c, {{"tgt", tgt}, {"memory", memory}}, out, DTensor());
  }
  std::vector<std::string> children;
  const nn::TransformerDecoderLayer fresh(8, 2, 16);
  for (const auto& [n, ch] : fresh.named_children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"self_attn", "multihead_attn", "linear1", "dropout",
                                             "linear2", "norm1", "norm2", "norm3", "dropout1",
                                             "dropout2", "dropout3"});
  CHECK_THROWS_WITH(nn::TransformerDecoderLayer(8, 2, 16, 0.1, "silu"),
                    Catch::Contains("[TransformerDecoderLayer] activation should be relu/gelu, "
                                    "not silu"));
}

TEST_CASE("MultiheadAttention and the Transformer layers and stacks run their hooks on every call",
          "[nn]") {
  // PyTorch runs a module's hooks for every module(...) call; the args hooks see the positional
  // DTensor inputs ((q, k, v), (src), (tgt, memory)), not the masks (keyword arguments).
  std::vector<std::string> events;
  auto hook = [&events](nn::Module& m, double scale) {
    m.register_forward_pre_hook(
        [&events](nn::Module& mod,
                  absl::Span<const DTensor> args) -> std::optional<std::vector<DTensor>> {
          events.push_back(mod.type_name() + " pre " + std::to_string(args.size()));
          return std::nullopt;
        });
    m.register_forward_hook([&events, scale](nn::Module& mod, absl::Span<const DTensor> args,
                                             DTensor& out) -> std::optional<DTensor> {
      events.push_back(mod.type_name() + " hook " + std::to_string(args.size()));
      if (scale == 1) return std::nullopt;
      return dt::mul(out, dt::Scalar(scale));
    });
  };
  const DTensor x = nn::local_dtensor(tt::det_input({3, 2, 4}, 1, -1.0, 0.25).to(dt::kFloat64));
  const DTensor mem = nn::local_dtensor(tt::det_input({5, 2, 4}, 2, -1.0, 0.25).to(dt::kFloat64));
  // A causal mask (true: not allowed to attend).
  const DTensor mask =
      nn::local_dtensor(dt::from_vector<double>({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3}).to(dt::kBool));

  nn::MultiheadAttention mha(4, 2, 0.0, true, false, false, std::nullopt, std::nullopt, false,
                             tt::f64());
  const nn::MultiheadAttentionOutput want_mha = mha.forward(x, mem, mem);
  hook(mha, 2.0);
  // A pre-hook replacing key and value (the args form sees (q, k, v)).
  mha.register_forward_pre_hook(
      [&mem](nn::Module&, absl::Span<const DTensor> args) -> std::optional<std::vector<DTensor>> {
        return std::vector<DTensor>{args[0], mem, mem};
      });
  const nn::MultiheadAttentionOutput got_mha = mha(x, x, x);
  CHECK(events ==
        std::vector<std::string>{"MultiheadAttention pre 3", "MultiheadAttention hook 3"});
  CHECK(tt::same_values(got_mha.attn_output.to_local(),
                        dt::mul(want_mha.attn_output.to_local(), dt::Scalar(2.0)), 0));
  CHECK(tt::same_values(got_mha.attn_weights.to_local(), want_mha.attn_weights.to_local(), 0));

  // The encoder stack called with masks: its hooks and its layers' hooks run; the values are the
  // unhooked forward's (the hooks keep them).
  nn::TransformerEncoderLayer layer(4, 2, 6, 0.0, "relu", 1e-5, false, false, true, tt::f64());
  nn::TransformerEncoder enc(layer, 2);
  const DTensor want_enc = enc.forward(x, mask, DTensor(), true);
  hook(enc, 1.0);
  hook(enc.get_submodule("layers.1"), 1.0);
  hook(enc.get_submodule("layers.1.self_attn"), 1.0);
  events.clear();
  const DTensor got_enc = enc(x, mask, DTensor(), true);
  CHECK(events ==
        std::vector<std::string>{"TransformerEncoder pre 1", "TransformerEncoderLayer pre 1",
                                 "MultiheadAttention pre 1", "MultiheadAttention hook 1",
                                 "TransformerEncoderLayer hook 1", "TransformerEncoder hook 1"});
  CHECK(tt::same_values(got_enc.to_local(), want_enc.to_local(), 0));

  // The decoder: its hooks, its layers' and the cross-attention's (three inputs) run.
  nn::TransformerDecoderLayer dlayer(4, 2, 6, 0.0, "relu", 1e-5, false, false, true, tt::f64());
  nn::TransformerDecoder dec(dlayer, 1);
  nn::TransformerDecoderArgs da;
  da.tgt_mask = mask;
  const DTensor want_dec = dec.forward(x, mem, da);
  hook(dec, 1.0);
  hook(dec.get_submodule("layers.0"), 1.0);
  hook(dec.get_submodule("layers.0.multihead_attn"), 1.0);
  events.clear();
  const DTensor got_dec = dec(x, mem, da);
  CHECK(events ==
        std::vector<std::string>{"TransformerDecoder pre 2", "TransformerDecoderLayer pre 2",
                                 "MultiheadAttention pre 3", "MultiheadAttention hook 3",
                                 "TransformerDecoderLayer hook 2", "TransformerDecoder hook 2"});
  CHECK(tt::same_values(got_dec.to_local(), want_dec.to_local(), 0));

  // A backward hook on the three-input call sees one grad_input entry per input.
  size_t grad_inputs = 0;
  nn::MultiheadAttention mb(4, 2, 0.0, true, false, false, std::nullopt, std::nullopt, false,
                            tt::f64());
  mb.register_full_backward_hook(
      [&grad_inputs](nn::Module&, absl::Span<const DTensor> gi,
                     const DTensor&) -> std::optional<std::vector<DTensor>> {
        grad_inputs = gi.size();
        return std::nullopt;
      });
  DTensor q = nn::local_dtensor(x.to_local().clone());
  q.requires_grad_(true);
  dt::sum(mb(q, mem, mem).attn_output).backward();
  CHECK(grad_inputs == 3);
  CHECK(q.grad().defined());
}

TEST_CASE("TransformerEncoderLayer's and TransformerDecoderLayer's clones keep frozen parameters",
          "[nn]") {
  // PyTorch's deepcopy keeps requires_grad: a frozen layer's stack has frozen layers.
  nn::TransformerEncoderLayer layer(4, 2, 6);
  DTensor(layer.get_parameter("linear1.weight")).requires_grad_(false);
  DTensor(layer.get_parameter("self_attn.in_proj_weight")).requires_grad_(false);
  nn::TransformerEncoder enc(layer, 2);
  nn::TransformerDecoderLayer dlayer(4, 2, 6);
  DTensor(dlayer.get_parameter("multihead_attn.out_proj.bias")).requires_grad_(false);
  nn::TransformerDecoder dec(dlayer, 1);
  auto frozen = [](const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, p] : m.named_parameters()) {
      if (!p.requires_grad()) out.push_back(name);
    }
    return out;
  };
  CHECK(frozen(enc) ==
        std::vector<std::string>{"layers.0.self_attn.in_proj_weight", "layers.0.linear1.weight",
                                 "layers.1.self_attn.in_proj_weight", "layers.1.linear1.weight"});
  CHECK(frozen(dec) == std::vector<std::string>{"layers.0.multihead_attn.out_proj.bias"});
  CHECK(enc.named_parameters().size() == 24);
}
