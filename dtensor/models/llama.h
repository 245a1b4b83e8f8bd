// nn::Llama as Hugging Face transformers' LlamaForCausalLM computes it (issue 43 item 2):
// token embedding, decoder layers (RMSNorm, attention with grouped-query heads and rotary
// embeddings in the rotate_half convention, RMSNorm, SwiGLU MLP), final RMSNorm and the lm
// head (or the embedding table again when tie_word_embeddings). Meta's interleaved rotary
// convention is a config option (LlamaConfig::rotary_style). The module tree and parameter
// names are transformers' own, so a HF checkpoint loads by name (checkpoint::load_hf):
//   model.embed_tokens.weight                         [vocab, hidden]
//   model.layers.<i>.input_layernorm.weight           [hidden]
//   model.layers.<i>.self_attn.{q,k,v,o}_proj.weight  q [H * hd, hidden], k/v [Hkv * hd, hidden],
//                                                     o [hidden, H * hd]
//   model.layers.<i>.post_attention_layernorm.weight  [hidden]
//   model.layers.<i>.mlp.{gate,up,down}_proj.weight   gate/up [inter, hidden], down [hidden, inter]
//   model.norm.weight, lm_head.weight (absent when tied)
// Weights are drawn by the layers' usual seeded initialisation (checkpoints replace them).
// Parallelization: dtensor/models/llama_plan.h; the KV cache: dtensor/models/kv_cache.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/models/kv_cache.h"
#include "dtensor/models/llama_config.h"
#include "dtensor/models/llama_context_parallel.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/nn/transformer.h"

namespace dtensor::models {

namespace detail {
// What one Llama forward tells its layers besides the hidden states (a module's call takes one
// input, and the layers run through their calls so parallel styles' and FSDP's hooks apply):
// the rotary positions, the attention mask and the cache. Each forward makes a new one and
// never changes it after (LlamaStepSlot), so one a layer's recompute restores stays as it was.
struct LlamaStep {
  nn::functional::RotaryTables rotary;  // llama_rotary_tables (set once)
  KVCache* cache = nullptr;
  int64_t past = 0;  // tokens before this call's (the cache's position)
  // [B, S] int64 when rows have their own positions (a padding mask).
  std::optional<Tensor> position_ids;
  // bool [B, 1, S, past + S], true = attend: causal and padding together.
  std::optional<Tensor> mask;
  // No mask: causal, bottom-right aligned (query i sees keys j <= past + i).
  bool is_causal = false;
  // Set by parallelize_llama for a cp mesh dim: the layers see this rank's chunks of the
  // sequence, at their global positions (position_ids), and attention runs the ring.
  std::optional<LlamaContextParallel> cp;
};

// The rotary tables [positions, head_dim / 2] as transformers' LlamaRotaryEmbedding computes
// them: float32 inverse frequencies (LlamaConfig::rope_inv_freq_float32), float32 angles and
// float32 cos / sin, rounded to the activations' dtype where applied (HF's .to(x.dtype)).
nn::functional::RotaryTables llama_rotary_tables(const LlamaConfig& cfg, int64_t positions);

// The step of the forward running now, shared by the Llama and its layers; Llama installs a new
// step at the start of each forward.
struct LlamaStepSlot {
  std::shared_ptr<const LlamaStep> current;
};

// A module of the Llama that reads the step. Its forward context (nn::Module::forward_context)
// is the step, so a module recomputed in backward by activation checkpointing sees its own
// forward's positions and mask, whatever forwards ran since (gradient accumulation over padded
// micro-batches, an eval, pipeline micro-batches).
class LlamaStepModule : public nn::Module {
 public:
  explicit LlamaStepModule(std::shared_ptr<LlamaStepSlot> slot) : slot_(std::move(slot)) {}
  std::shared_ptr<const void> forward_context() const override { return slot_->current; }
  std::shared_ptr<const void> set_forward_context(std::shared_ptr<const void> context) override {
    std::shared_ptr<const void> previous = std::move(slot_->current);
    slot_->current = std::static_pointer_cast<const LlamaStep>(std::move(context));
    return previous;
  }

 protected:
  const std::shared_ptr<LlamaStepSlot>& slot() const { return slot_; }
  const LlamaStep& step() const { return *slot_->current; }

 private:
  std::shared_ptr<LlamaStepSlot> slot_;
};
}  // namespace detail

// down_proj(silu(gate_proj(x)) * up_proj(x)), no biases.
class LlamaMLP : public nn::Module {
 public:
  LlamaMLP(const LlamaConfig& cfg, nn::ModuleOptions opts);
  std::string type_name() const override { return "LlamaMLP"; }
  DTensor forward(const DTensor& x) override;

 private:
  std::shared_ptr<nn::Linear> gate_, up_, down_;
};

// Self-attention on x [B, S, hidden]: q/k/v projections viewed as [B, S, heads, head_dim],
// rotary (the config's rotary_style, rotate_half for HF checkpoints) on q and k at the step's
// positions, [B, heads, S, head_dim] through the cache when there is one,
// scaled_dot_product_attention with grouped-query heads (each kv head serves H / Hkv consecutive q
// heads), o_proj. Tensor parallel (llama_plan.h): q heads sharded over the ranks; kv heads sharded
// with them, or (kv_replicated) k/v computed whole on every rank and each rank taking the kv heads
// of its q heads locally.
class LlamaAttention : public detail::LlamaStepModule {
 public:
  LlamaAttention(const LlamaConfig& cfg, int64_t layer_idx,
                 std::shared_ptr<detail::LlamaStepSlot> step, nn::ModuleOptions opts);
  std::string type_name() const override { return "LlamaAttention"; }
  DTensor forward(const DTensor& x) override;
  // Refuses sharded projections whose shards would split a head (plans other than
  // parallelize_llama's): "[LlamaAttention] ...".
  void check_parallel() const override;
  // Set by parallelize_llama when the tensor-parallel degree does not divide the kv heads.
  void set_kv_replicated(bool replicated) { kv_replicated_ = replicated; }
  bool kv_replicated() const { return kv_replicated_; }

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_, layer_idx_;
  nn::functional::RotaryStyle rotary_style_;
  bool kv_replicated_ = false;
  std::shared_ptr<nn::Linear> q_, k_, v_, o_;
};

// h = x + self_attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)).
class LlamaDecoderLayer : public detail::LlamaStepModule {
 public:
  LlamaDecoderLayer(const LlamaConfig& cfg, int64_t layer_idx,
                    std::shared_ptr<detail::LlamaStepSlot> step, nn::ModuleOptions opts);
  std::string type_name() const override { return "LlamaDecoderLayer"; }
  DTensor forward(const DTensor& x) override;
  LlamaAttention& self_attn() { return *attn_; }

 private:
  nn::ModulePtr input_norm_, post_norm_, mlp_;
  std::shared_ptr<LlamaAttention> attn_;
};

// Token ids -> the final norm's hidden states: embed_tokens, layers.<i>, norm.
class LlamaModel : public detail::LlamaStepModule {
 public:
  LlamaModel(const LlamaConfig& cfg, std::shared_ptr<detail::LlamaStepSlot> step,
             nn::ModuleOptions opts);
  std::string type_name() const override { return "LlamaModel"; }
  DTensor forward(const DTensor& input_ids) override;
  nn::Embedding& embed_tokens() { return *embed_; }
  LlamaDecoderLayer& layer(int64_t i);

 private:
  friend class Llama;  // keep_pipeline_modules
  std::shared_ptr<nn::Embedding> embed_;
  std::shared_ptr<nn::ModuleList> layers_;
  nn::ModulePtr norm_;
};

// transformers' LlamaForCausalLM: children "model" (LlamaModel) and "lm_head" (untied).
class Llama : public nn::Module {
 public:
  explicit Llama(const LlamaConfig& cfg, nn::ModuleOptions opts = {});
  std::string type_name() const override { return "Llama"; }

  // input_ids [B, S] int64 (a local DTensor, or on the model's tensor-parallel mesh) -> logits
  // [B, S, vocab] (Replicate on the model's mesh; a local DTensor when unparallelized).
  // cache: the new tokens take positions [cache->position(), + S) (the rotary offset), their
  // k/v are written into the cache, attention runs over every cached position with a
  // bottom-right aligned causal mask, and the cache advances by S. attention_mask (int64 or
  // bool [B, past + S], 1 = attend, 0 = padding, local): HF's padding mask for left-padded
  // rows: a row's positions count from its first real token (HF's cumsum(mask) - 1) and no
  // query attends to a padded key. Logits of padded query positions are unspecified. Throws
  // "[Llama] ..." for shapes that do not fit.
  DTensor forward(const DTensor& input_ids, KVCache* cache, const DTensor& attention_mask = {});
  // Without cache or mask: what model(input_ids) runs (the call runs the hooks first).
  DTensor forward(const DTensor& input_ids) override;

  // A cache for `batch` rows (this rank's rows under data parallelism) of up to `max_len`
  // tokens, laid out like this model's k/v (its parallelization included: call it after
  // parallelize_llama), in the dtype the attention computes in: the parameters' dtype, or
  // FSDP's param_dtype under mixed precision (set_compute_dtype).
  KVCache make_cache(int64_t batch, int64_t max_len) const;

  const LlamaConfig& config() const { return cfg_; }
  LlamaModel& model() { return *model_; }
  const std::shared_ptr<nn::Linear>& lm_head() const { return lm_head_; }  // null when tied

  // Set by parallelize_llama: the mesh the layers compute on and k/v's placements on it.
  void set_kv_layout(const DeviceMesh& mesh, Placements placements);
  // Set by parallelize_llama under FSDP mixed precision (DataParallelOptions::param_dtype): the
  // dtype the layers compute in, so k / v and make_cache's buffers, when it is not the stored
  // parameters' dtype.
  void set_compute_dtype(DType dtype) { compute_dtype_ = dtype; }
  // Set by parallelize_llama for a cp mesh dim (llama_context_parallel.h): forward then takes
  // the whole rows [B, S] and returns the logits of this rank's chunks [B, S / cp, V] (the
  // head-tail order); causal_lm_loss(model, logits, labels) is their loss. A KV cache or an
  // attention_mask is refused.
  void set_context_parallel(detail::LlamaContextParallel cp);
  const detail::LlamaContextParallel* context_parallel() const {
    return step_->current->cp ? &*step_->current->cp : nullptr;
  }
  // Sets the step of a forward that runs the layers without this class's forward (a pipeline
  // stage, llama_pipeline.h): no cache, no mask, causal, for whole rows [batch, seq_len] (under
  // context parallelism this rank's chunks' positions).
  void prepare_training_step(int64_t batch, int64_t seq_len);
  // For pipeline_llama (llama_pipeline.h), torchtitan's pipeline split (`del model.layers[i]`,
  // embed_tokens / norm / lm_head = None): a rank keeps only its stages' modules. Decoder layer i
  // stays when keep_layer[i]; embed_tokens when keep_embed; norm and lm_head when keep_head. The
  // others leave the model (a placeholder whose call throws takes each one's place in the tree)
  // and their parameters are freed with them; this model's own forward then refuses to run.
  void keep_pipeline_modules(const std::vector<bool>& keep_layer, bool keep_embed, bool keep_head);
  // keep_pipeline_modules ran: some modules are gone (parallelize_llama / pipeline_llama refuse).
  bool released_modules() const { return pipeline_part_; }

 protected:
  // Tied (tie_word_embeddings): "lm_head.weight" is "model.embed_tokens.weight", as
  // transformers' _tied_weights_keys says, so load_hf accepts a file that also (or only) holds
  // lm_head.weight and save_hf writes the table once.
  std::vector<std::pair<std::string, std::string>> own_parameter_aliases() const override;

 private:
  // Sets the step (positions, mask, cache) the layers read for this call.
  void prepare_step(const DTensor& input_ids, KVCache* cache, const DTensor& attention_mask);
  DTensor run(const DTensor& input_ids);

  LlamaConfig cfg_;
  nn::ModuleOptions opts_;
  std::shared_ptr<detail::LlamaStepSlot> step_;
  std::shared_ptr<LlamaModel> model_;
  std::shared_ptr<nn::Linear> lm_head_;
  bool in_step_ = false;  // forward(ids, cache, mask) is running: its step is prepared
  // keep_pipeline_modules released some modules: forward refuses to run.
  bool pipeline_part_ = false;
  std::optional<DeviceMesh> kv_mesh_;
  Placements kv_placements_;
  std::optional<DType> compute_dtype_;
};

// HF's causal language-model loss (LlamaForCausalLM(labels=...)): cross_entropy of logits
// [B, S, V] at positions [0, S - 1) against labels [B, S] at [1, S) (labels shifted inside),
// the mean over the B * (S - 1) tokens; labels equal to ignore_index count in neither sum.
// labels: int64, local or on the logits' mesh.
DTensor causal_lm_loss(const DTensor& logits, const DTensor& labels, int64_t ignore_index = -100);
// The same for `model`'s logits: the above, or under context parallelism (logits of this rank's
// chunks, labels the whole rows [B, S]) the whole rows' loss on every cp rank, whose gradient
// is this rank's share scaled for data parallelism's average over dp x cp
// (detail::cp_causal_lm_loss).
DTensor causal_lm_loss(const Llama& model, const DTensor& logits, const DTensor& labels,
                       int64_t ignore_index = -100);

}  // namespace dtensor::models
