// torch.nn.TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer and
// TransformerDecoder (PyTorch 2.15's child names, arguments and slow-path forward), composed of
// MultiheadAttention, Linear, LayerNorm and Dropout, so a batch-sharded input keeps its shards as
// those modules do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/nn/basic_layers.h"
#include "dtensor/nn/multihead_attention.h"

namespace dtensor::nn {

namespace detail {
// The constructor arguments of the encoder and decoder layers (kept for clone()).
struct TransformerLayerConfig {
  int64_t d_model, nhead, dim_feedforward;
  double dropout;
  std::string activation;
  double layer_norm_eps;
  bool batch_first, norm_first, bias;
  ModuleOptions opts;
};

// What TransformerEncoderLayer and TransformerEncoder share: the masked calls and the forward
// context they set. mask: self_attn's attn_mask ([S, S] or [N * nhead, S, S]; PyTorch's src_mask
// of the layer, mask of the stack), src_key_padding_mask its key_padding_mask ([N, S]); bool
// (true: masked) or floating (added). is_causal: the hint that mask is causal
// (MultiheadAttentionArgs). forward(src, ...) runs forward(src) with these masks as the forward
// context; operator() runs it through the module's hooks (the args forms see (src)).
class MaskedEncoderModule : public Module {
 public:
  using Module::forward;
  DTensor forward(const DTensor& src, const DTensor& mask, const DTensor& src_key_padding_mask = {},
                  bool is_causal = false);
  using Module::operator();
  DTensor operator()(const DTensor& src, const DTensor& mask,
                     const DTensor& src_key_padding_mask = {}, bool is_causal = false);
  // A std::shared_ptr<const MultiheadAttentionArgs> (attn_mask, key_padding_mask, is_causal);
  // none by default.
  std::shared_ptr<const void> forward_context() const override { return call_args_; }
  std::shared_ptr<const void> set_forward_context(std::shared_ptr<const void> context) override;

 protected:
  // The masks of the forward context (null: none).
  const std::shared_ptr<const MultiheadAttentionArgs>& call_args() const { return call_args_; }

 private:
  std::shared_ptr<const MultiheadAttentionArgs> call_args_;
};
}  // namespace detail

// Children (PyTorch's): self_attn (MultiheadAttention(d_model, nhead, dropout, bias,
// batch_first)), linear1 (d_model -> dim_feedforward), dropout, linear2 (dim_feedforward ->
// d_model), norm1, norm2 (LayerNorm(d_model, layer_norm_eps, bias)), dropout1, dropout2.
//   norm_first false: x = norm1(x + sa(x)); x = norm2(x + ff(x))
//   norm_first true:  x = x + sa(norm1(x)); x = x + ff(norm2(x))
// sa(x) = dropout1(self_attn(x, x, x, masks, need_weights=false)); ff(x) =
// dropout2(linear2(dropout(act(linear1(x))))). activation: "relu" or "gelu" (exact erf form;
// PyTorch's callable activations are not offered). src is [S, N, d_model] (batch_first:
// [N, S, d_model]) or unbatched [S, d_model]. PyTorch's fast path (eval, no grad, nested
// tensors) is not taken: its numbers are the slow path's, except that the nested-tensor path of
// TransformerEncoder zeroes the outputs at padded positions, which this one does not.
//
// Hooks (of these layers and stacks, as of MultiheadAttention): module(...) runs the module's
// hooks, forward(...) does not (PyTorch's module(...) and module.forward(...)); each calls its
// children through their call, so the children's hooks run too. The args hooks see the DTensor
// inputs PyTorch passes positionally: (src) for the encoder layer and encoder, (tgt, memory) for
// the decoder layer and decoder. The masks and is_causal are PyTorch's keyword arguments, which
// hooks do not see (as PyTorch's hooks registered without with_kwargs); they reach the call as
// its forward context (the encoder layer and encoder) or beside it (the decoder). self_attn is
// called as self_attn(x) (self-attention, one input, so that activation checkpointing and
// one-input hooks apply), where PyTorch passes (x, x, x); the decoder's multihead_attn as
// multihead_attn(x, memory, memory).
class TransformerEncoderLayer : public detail::MaskedEncoderModule {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, std::string activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false, bool bias = true, ModuleOptions opts = {});
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  // forward(src, src_mask, src_key_padding_mask, is_causal) and operator() of the same:
  // detail::MaskedEncoderModule's.
  using MaskedEncoderModule::forward;
  // The layer with the masks of its forward context (none by default).
  DTensor forward(const DTensor& src) override;
  // A new layer of the same configuration holding copies of this layer's parameter values and
  // requires_grad flags, and its training mode (PyTorch's copy.deepcopy of a layer, as
  // TransformerEncoder makes them: a frozen parameter stays frozen). The parameters must
  // be local (not parallelized); "[TransformerEncoderLayer] clone ..." otherwise.
  std::shared_ptr<TransformerEncoderLayer> clone() const;

 private:
  explicit TransformerEncoderLayer(const detail::TransformerLayerConfig& cfg);
  detail::TransformerLayerConfig cfg_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  ModulePtr linear1_, dropout_, linear2_, norm1_, norm2_, dropout1_, dropout2_;
};

// PyTorch's TransformerEncoder(encoder_layer, num_layers, norm): children layers.<i> (each a
// clone of encoder_layer, so all start with its parameter values, as PyTorch's deepcopy; the
// given layer itself is not a child) and norm (when given). forward calls the layers in order
// with the same masks, then norm. is_causal: the hint passed to every layer (PyTorch also
// detects a causal src mask by comparing it with one; the values are the same either way).
class TransformerEncoder : public detail::MaskedEncoderModule {
 public:
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     ModulePtr norm = nullptr);
  std::string type_name() const override { return "TransformerEncoder"; }
  // forward(src, mask, src_key_padding_mask, is_causal) and operator() of the same:
  // detail::MaskedEncoderModule's.
  using MaskedEncoderModule::forward;
  // The stack with the masks of its forward context (none by default).
  DTensor forward(const DTensor& src) override;
  int64_t num_layers() const { return num_layers_; }

 private:
  int64_t num_layers_;
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;
  ModulePtr norm_;
};

// TransformerDecoderLayer's masks (PyTorch's forward arguments): self-attention over tgt
// (tgt_mask [T, T] or [N * nhead, T, T], tgt_key_padding_mask [N, T]) and attention to memory
// (memory_mask [T, S] or [N * nhead, T, S], memory_key_padding_mask [N, S]); bool (true: masked)
// or floating (added); the is_causal hints as MultiheadAttentionArgs::is_causal.
struct TransformerDecoderArgs {
  DTensor tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask;
  bool tgt_is_causal = false;
  bool memory_is_causal = false;
};

// Children (PyTorch's): self_attn, multihead_attn (MultiheadAttention(d_model, nhead, dropout,
// bias, batch_first)), linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2,
// dropout3.
//   norm_first false: x = norm1(x + sa(x)); x = norm2(x + mha(x, memory)); x = norm3(x + ff(x))
//   norm_first true:  x = x + sa(norm1(x)); x = x + mha(norm2(x), memory); x = x + ff(norm3(x))
// tgt [T, N, d_model], memory [S, N, d_model] (batch_first: batch dim first; unbatched: none).
// Module's one-input forward is not offered (memory is needed); self_attn runs through Module's
// call with the tgt masks as its forward context, multihead_attn through its three-input call.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, std::string activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false, bool bias = true, ModuleOptions opts = {});
  std::string type_name() const override { return "TransformerDecoderLayer"; }
  using Module::forward;
  DTensor forward(const DTensor& tgt, const DTensor& memory,
                  const TransformerDecoderArgs& args = {});
  // forward through this layer's hooks (the args forms see (tgt, memory)).
  using Module::operator();
  DTensor operator()(const DTensor& tgt, const DTensor& memory,
                     const TransformerDecoderArgs& args = {});
  // As TransformerEncoderLayer::clone.
  std::shared_ptr<TransformerDecoderLayer> clone() const;

 private:
  explicit TransformerDecoderLayer(const detail::TransformerLayerConfig& cfg);
  detail::TransformerLayerConfig cfg_;
  std::shared_ptr<MultiheadAttention> self_attn_, multihead_attn_;
  ModulePtr linear1_, dropout_, linear2_, norm1_, norm2_, norm3_, dropout1_, dropout2_, dropout3_;
};

// PyTorch's TransformerDecoder(decoder_layer, num_layers, norm): layers.<i> (clones of
// decoder_layer) and norm (when given); forward runs the layers with the same memory and masks,
// then norm.
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayer& decoder_layer, int64_t num_layers,
                     ModulePtr norm = nullptr);
  std::string type_name() const override { return "TransformerDecoder"; }
  using Module::forward;
  DTensor forward(const DTensor& tgt, const DTensor& memory,
                  const TransformerDecoderArgs& args = {});
  // forward through this module's hooks (the args forms see (tgt, memory)).
  using Module::operator();
  DTensor operator()(const DTensor& tgt, const DTensor& memory,
                     const TransformerDecoderArgs& args = {});

 private:
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers_;
  ModulePtr norm_;
};

}  // namespace dtensor::nn
