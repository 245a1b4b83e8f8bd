#include "dtensor/nn/transformer.h"

#include <string>

#include "dtensor/nn/functional.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

MLP::MLP(int64_t dim, int64_t hidden_dim, Activation activation, bool bias, ModuleOptions opts)
    : act_(activation) {
  fc1_ = std::make_shared<Linear>(dim, hidden_dim, bias, opts);
  fc2_ = std::make_shared<Linear>(hidden_dim, dim, bias, opts);
  register_module("fc1", fc1_);
  register_module("fc2", fc2_);
}

DTensor MLP::forward(const DTensor& x) {
  DTensor h = (*fc1_)(x);
  h = act_ == Activation::kGelu ? dtensor::gelu(h) : dtensor::silu(h);
  return (*fc2_)(h);
}

namespace {
// A Linear registered under `name` in `parent`.
std::shared_ptr<Linear> add_linear(Module& parent, const std::string& name, int64_t in, int64_t out,
                                   bool bias, const ModuleOptions& opts) {
  auto l = std::make_shared<Linear>(in, out, bias, opts);
  parent.register_module(name, l);
  return l;
}
}  // namespace

SwiGLU::SwiGLU(int64_t dim, int64_t hidden_dim, ModuleOptions opts) {
  w1_ = add_linear(*this, "w1", dim, hidden_dim, false, opts);
  w2_ = add_linear(*this, "w2", hidden_dim, dim, false, opts);
  w3_ = add_linear(*this, "w3", dim, hidden_dim, false, opts);
}

DTensor SwiGLU::forward(const DTensor& x) {
  return (*w2_)(dtensor::mul(dtensor::silu((*w1_)(x)), (*w3_)(x)));
}

Attention::Attention(int64_t dim, int64_t n_heads, bool causal, bool bias, ModuleOptions opts)
    : n_heads_(n_heads), causal_(causal) {
  DT_CHECK(n_heads > 0 && dim % n_heads == 0,
           "[Attention] dim %d must be divisible by n_heads %d (n_heads > 0)", dim, n_heads);
  head_dim_ = dim / n_heads;
  wq_ = add_linear(*this, "wq", dim, dim, bias, opts);
  wk_ = add_linear(*this, "wk", dim, dim, bias, opts);
  wv_ = add_linear(*this, "wv", dim, dim, bias, opts);
  wo_ = add_linear(*this, "wo", dim, dim, bias, opts);
}

void Attention::check_parallel() const {
  for (const Linear* l : {wq_.get(), wk_.get(), wv_.get()}) {
    const DTensor& w = l->param("weight");
    int64_t tp = 1;
    for (size_t i = 0; i < w.placements().size(); ++i) {
      if (w.placements()[i].is_shard(0)) tp *= w.device_mesh().size(static_cast<int64_t>(i));
    }
    DT_CHECK(n_heads_ % tp == 0,
             "[Attention] n_heads %d is not divisible by the tensor-parallel size %d of the "
             "colwise q/k/v projections (expected n_heads %% tp == 0)",
             n_heads_, tp);
  }
}

DTensor Attention::forward(const DTensor& x) {
  check_parallel();
  DTensor q = (*wq_)(x);
  DTensor k = (*wk_)(x);
  DTensor v = (*wv_)(x);
  DTensor o = functional::packed_heads_attention(q, k, v, head_dim_, causal_);
  return (*wo_)(o);
}

namespace detail {
ModulePtr make_norm(const TransformerConfig& cfg, int64_t dim, const ModuleOptions& opts) {
  if (cfg.norm == NormKind::kLayerNorm) {
    return std::make_shared<LayerNorm>(dim, cfg.norm_eps, true, opts);
  }
  return std::make_shared<RMSNorm>(dim, cfg.norm_eps, opts);
}
}  // namespace detail

TransformerBlock::TransformerBlock(const TransformerConfig& cfg, ModuleOptions opts) {
  const int64_t hidden = cfg.hidden_dim > 0 ? cfg.hidden_dim : 4 * cfg.dim;
  attention_norm_ = register_module("attention_norm", detail::make_norm(cfg, cfg.dim, opts));
  attention_ = register_module(
      "attention", std::make_shared<Attention>(cfg.dim, cfg.n_heads, cfg.causal, cfg.bias, opts));
  mlp_norm_ = register_module("mlp_norm", detail::make_norm(cfg, cfg.dim, opts));
  if (cfg.mlp == MLPKind::kSwiGLU) {
    mlp_ = register_module("mlp", std::make_shared<SwiGLU>(cfg.dim, hidden, opts));
  } else {
    const Activation act = cfg.mlp == MLPKind::kGelu ? Activation::kGelu : Activation::kSilu;
    mlp_ = register_module("mlp", std::make_shared<MLP>(cfg.dim, hidden, act, cfg.bias, opts));
  }
}

DTensor TransformerBlock::forward(const DTensor& x) {
  DTensor h = dtensor::add(x, (*attention_)((*attention_norm_)(x)));
  return dtensor::add(h, (*mlp_)((*mlp_norm_)(h)));
}

void ModuleList::append(ModulePtr m) {
  register_module(std::to_string(size()), std::move(m));
}

DTensor ModuleList::forward(const DTensor& x) {
  DTensor h = x;
  for (auto& [name, m] : named_children()) h = (*m)(h);
  return h;
}

Transformer::Transformer(const TransformerConfig& cfg, ModuleOptions opts) : cfg_(cfg) {
  DT_CHECK(cfg.n_layers >= 0, "[Transformer] n_layers %d must be >= 0", cfg.n_layers);
  tok_embeddings_ =
      register_module("tok_embeddings", std::make_shared<Embedding>(cfg.vocab_size, cfg.dim, opts));
  DT_CHECK(cfg.max_seq_len >= 0, "[Transformer] max_seq_len %d must be >= 0", cfg.max_seq_len);
  if (cfg.max_seq_len > 0) {
    pos_embeddings_ = register_module("pos_embeddings",
                                      std::make_shared<Embedding>(cfg.max_seq_len, cfg.dim, opts));
  }
  auto layers = std::make_shared<ModuleList>();
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    layers->append(std::make_shared<TransformerBlock>(cfg, opts));
  }
  layers_ = register_module("layers", layers);
  norm_ = register_module("norm", detail::make_norm(cfg, cfg.dim, opts));
  output_ =
      register_module("output", std::make_shared<Linear>(cfg.dim, cfg.vocab_size, false, opts));
}

DTensor Transformer::forward(const DTensor& tokens) {
  DTensor h = (*tok_embeddings_)(tokens);
  if (pos_embeddings_ != nullptr) {
    DT_CHECK(tokens.dim() == 2 && tokens.size(1) <= cfg_.max_seq_len,
             "[Transformer] tokens of shape %s: expected [batch, seq] with seq <= max_seq_len %d",
             shape_str(tokens.shape()), cfg_.max_seq_len);
    const Tensor positions =
        arange(tokens.size(1), TensorOptions(DType::kInt64, tokens.to_local().device()));
    // A constant of the (guarded) sequence length: a captured step keeps reading this one.
    dtensor::detail::keep_in_capture(positions);
    h = dtensor::add(h, (*pos_embeddings_)(local_dtensor(positions)));  // [seq, dim] broadcast
  }
  h = (*layers_)(h);
  h = (*norm_)(h);
  return (*output_)(h);
}

}  // namespace dtensor::nn
