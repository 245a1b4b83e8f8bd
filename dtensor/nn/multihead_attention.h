// torch.nn.MultiheadAttention: PyTorch 2.15's parameters, names, initial values and forward
// (F.multi_head_attention_forward's slow path), composed of the DTensor ops (linear, narrow,
// view / permute, cat, matmul, softmax, dropout, mean, scaled_dot_product_attention), so autograd
// and the sharding of the inputs come from the ops: a batch-sharded input (Shard on the batch dim)
// with replicated parameters keeps its shards and needs no communication in forward.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dtensor/nn/layers.h"

namespace dtensor::nn {

// forward's keyword arguments (PyTorch's names and defaults). Masks may be local DTensors
// (nn::local_dtensor; taken as Replicate on the input's mesh) or on the input's mesh.
//   key_padding_mask: [N, S] ([S] unbatched); bool (true: the key is ignored) or of the query's
//     floating dtype (added to the scores).
//   attn_mask: [L, S] or [N * num_heads, L, S] ([num_heads, L, S] unbatched); bool (true: not
//     allowed to attend) or floating (added). Note: the opposite of scaled_dot_product_attention's
//     bool masks, as in PyTorch.
//   need_weights: also return the attention weights (softmax of the scores, after dropout),
//     [N, L, S] averaged over the heads when average_attn_weights, else [N, num_heads, L, S].
//   is_causal: a hint that attn_mask is the causal mask (it must be given, as in PyTorch); when
//     no key_padding_mask is given and need_weights is false, the mask is dropped and attention
//     runs causal.
struct MultiheadAttentionArgs {
  DTensor key_padding_mask;
  bool need_weights = true;
  DTensor attn_mask;
  bool average_attn_weights = true;
  bool is_causal = false;
};

// attn_output [L, N, E] (batch_first: [N, L, E]; unbatched: [L, E]); attn_weights undefined when
// need_weights is false.
struct MultiheadAttentionOutput {
  DTensor attn_output;
  DTensor attn_weights;
};

// Parameters (PyTorch's names): in_proj_weight [3E, E] when kdim == vdim == E, else
// q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim]; in_proj_bias [3E] when
// bias; bias_k, bias_v [1, 1, E] when add_bias_kv; the child Linear out_proj (E -> E, bias when
// bias). Initial values as PyTorch's _reset_parameters: xavier_uniform_ on the projections, zero
// in_proj_bias and out_proj.bias, xavier_normal_ on bias_k / bias_v, out_proj.weight as a Linear's
// (PyTorch's NonDynamicallyQuantizableLinear is a Linear); reset_parameters redraws the same way.
// kdim / vdim: nullopt means embed_dim. dropout: on the attention weights while training (the
// default generator of the input's device). embed_dim must be divisible by num_heads.
//
// The query is [L, N, E] (batch_first: [N, L, E]) or unbatched [L, E]; key [S, N, kdim], value
// [S, N, vdim] alike. forward(x) (Module's, what a parent calls through operator(), so hooks and
// data-parallel wrapping run) is self-attention with need_weights false and the masks of the
// module's forward context (see set_forward_context; none by default).
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool add_bias_kv = false, bool add_zero_attn = false,
                     std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt, bool batch_first = false,
                     ModuleOptions opts = {});
  std::string type_name() const override { return "MultiheadAttention"; }
  // PyTorch's forward: the computation, without this module's hooks.
  MultiheadAttentionOutput forward(const DTensor& query, const DTensor& key, const DTensor& value,
                                   const MultiheadAttentionArgs& args = {});
  DTensor forward(const DTensor& x) override;
  // PyTorch's module(query, key, value, ...): forward through this module's hooks
  // (Module::call_with_hooks). The args forms see (query, key, value), PyTorch's args tuple; the
  // masks and flags are PyTorch's keyword arguments, which hooks do not see (as PyTorch's hooks
  // registered without with_kwargs). The forward hooks see and may replace attn_output (the
  // output whose gradient the backward hooks see); attn_weights are returned beside it. A
  // one-input hook raises at this call (three inputs); module(x) is self-attention (forward(x)).
  using Module::operator();
  MultiheadAttentionOutput operator()(const DTensor& query, const DTensor& key,
                                      const DTensor& value,
                                      const MultiheadAttentionArgs& args = {});
  // The forward context is a std::shared_ptr<const MultiheadAttentionArgs>: the masks and
  // is_causal forward(x) uses (its need_weights is ignored). A parent sets it around its call
  // (TransformerEncoderLayer); activation checkpointing restores it for the recompute.
  std::shared_ptr<const void> forward_context() const override { return call_args_; }
  std::shared_ptr<const void> set_forward_context(std::shared_ptr<const void> context) override;

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return embed_dim_ / num_heads_; }
  int64_t kdim() const { return kdim_; }
  int64_t vdim() const { return vdim_; }
  double dropout() const { return dropout_; }
  bool batch_first() const { return batch_first_; }
  bool add_zero_attn() const { return add_zero_attn_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  bool qkv_same_embed_dim() const { return kdim_ == embed_dim_ && vdim_ == embed_dim_; }

  int64_t embed_dim_, num_heads_, kdim_, vdim_;
  double dropout_;
  bool add_zero_attn_, batch_first_;
  std::shared_ptr<Linear> out_proj_;
  std::shared_ptr<const MultiheadAttentionArgs> call_args_;
};

}  // namespace dtensor::nn
