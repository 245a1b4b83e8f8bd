#include "dtensor/models/llama.h"

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "dtensor/autograd/grad_mode.h"
#include "dtensor/nn/activation_checkpoint.h"
#include "dtensor/nn/detail/rotary.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::models {

namespace fn = nn::functional;

namespace {
std::shared_ptr<nn::Linear> add_linear(nn::Module& parent, const std::string& name, int64_t in,
                                       int64_t out, const nn::ModuleOptions& opts) {
  auto l = std::make_shared<nn::Linear>(in, out, /*bias=*/false, opts);
  parent.register_module(name, l);
  return l;
}

// The tensor-parallel degree of a colwise weight: the product of the mesh dims sharding dim 0.
int64_t row_shards(const DTensor& w) {
  int64_t n = 1;
  for (size_t i = 0; i < w.placements().size(); ++i) {
    if (w.placements()[i].is_shard(0)) n *= w.device_mesh().size(static_cast<int64_t>(i));
  }
  return n;
}
}  // namespace

LlamaMLP::LlamaMLP(const LlamaConfig& cfg, nn::ModuleOptions opts) {
  gate_ = add_linear(*this, "gate_proj", cfg.hidden_size, cfg.intermediate_size, opts);
  up_ = add_linear(*this, "up_proj", cfg.hidden_size, cfg.intermediate_size, opts);
  down_ = add_linear(*this, "down_proj", cfg.intermediate_size, cfg.hidden_size, opts);
}

DTensor LlamaMLP::forward(const DTensor& x) {
  return (*down_)(fn::swiglu((*gate_)(x), (*up_)(x)));
}

LlamaAttention::LlamaAttention(const LlamaConfig& cfg, int64_t layer_idx,
                               std::shared_ptr<detail::LlamaStepSlot> step, nn::ModuleOptions opts)
    : LlamaStepModule(std::move(step)),
      n_heads_(cfg.num_attention_heads),
      n_kv_heads_(cfg.num_key_value_heads),
      head_dim_(cfg.head_dim),
      layer_idx_(layer_idx),
      rotary_style_(cfg.rotary_style) {
  const int64_t h = cfg.hidden_size;
  q_ = add_linear(*this, "q_proj", h, n_heads_ * head_dim_, opts);
  k_ = add_linear(*this, "k_proj", h, n_kv_heads_ * head_dim_, opts);
  v_ = add_linear(*this, "v_proj", h, n_kv_heads_ * head_dim_, opts);
  o_ = add_linear(*this, "o_proj", n_heads_ * head_dim_, h, opts);
}

void LlamaAttention::check_parallel() const {
  const int64_t tp_q = row_shards(q_->param("weight"));
  DT_CHECK(n_heads_ % tp_q == 0,
           "[LlamaAttention] layer %d: num_attention_heads %d is not divisible by the %d shards "
           "of q_proj (a shard would split a head)",
           layer_idx_, n_heads_, tp_q);
  for (const nn::Linear* l : {k_.get(), v_.get()}) {
    const int64_t tp_kv = row_shards(l->param("weight"));
    DT_CHECK(n_kv_heads_ % tp_kv == 0,
             "[LlamaAttention] layer %d: num_key_value_heads %d is not divisible by the %d "
             "shards of k_proj / v_proj (replicate them instead: parallelize_llama does)",
             layer_idx_, n_kv_heads_, tp_kv);
  }
}

DTensor LlamaAttention::forward(const DTensor& x) {
  const detail::LlamaStep& st = step();
  DT_CHECK(x.dim() == 3, "[LlamaAttention] x has shape %s, expected [batch, seq, hidden]",
           shape_str(x.shape()));
  const int64_t B = x.size(0), S = x.size(1);
  auto heads = [&](const DTensor& t, int64_t n) {
    const int64_t shape[] = {B, S, n, head_dim_};
    return reshape(t, shape);
  };
  // HF checkpoints are trained for the rotate_half pairing (LlamaConfig::rotary_style).
  auto rope = [&](const DTensor& t) {
    return st.position_ids ? fn::apply_rotary_emb(t, st.rotary, *st.position_ids, rotary_style_)
                           : fn::apply_rotary_emb(t, st.rotary, st.past, rotary_style_);
  };
  const DTensor q = transpose(rope(heads((*q_)(x), n_heads_)), 1, 2);  // [B, H, S, hd]
  DTensor k = transpose(rope(heads((*k_)(x), n_kv_heads_)), 1, 2);     // [B, Hkv, S, hd]
  DTensor v = transpose(heads((*v_)(x), n_kv_heads_), 1, 2);
  if (st.cache != nullptr) std::tie(k, v) = st.cache->update(layer_idx_, k, v);
  bool gqa = n_heads_ != n_kv_heads_;
  if (kv_replicated_) {
    // Every rank holds all kv heads (Replicate); repeating them per q head and cutting the
    // result like q's heads (Replicate -> Shard(1): a local slice) gives each rank the kv heads
    // of its own q heads with no communication.
    if (gqa) {
      k = repeat_interleave(k, n_heads_ / n_kv_heads_, 1);
      v = repeat_interleave(v, n_heads_ / n_kv_heads_, 1);
      gqa = false;
    }
    k = k.redistribute(q.device_mesh(), q.placements());
    v = v.redistribute(q.device_mesh(), q.placements());
  }
  DTensor mask;
  if (st.mask) {
    // The step's [B, 1, S, T] mask as it is: the attention op broadcasts it over the heads
    // (whole on every rank when they are sharded), so no layer expands it to [B, H, S, T].
    const DeviceMesh& mesh = q.device_mesh();
    mask = DTensor::from_local(*st.mask, mesh,
                               Placements(static_cast<size_t>(mesh.ndim()), Replicate()));
  }
  const DTensor o =
      st.cp ? detail::cp_attention(q, k, v, gqa, *st.cp)  // this rank's chunks, the ring
            : fn::scaled_dot_product_attention(q, k, v, mask, 0.0, st.is_causal, std::nullopt, gqa,
                                               nullptr,
                                               CausalAlign::kLowerRight);  // [B, H, S, hd]
  const int64_t merged[] = {B, S, n_heads_ * head_dim_};
  return (*o_)(reshape(transpose(o, 1, 2), merged));
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& cfg, int64_t layer_idx,
                                     std::shared_ptr<detail::LlamaStepSlot> step,
                                     nn::ModuleOptions opts)
    : LlamaStepModule(step) {
  input_norm_ = register_module(
      "input_layernorm", std::make_shared<nn::RMSNorm>(cfg.hidden_size, cfg.rms_norm_eps, opts));
  attn_ = std::make_shared<LlamaAttention>(cfg, layer_idx, std::move(step), opts);
  register_module("self_attn", attn_);
  post_norm_ =
      register_module("post_attention_layernorm",
                      std::make_shared<nn::RMSNorm>(cfg.hidden_size, cfg.rms_norm_eps, opts));
  mlp_ = register_module("mlp", std::make_shared<LlamaMLP>(cfg, opts));
}

DTensor LlamaDecoderLayer::forward(const DTensor& x) {
  const DTensor h = add(x, (*attn_)((*input_norm_)(x)));
  return add(h, (*mlp_)((*post_norm_)(h)));
}

LlamaModel::LlamaModel(const LlamaConfig& cfg, std::shared_ptr<detail::LlamaStepSlot> step,
                       nn::ModuleOptions opts)
    : LlamaStepModule(step) {
  embed_ = std::make_shared<nn::Embedding>(cfg.vocab_size, cfg.hidden_size, opts);
  register_module("embed_tokens", embed_);
  layers_ = std::make_shared<nn::ModuleList>();
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    layers_->append(std::make_shared<LlamaDecoderLayer>(cfg, i, step, opts));
  }
  register_module("layers", layers_);
  norm_ = register_module("norm",
                          std::make_shared<nn::RMSNorm>(cfg.hidden_size, cfg.rms_norm_eps, opts));
}

DTensor LlamaModel::forward(const DTensor& input_ids) {
  return (*norm_)((*layers_)((*embed_)(input_ids)));
}

LlamaDecoderLayer& LlamaModel::layer(int64_t i) {
  return static_cast<LlamaDecoderLayer&>(layers_->get_submodule(std::to_string(i)));
}

Llama::Llama(const LlamaConfig& cfg, nn::ModuleOptions opts)
    : cfg_(cfg), opts_(opts), step_(std::make_shared<detail::LlamaStepSlot>()) {
  cfg_.validate();
  auto first = std::make_shared<detail::LlamaStep>();
  first->rotary = detail::llama_rotary_tables(cfg_, cfg_.max_position_embeddings);
  step_->current = std::move(first);
  model_ = std::make_shared<LlamaModel>(cfg_, step_, opts);
  register_module("model", model_);
  if (!cfg_.tie_word_embeddings) {
    lm_head_ = add_linear(*this, "lm_head", cfg_.hidden_size, cfg_.vocab_size, opts);
  }
}

namespace detail {
fn::RotaryTables llama_rotary_tables(const LlamaConfig& cfg, int64_t positions) {
  // float32 as transformers' inv_freq @ position_ids, then cos / sin in float32.
  const std::vector<float> inv = cfg.rope_inv_freq_float32();
  return nn::detail::rotary_cos_sin<float>(inv, positions);
}
}  // namespace detail

namespace {
// The step of a call with a padding mask m [B, T] (T = past + S): HF's positions
// (cumsum(m) - 1, and 1 where m is 0, as generate's prepare_inputs) for the last S columns,
// and the bool mask [B, 1, S, T]: key j is seen by query i when j <= past + i and m[b, j].
void padded_step(const Tensor& m, int64_t past, int64_t S, detail::LlamaStep& st) {
  const int64_t B = m.size(0), T = m.size(1);
  const std::vector<int64_t> v = m.to(Device(kCPU), kInt64).contiguous().to_vector<int64_t>();
  std::vector<int64_t> pos(static_cast<size_t>(B * S));
  std::vector<int32_t> seen(static_cast<size_t>(B * S * T), 0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t count = 0;
    for (int64_t j = 0; j < T; ++j) {
      const bool real = v[static_cast<size_t>(b * T + j)] != 0;
      count += real ? 1 : 0;
      if (j >= past) pos[static_cast<size_t>(b * S + j - past)] = real ? count - 1 : 1;
      for (int64_t i = 0; i < S; ++i) {
        if (real && j <= past + i) seen[static_cast<size_t>((b * S + i) * T + j)] = 1;
      }
    }
  }
  const int64_t pshape[] = {B, S};
  const int64_t mshape[] = {B, 1, S, T};
  st.position_ids = from_vector(pos, pshape);
  st.mask = from_vector(seen, mshape).to(kBool);
}

// Whether activation checkpointing wraps a module of `root`'s tree.
bool any_checkpoint_wrapped(nn::Module& root) {
  for (auto& [fqn, m] : root.named_modules()) {
    if (nn::is_checkpoint_wrapped(*m)) return true;
  }
  return false;
}

// A local DTensor's tensor, or the full value of one on a mesh.
Tensor whole(const DTensor& x) {
  return is_local(x) ? x.to_local() : x.full_tensor();
}
}  // namespace

void Llama::prepare_step(const DTensor& input_ids, KVCache* cache, const DTensor& attention_mask) {
  DT_CHECK(input_ids.defined() && input_ids.dim() == 2 && input_ids.dtype() == kInt64,
           "[Llama] input_ids must be int64 [batch, seq], got %s",
           input_ids.defined() ? shape_str(input_ids.shape()) : std::string("undefined"));
  const int64_t B = input_ids.size(0), S = input_ids.size(1);
  const int64_t past = cache != nullptr ? cache->position() : 0;
  DT_CHECK(cache == nullptr || cache->batch() == B, "[Llama] the cache holds %d rows, input_ids %d",
           cache ? cache->batch() : 0, B);
  // A new step (the model's rotary tables and cp layout carried over): the previous one may be
  // the forward context of layers awaiting their recompute.
  auto next = std::make_shared<detail::LlamaStep>();
  next->rotary = step_->current->rotary;
  next->cp = step_->current->cp;
  detail::LlamaStep& st = *next;
  st.cache = cache;
  st.past = past;
  if (st.cp) {
    // Positions from each chunk's global offsets; the ring is causal over the whole rows.
    DT_CHECK(cache == nullptr && !attention_mask.defined(),
             "[Llama] context parallel (cp = %d): a KV cache and an attention_mask are not "
             "supported (decode without the cp dim: the cache holds whole sequences)",
             st.cp->cp);
    st.position_ids = detail::cp_position_ids(B, S, *st.cp);
    st.is_causal = true;
  } else if (attention_mask.defined()) {
    const Tensor m = whole(attention_mask);
    DT_CHECK(m.dim() == 2 && m.size(0) == B && m.size(1) == past + S &&
                 (m.dtype() == kInt64 || m.dtype() == kInt32 || m.dtype() == kBool),
             "[Llama] attention_mask has shape %s and dtype %s, expected int64 or bool [%d, %d] "
             "(batch, cached + new tokens)",
             shape_str(m.shape()), dtype_name(m.dtype()), B, past + S);
    padded_step(m, past, S, st);
  } else {
    st.is_causal = true;  // bottom-right aligned: the new tokens follow the cached ones
  }
  step_->current = std::move(next);
}

DTensor Llama::forward(const DTensor& input_ids, KVCache* cache, const DTensor& attention_mask) {
  // A checkpointed layer's recompute would write its k/v into the cache again, at a position
  // the cache has moved past (and the cache may be gone by then).
  DT_CHECK(cache == nullptr || !autograd::grad_enabled() || !any_checkpoint_wrapped(*this),
           "[Llama] a forward with a KV cache and grad enabled on a model with activation "
           "checkpointing: the recompute in backward cannot replay the cache's update (run "
           "decoding under NoGradGuard, or remove the checkpoint wrappers)");
  prepare_step(input_ids, cache, attention_mask);
  in_step_ = true;
  struct Done {
    Llama& m;
    ~Done() {
      m.in_step_ = false;
      // The cache is the caller's: later steps do not see it (positions and mask stay).
      auto without_cache = std::make_shared<detail::LlamaStep>(*m.step_->current);
      without_cache->cache = nullptr;
      m.step_->current = std::move(without_cache);
    }
  } done{*this};
  DTensor logits = (*this)(input_ids);  // the call: hooks on the root (FSDP's) run
  if (cache != nullptr) cache->advance(input_ids.size(1));
  return logits;
}

DTensor Llama::forward(const DTensor& input_ids) {
  // Reached through the call: from the form above (its step is prepared), or model(ids).
  if (!in_step_) prepare_step(input_ids, nullptr, DTensor());
  return run(input_ids);
}

DTensor Llama::run(const DTensor& input_ids) {
  DT_CHECK(!pipeline_part_,
           "[Llama] this model holds only this rank's pipeline stages' modules "
           "(pipeline_llama released the others): run it through the stages' schedule");
  const std::optional<detail::LlamaContextParallel>& cp = step_->current->cp;
  const DTensor h = (*model_)(cp ? detail::cp_input_ids(input_ids, *cp) : input_ids);
  if (lm_head_ != nullptr) return (*lm_head_)(h);
  // Tied: the embedding table is the output projection. Under tensor parallelism the table is
  // vocab-sharded, so the logits come out vocab-sharded and are gathered like lm_head's.
  const DTensor& w = model_->embed_tokens().param("weight");
  DTensor logits = linear(h, fn::on_mesh(w, h.device_mesh(), "Llama", "the tied embedding"));
  const Placements whole_p(logits.placements().size(), Replicate());
  return logits.placements() == whole_p ? logits : logits.redistribute(whole_p);
}

void Llama::prepare_training_step(int64_t batch, int64_t seq_len) {
  auto next = std::make_shared<detail::LlamaStep>();
  next->rotary = step_->current->rotary;
  next->cp = step_->current->cp;
  next->is_causal = true;
  if (next->cp) next->position_ids = detail::cp_position_ids(batch, seq_len, *next->cp);
  step_->current = std::move(next);
}

namespace {

// What stands, in a pipelined Llama's tree, for a module another rank's stage holds.
class ReleasedModule : public nn::Module {
 public:
  explicit ReleasedModule(std::string fqn) : fqn_(std::move(fqn)) {}
  std::string type_name() const override { return "ReleasedModule"; }
  DTensor forward(const DTensor& /*x*/) override {
    DT_FAIL("[Llama] %s lives on another rank's pipeline stage (pipeline_llama released it here)",
            fqn_);
  }

 private:
  std::string fqn_;
};

}  // namespace

void Llama::keep_pipeline_modules(const std::vector<bool>& keep_layer, bool keep_embed,
                                  bool keep_head) {
  DT_CHECK(static_cast<int64_t>(keep_layer.size()) == cfg_.num_hidden_layers,
           "[Llama] keep_pipeline_modules: %d layer flags for %d decoder layers", keep_layer.size(),
           cfg_.num_hidden_layers);
  const auto release = [](nn::Module& parent, const std::string& name, const std::string& fqn) {
    parent.register_module(name, std::make_shared<ReleasedModule>(fqn));
  };
  for (size_t i = 0; i < keep_layer.size(); ++i) {
    if (!keep_layer[i]) {
      const std::string at = std::to_string(i);
      release(*model_->layers_, at, "model.layers." + at);
    }
  }
  if (!keep_embed) {
    release(*model_, "embed_tokens", "model.embed_tokens");
    model_->embed_ = nullptr;
  }
  if (!keep_head) {
    release(*model_, "norm", "model.norm");
    model_->norm_ = nullptr;
    if (lm_head_ != nullptr) release(*this, "lm_head", "lm_head");
    lm_head_ = nullptr;
  }
  pipeline_part_ = true;
}

void Llama::set_context_parallel(detail::LlamaContextParallel cp) {
  auto next = std::make_shared<detail::LlamaStep>(*step_->current);
  next->cp = std::move(cp);
  step_->current = std::move(next);
}

std::vector<std::pair<std::string, std::string>> Llama::own_parameter_aliases() const {
  if (!cfg_.tie_word_embeddings) return {};
  return {{"lm_head.weight", "model.embed_tokens.weight"}};
}

void Llama::set_kv_layout(const DeviceMesh& mesh, Placements placements) {
  kv_mesh_ = mesh;
  kv_placements_ = std::move(placements);
}

KVCache Llama::make_cache(int64_t batch, int64_t max_len) const {
  const DeviceMesh& mesh = kv_mesh_ ? *kv_mesh_ : self_mesh(opts_.device.type);
  const Placements placements =
      kv_mesh_ ? kv_placements_ : Placements(static_cast<size_t>(mesh.ndim()), Replicate());
  return KVCache(cfg_.num_hidden_layers, batch, cfg_.num_key_value_heads, max_len, cfg_.head_dim,
                 compute_dtype_.value_or(opts_.dtype), mesh, placements);
}

DTensor causal_lm_loss(const DTensor& logits, const DTensor& labels, int64_t ignore_index) {
  DT_CHECK(logits.defined() && labels.defined() && logits.dim() == 3 && labels.dim() == 2 &&
               labels.size(0) == logits.size(0) && labels.size(1) == logits.size(1) &&
               logits.size(1) >= 2,
           "[causal_lm_loss] logits %s and labels %s: expected [B, S, V] and [B, S] with S >= 2",
           logits.defined() ? shape_str(logits.shape()) : std::string("undefined"),
           labels.defined() ? shape_str(labels.shape()) : std::string("undefined"));
  const int64_t B = logits.size(0), S = logits.size(1), V = logits.size(2);
  const int64_t flat_logits[] = {B * (S - 1), V};
  const int64_t flat_labels[] = {B * (S - 1)};
  const DTensor x = reshape(slice(logits, 1, 0, S - 1), flat_logits);
  const DTensor t =
      reshape(slice(fn::on_mesh(labels, logits.device_mesh(), "causal_lm_loss", "labels"), 1, 1, S),
              flat_labels);
  return cross_entropy(x, t, Reduction::kMean, ignore_index);
}

DTensor causal_lm_loss(const Llama& model, const DTensor& logits, const DTensor& labels,
                       int64_t ignore_index) {
  const detail::LlamaContextParallel* cp = model.context_parallel();
  return cp != nullptr ? detail::cp_causal_lm_loss(logits, labels, ignore_index, *cp)
                       : causal_lm_loss(logits, labels, ignore_index);
}

}  // namespace dtensor::models
