// Transformer building blocks: MLP, SwiGLU, multi-head self-attention, TransformerBlock and a
// tiny decoder-only Transformer (forward only). Child names follow the Llama / PyTorch TP
// tutorial layout, so plans read "layers.*.attention.wq", "layers.*.mlp.fc1":
//
//   Transformer:      tok_embeddings, layers.<i>, norm, output
//   TransformerBlock: attention_norm, attention, mlp_norm, mlp
//   Attention:        wq, wk, wv, wo            MLP: fc1, fc2       SwiGLU: w1, w2, w3
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dtensor/nn/layers.h"

namespace dtensor::nn {

enum class Activation { kGelu, kSilu };

// fc2(act(fc1(x))): fc1 [hidden, dim], fc2 [dim, hidden].
class MLP : public Module {
 public:
  MLP(int64_t dim, int64_t hidden_dim, Activation activation = Activation::kGelu, bool bias = true,
      ModuleOptions opts = {});
  std::string type_name() const override { return "MLP"; }
  DTensor forward(const DTensor& x) override;

 private:
  Activation act_;
  std::shared_ptr<Linear> fc1_, fc2_;
};

// w2(silu(w1(x)) * w3(x)) without biases (Llama's feed-forward).
class SwiGLU : public Module {
 public:
  SwiGLU(int64_t dim, int64_t hidden_dim, ModuleOptions opts = {});
  std::string type_name() const override { return "SwiGLU"; }
  DTensor forward(const DTensor& x) override;

 private:
  std::shared_ptr<Linear> w1_, w2_, w3_;
};

// Multi-head self-attention on x [batch, seq, dim]: q/k/v = wq/wk/wv(x), heads split from the
// last dim (view + transpose), softmax(q k^T / sqrt(head_dim) [+ causal mask]) v, heads merged,
// wo. When wq/wk/wv are colwise-sharded, each rank runs its n_heads / tp local heads; n_heads
// must then be divisible by the tensor-parallel size (check_parallel / forward throw
// "[Attention] n_heads 6 is not divisible by the tensor-parallel size 4 ...").
class Attention : public Module {
 public:
  Attention(int64_t dim, int64_t n_heads, bool causal = true, bool bias = false,
            ModuleOptions opts = {});
  std::string type_name() const override { return "Attention"; }
  DTensor forward(const DTensor& x) override;
  void check_parallel() const override;
  int64_t n_heads() const { return n_heads_; }
  int64_t head_dim() const { return head_dim_; }

 private:
  int64_t n_heads_;
  int64_t head_dim_;
  bool causal_;
  std::shared_ptr<Linear> wq_, wk_, wv_, wo_;
};

enum class NormKind { kLayerNorm, kRMSNorm };
enum class MLPKind { kGelu, kSilu, kSwiGLU };

struct TransformerConfig {
  int64_t vocab_size = 256;
  int64_t dim = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t hidden_dim = 0;  // 0: 4 * dim
  NormKind norm = NormKind::kRMSNorm;
  MLPKind mlp = MLPKind::kSwiGLU;
  bool causal = true;
  bool bias = false;  // biases of the attention and MLP Linears (not SwiGLU)
  double norm_eps = 1e-5;
  // > 0: learned absolute positions, an Embedding "pos_embeddings" [max_seq_len, dim] added to
  // the token embeddings (sequences may then be at most this long); 0: none.
  int64_t max_seq_len = 0;
};

// h = x + attention(attention_norm(x)); out = h + mlp(mlp_norm(h)).
class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerConfig& cfg, ModuleOptions opts = {});
  std::string type_name() const override { return "TransformerBlock"; }
  DTensor forward(const DTensor& x) override;

 private:
  ModulePtr attention_norm_, attention_, mlp_norm_, mlp_;
};

// A list of modules named "0", "1", ...; forward runs them in order.
class ModuleList : public Module {
 public:
  std::string type_name() const override { return "ModuleList"; }
  void append(ModulePtr m);
  int64_t size() const { return static_cast<int64_t>(named_children().size()); }
  DTensor forward(const DTensor& x) override;
};

// Token ids [batch, seq] (int64) -> logits [batch, seq, vocab]: tok_embeddings (plus
// pos_embeddings when cfg.max_seq_len > 0), the blocks, the final norm and the lm head "output"
// (Linear without bias).
class Transformer : public Module {
 public:
  explicit Transformer(const TransformerConfig& cfg, ModuleOptions opts = {});
  std::string type_name() const override { return "Transformer"; }
  DTensor forward(const DTensor& tokens) override;
  const TransformerConfig& config() const { return cfg_; }

 private:
  TransformerConfig cfg_;
  ModulePtr tok_embeddings_, pos_embeddings_, layers_, norm_, output_;
};

namespace detail {
// A LayerNorm or RMSNorm of `dim` as the config says.
ModulePtr make_norm(const TransformerConfig& cfg, int64_t dim, const ModuleOptions& opts);
}  // namespace detail

}  // namespace dtensor::nn
