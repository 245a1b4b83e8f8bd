#include "dtensor/nn/transformer_encoder.h"

#include <initializer_list>
#include <string>
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

// A layer's children in PyTorch's order (so the initial values are drawn in its order): a
// MultiheadAttention(d_model, nhead, dropout, bias, batch_first) per entry of `attention`,
// linear1 (d_model -> dim_feedforward), dropout, linear2 (dim_feedforward -> d_model), then
// norm<i> (LayerNorm(d_model, layer_norm_eps, bias)) and dropout<i> for i = 1, 2, ...
void add_layer_children(
    Module& layer, const detail::TransformerLayerConfig& cfg,
    std::initializer_list<std::pair<const char*, std::shared_ptr<MultiheadAttention>*>> attention,
    ModulePtr* linear1, ModulePtr* dropout, ModulePtr* linear2,
    std::initializer_list<ModulePtr*> norms, std::initializer_list<ModulePtr*> dropouts) {
  check_activation(layer.type_name(), cfg.activation);
  const int64_t d_model = cfg.d_model;
  const ModuleOptions& opts = cfg.opts;
  for (auto [name, slot] : attention) {
    *slot = std::make_shared<MultiheadAttention>(d_model, cfg.nhead, cfg.dropout, cfg.bias, false,
                                                 false, std::nullopt, std::nullopt, cfg.batch_first,
                                                 opts);
    layer.register_module(name, *slot);
  }
  *linear1 = layer.register_module(
      "linear1", std::make_shared<Linear>(d_model, cfg.dim_feedforward, cfg.bias, opts));
  *dropout = layer.register_module("dropout", std::make_shared<Dropout>(cfg.dropout));
  *linear2 = layer.register_module(
      "linear2", std::make_shared<Linear>(cfg.dim_feedforward, d_model, cfg.bias, opts));
  int i = 0;
  for (ModulePtr* slot : norms) {
    *slot = layer.register_module(
        "norm" + std::to_string(++i),
        std::make_shared<LayerNorm>(d_model, cfg.layer_norm_eps, true, cfg.bias, opts));
  }
  i = 0;
  for (ModulePtr* slot : dropouts) {
    *slot = layer.register_module("dropout" + std::to_string(++i),
                                  std::make_shared<Dropout>(cfg.dropout));
  }
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

// Self-attention masks (need_weights false, as PyTorch's layers call their attention).
MultiheadAttentionArgs masks(const DTensor& mask, const DTensor& key_padding_mask, bool is_causal) {
  return {.key_padding_mask = key_padding_mask,
          .need_weights = false,
          .attn_mask = mask,
          .is_causal = is_causal};
}

// A masked call's forward context.
std::shared_ptr<const void> mask_context(const DTensor& mask, const DTensor& key_padding_mask,
                                         bool is_causal) {
  return std::make_shared<const MultiheadAttentionArgs>(masks(mask, key_padding_mask, is_causal));
}

// A copy of `layer` (configuration `cfg`) built by `make(config)`, holding its parameter values,
// requires_grad flags and training mode. The copy draws its initial values from a throwaway
// generator (they are overwritten), so cloning leaves the caller's generators where they were,
// as a deepcopy does.
template <typename Layer, typename Make>
std::shared_ptr<Layer> clone_layer(const Layer& layer, detail::TransformerLayerConfig cfg,
                                   Make make) {
  Generator scratch;
  cfg.opts.generator = &scratch;
  std::shared_ptr<Layer> copy(make(cfg));
  copy_parameters(layer, *copy);
  return copy;
}
}  // namespace

namespace detail {
std::shared_ptr<const void> MaskedEncoderModule::set_forward_context(
    std::shared_ptr<const void> context) {
  std::shared_ptr<const void> previous = std::move(call_args_);
  call_args_ = std::static_pointer_cast<const MultiheadAttentionArgs>(std::move(context));
  return previous;
}

DTensor MaskedEncoderModule::forward(const DTensor& src, const DTensor& mask,
                                     const DTensor& src_key_padding_mask, bool is_causal) {
  ForwardContextScope scope(*this, mask_context(mask, src_key_padding_mask, is_causal));
  return forward(src);
}

DTensor MaskedEncoderModule::operator()(const DTensor& src, const DTensor& mask,
                                        const DTensor& src_key_padding_mask, bool is_causal) {
  ForwardContextScope scope(*this, mask_context(mask, src_key_padding_mask, is_causal));
  return (*this)(src);
}
}  // namespace detail

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
  add_layer_children(*this, cfg, {{"self_attn", &self_attn_}}, &linear1_, &dropout_, &linear2_,
                     {&norm1_, &norm2_}, {&dropout1_, &dropout2_});
}

DTensor TransformerEncoderLayer::forward(const DTensor& src) {
  auto sa = [&](const DTensor& x) {
    // self_attn through its call (hooks, data-parallel wrapping) with this call's masks.
    detail::ForwardContextScope scope(*self_attn_, call_args());
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
  return clone_layer(*this, cfg_, [](const auto& cfg) { return new TransformerEncoderLayer(cfg); });
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer,
                                       int64_t num_layers, ModulePtr norm)
    : num_layers_(num_layers), norm_(std::move(norm)) {
  layers_ = add_layers(*this, encoder_layer, num_layers, norm_);
}

DTensor TransformerEncoder::forward(const DTensor& src) {
  const MultiheadAttentionArgs a = call_args() != nullptr ? *call_args() : MultiheadAttentionArgs{};
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
  add_layer_children(*this, cfg, {{"self_attn", &self_attn_}, {"multihead_attn", &multihead_attn_}},
                     &linear1_, &dropout_, &linear2_, {&norm1_, &norm2_, &norm3_},
                     {&dropout1_, &dropout2_, &dropout3_});
}

DTensor TransformerDecoderLayer::forward(const DTensor& tgt, const DTensor& memory,
                                         const TransformerDecoderArgs& args) {
  const auto self_args = mask_context(args.tgt_mask, args.tgt_key_padding_mask, args.tgt_is_causal);
  const MultiheadAttentionArgs cross =
      masks(args.memory_mask, args.memory_key_padding_mask, args.memory_is_causal);
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
  return clone_layer(*this, cfg_, [](const auto& cfg) { return new TransformerDecoderLayer(cfg); });
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
