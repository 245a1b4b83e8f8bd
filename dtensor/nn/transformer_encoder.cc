#include "dtensor/nn/transformer_encoder.h"

#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/nn/detail/forward_context_scope.h"
#include "dtensor/nn/transformer.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

namespace {
// linear2(dropout(act(linear1(x)))), then dropout_out: the layers' feed-forward block.
DTensor feed_forward(const DTensor& x, Module& linear1, Module& dropout, Module& linear2,
                     Module& dropout_out, const std::string& activation) {
  DTensor h = linear1(x);
  h = activation == "relu" ? relu(h) : gelu(h);
  return dropout_out(linear2(dropout(h)));
}

void check_activation(std::string_view layer, const std::string& activation) {
  DT_CHECK(activation == "relu" || activation == "gelu",
           "[%s] activation should be relu/gelu, not %s", layer, activation);
}

// A clone's parameters take `from`'s values (both built with one configuration).
void copy_parameters(const Module& from, Module& to) {
  const auto src = from.named_parameters();
  const auto dst = to.named_parameters();
  DT_CHECK(src.size() == dst.size(), "[%s] clone: %d parameters, the copy has %d", from.type_name(),
           src.size(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    DT_CHECK(is_local(src[i].second),
             "[%s] clone: parameter '%s' is not local (placements %s); clone the layer before "
             "parallelizing it",
             from.type_name(), src[i].first, placements_str(src[i].second.placements()));
    Tensor(dst[i].second.to_local()).copy_(src[i].second.to_local());
    // A frozen parameter stays frozen (the copy's parameters are leaves sharing their state).
    if (!src[i].second.requires_grad()) DTensor(dst[i].second).requires_grad_(false);
  }
  to.train(from.is_training());
}

// The options of a clone: values drawn from a throwaway generator (they are overwritten), so
// cloning leaves the caller's generators where they were, as a deepcopy does.
// layers.<i> (num_layers clones of `layer`) and norm (when given), registered on `stack`.
template <typename Layer>
std::vector<std::shared_ptr<Layer>> add_layers(Module& stack, const Layer& layer,
                                               int64_t num_layers, const ModulePtr& norm) {
  DT_CHECK(num_layers >= 0, "[%s] num_layers %d must be >= 0", stack.type_name(), num_layers);
  std::vector<std::shared_ptr<Layer>> out;
  auto list = std::make_shared<ModuleList>();
  for (int64_t i = 0; i < num_layers; ++i) {
    out.push_back(layer.clone());
    list->append(out.back());
  }
  stack.register_module("layers", list);
  if (norm != nullptr) stack.register_module("norm", norm);
  return out;
}

// A layer's or stack's call masks (its forward context).
std::shared_ptr<const MultiheadAttentionArgs> mask_args(const DTensor& mask,
                                                        const DTensor& key_padding_mask,
                                                        bool is_causal) {
  auto args = std::make_shared<MultiheadAttentionArgs>();
  args->attn_mask = mask;
  args->key_padding_mask = key_padding_mask;
  args->is_causal = is_causal;
  args->need_weights = false;
  return args;
}

// set_forward_context's swap of a MultiheadAttentionArgs context.
std::shared_ptr<const void> swap_context(std::shared_ptr<const MultiheadAttentionArgs>& slot,
                                         std::shared_ptr<const void> context) {
  std::shared_ptr<const void> previous = std::move(slot);
  slot = std::static_pointer_cast<const MultiheadAttentionArgs>(std::move(context));
  return previous;
}

detail::TransformerLayerConfig clone_config(detail::TransformerLayerConfig cfg,
                                            Generator& scratch) {
  cfg.opts.generator = &scratch;
  return cfg;
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double dropout,
                                                 std::string activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first, bool bias,
                                                 ModuleOptions opts)
    : TransformerEncoderLayer(detail::TransformerLayerConfig{
          d_model, nhead, dim_feedforward, dropout, std::move(activation), layer_norm_eps,
          batch_first, norm_first, bias, opts}) {}

TransformerEncoderLayer::TransformerEncoderLayer(const detail::TransformerLayerConfig& cfg)
    : cfg_(cfg) {
  cfg_.opts.generator = nullptr;  // for the initial values only (a clone's is a scratch one)
  const int64_t d_model = cfg.d_model, dim_feedforward = cfg.dim_feedforward;
  const double dropout = cfg.dropout, layer_norm_eps = cfg.layer_norm_eps;
  const bool bias = cfg.bias;
  const ModuleOptions& opts = cfg.opts;
  check_activation(type_name(), cfg.activation);
  self_attn_ =
      std::make_shared<MultiheadAttention>(d_model, cfg.nhead, dropout, bias, false, false,
                                           std::nullopt, std::nullopt, cfg.batch_first, opts);
  register_module("self_attn", self_attn_);
  linear1_ =
      register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward, bias, opts));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout));
  linear2_ =
      register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model, bias, opts));
  norm1_ = register_module("norm1",
                           std::make_shared<LayerNorm>(d_model, layer_norm_eps, true, bias, opts));
  norm2_ = register_module("norm2",
                           std::make_shared<LayerNorm>(d_model, layer_norm_eps, true, bias, opts));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(dropout));
}

std::shared_ptr<const void> TransformerEncoderLayer::set_forward_context(
    std::shared_ptr<const void> context) {
  return swap_context(call_args_, std::move(context));
}

DTensor TransformerEncoderLayer::forward(const DTensor& src, const DTensor& src_mask,
                                         const DTensor& src_key_padding_mask, bool is_causal) {
  detail::ForwardContextScope scope(*this, mask_args(src_mask, src_key_padding_mask, is_causal));
  return forward(src);
}

DTensor TransformerEncoderLayer::operator()(const DTensor& src, const DTensor& src_mask,
                                            const DTensor& src_key_padding_mask, bool is_causal) {
  detail::ForwardContextScope scope(*this, mask_args(src_mask, src_key_padding_mask, is_causal));
  return (*this)(src);
}

DTensor TransformerEncoderLayer::forward(const DTensor& src) {
  auto sa = [&](const DTensor& x) {
    // self_attn through its call (hooks, data-parallel wrapping) with this call's masks.
    detail::ForwardContextScope scope(*self_attn_, call_args_);
    return (*dropout1_)((*self_attn_)(x));
  };
  auto ff = [&](const DTensor& x) {
    return feed_forward(x, *linear1_, *dropout_, *linear2_, *dropout2_, cfg_.activation);
  };
  DTensor x = src;
  if (cfg_.norm_first) {
    x = add(x, sa((*norm1_)(x)));
    return add(x, ff((*norm2_)(x)));
  }
  x = (*norm1_)(add(x, sa(x)));
  return (*norm2_)(add(x, ff(x)));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  Generator scratch;
  std::shared_ptr<TransformerEncoderLayer> copy(
      new TransformerEncoderLayer(clone_config(cfg_, scratch)));
  copy_parameters(*this, *copy);
  return copy;
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer,
                                       int64_t num_layers, ModulePtr norm)
    : num_layers_(num_layers), norm_(std::move(norm)) {
  layers_ = add_layers(*this, encoder_layer, num_layers, norm_);
}

std::shared_ptr<const void> TransformerEncoder::set_forward_context(
    std::shared_ptr<const void> context) {
  return swap_context(call_args_, std::move(context));
}

DTensor TransformerEncoder::forward(const DTensor& src, const DTensor& mask,
                                    const DTensor& src_key_padding_mask, bool is_causal) {
  detail::ForwardContextScope scope(*this, mask_args(mask, src_key_padding_mask, is_causal));
  return forward(src);
}

DTensor TransformerEncoder::operator()(const DTensor& src, const DTensor& mask,
                                       const DTensor& src_key_padding_mask, bool is_causal) {
  detail::ForwardContextScope scope(*this, mask_args(mask, src_key_padding_mask, is_causal));
  return (*this)(src);
}

DTensor TransformerEncoder::forward(const DTensor& src) {
  const MultiheadAttentionArgs a = call_args_ != nullptr ? *call_args_ : MultiheadAttentionArgs{};
  DTensor x = src;
  for (auto& layer : layers_) x = (*layer)(x, a.attn_mask, a.key_padding_mask, a.is_causal);
  return norm_ != nullptr ? (*norm_)(x) : x;
}

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double dropout,
                                                 std::string activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first, bool bias,
                                                 ModuleOptions opts)
    : TransformerDecoderLayer(detail::TransformerLayerConfig{
          d_model, nhead, dim_feedforward, dropout, std::move(activation), layer_norm_eps,
          batch_first, norm_first, bias, opts}) {}

TransformerDecoderLayer::TransformerDecoderLayer(const detail::TransformerLayerConfig& cfg)
    : cfg_(cfg) {
  cfg_.opts.generator = nullptr;  // for the initial values only (a clone's is a scratch one)
  const int64_t d_model = cfg.d_model, dim_feedforward = cfg.dim_feedforward;
  const double dropout = cfg.dropout, layer_norm_eps = cfg.layer_norm_eps;
  const bool bias = cfg.bias;
  const ModuleOptions& opts = cfg.opts;
  check_activation(type_name(), cfg.activation);
  auto attention = [&](const char* name) {
    auto m =
        std::make_shared<MultiheadAttention>(d_model, cfg.nhead, dropout, bias, false, false,
                                             std::nullopt, std::nullopt, cfg.batch_first, opts);
    register_module(name, m);
    return m;
  };
  self_attn_ = attention("self_attn");
  multihead_attn_ = attention("multihead_attn");
  linear1_ =
      register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward, bias, opts));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout));
  linear2_ =
      register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model, bias, opts));
  for (auto [name, slot] : {std::pair{"norm1", &norm1_}, {"norm2", &norm2_}, {"norm3", &norm3_}}) {
    *slot = register_module(name,
                            std::make_shared<LayerNorm>(d_model, layer_norm_eps, true, bias, opts));
  }
  for (auto [name, slot] :
       {std::pair{"dropout1", &dropout1_}, {"dropout2", &dropout2_}, {"dropout3", &dropout3_}}) {
    *slot = register_module(name, std::make_shared<Dropout>(dropout));
  }
}

DTensor TransformerDecoderLayer::forward(const DTensor& tgt, const DTensor& memory,
                                         const TransformerDecoderArgs& args) {
  auto self_args = std::make_shared<MultiheadAttentionArgs>();
  self_args->attn_mask = args.tgt_mask;
  self_args->key_padding_mask = args.tgt_key_padding_mask;
  self_args->is_causal = args.tgt_is_causal;
  MultiheadAttentionArgs cross;
  cross.attn_mask = args.memory_mask;
  cross.key_padding_mask = args.memory_key_padding_mask;
  cross.is_causal = args.memory_is_causal;
  cross.need_weights = false;
  auto sa = [&](const DTensor& x) {
    detail::ForwardContextScope scope(*self_attn_, self_args);
    return (*dropout1_)((*self_attn_)(x));
  };
  auto mha = [&](const DTensor& x) {
    return (*dropout2_)((*multihead_attn_)(x, memory, memory, cross).attn_output);
  };
  auto ff = [&](const DTensor& x) {
    return feed_forward(x, *linear1_, *dropout_, *linear2_, *dropout3_, cfg_.activation);
  };
  DTensor x = tgt;
  if (cfg_.norm_first) {
    x = add(x, sa((*norm1_)(x)));
    x = add(x, mha((*norm2_)(x)));
    return add(x, ff((*norm3_)(x)));
  }
  x = (*norm1_)(add(x, sa(x)));
  x = (*norm2_)(add(x, mha(x)));
  return (*norm3_)(add(x, ff(x)));
}

DTensor TransformerDecoderLayer::operator()(const DTensor& tgt, const DTensor& memory,
                                            const TransformerDecoderArgs& args) {
  if (!has_hooks()) return forward(tgt, memory, args);
  const DTensor in[] = {tgt, memory};
  return call_with_hooks(in,
                         [&](absl::Span<const DTensor> x) { return forward(x[0], x[1], args); });
}

std::shared_ptr<TransformerDecoderLayer> TransformerDecoderLayer::clone() const {
  Generator scratch;
  std::shared_ptr<TransformerDecoderLayer> copy(
      new TransformerDecoderLayer(clone_config(cfg_, scratch)));
  copy_parameters(*this, *copy);
  return copy;
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& decoder_layer,
                                       int64_t num_layers, ModulePtr norm)
    : norm_(std::move(norm)) {
  layers_ = add_layers(*this, decoder_layer, num_layers, norm_);
}

DTensor TransformerDecoder::forward(const DTensor& tgt, const DTensor& memory,
                                    const TransformerDecoderArgs& args) {
  DTensor x = tgt;
  for (auto& layer : layers_) x = (*layer)(x, memory, args);
  return norm_ != nullptr ? (*norm_)(x) : x;
}

DTensor TransformerDecoder::operator()(const DTensor& tgt, const DTensor& memory,
                                       const TransformerDecoderArgs& args) {
  if (!has_hooks()) return forward(tgt, memory, args);
  const DTensor in[] = {tgt, memory};
  return call_with_hooks(in,
                         [&](absl::Span<const DTensor> x) { return forward(x[0], x[1], args); });
}

}  // namespace dtensor::nn
