#include "dtensor/nn/transformer_encoder.h"

#include <utility>

#include "dtensor/nn/detail/forward_context_scope.h"
#include "dtensor/nn/transformer.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/rng/generator.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double dropout,
                                                 std::string activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first, bool bias,
                                                 ModuleOptions opts)
    : d_model_(d_model),
      nhead_(nhead),
      dim_feedforward_(dim_feedforward),
      dropout_p_(dropout),
      activation_(std::move(activation)),
      layer_norm_eps_(layer_norm_eps),
      batch_first_(batch_first),
      norm_first_(norm_first),
      bias_(bias),
      opts_(opts) {
  DT_CHECK(activation_ == "relu" || activation_ == "gelu",
           "[TransformerEncoderLayer] activation should be relu/gelu, not %s", activation_);
  self_attn_ = std::make_shared<MultiheadAttention>(d_model, nhead, dropout, bias, false, false,
                                                    std::nullopt, std::nullopt, batch_first, opts);
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
  std::shared_ptr<const void> previous = std::move(call_args_);
  call_args_ = std::static_pointer_cast<const MultiheadAttentionArgs>(std::move(context));
  return previous;
}

DTensor TransformerEncoderLayer::forward(const DTensor& src, const DTensor& src_mask,
                                         const DTensor& src_key_padding_mask, bool is_causal) {
  auto args = std::make_shared<MultiheadAttentionArgs>();
  args->attn_mask = src_mask;
  args->key_padding_mask = src_key_padding_mask;
  args->is_causal = is_causal;
  args->need_weights = false;
  detail::ForwardContextScope scope(*this, std::move(args));
  return (*this)(src);
}

DTensor TransformerEncoderLayer::forward(const DTensor& src) {
  auto sa = [&](const DTensor& x) {
    // self_attn through its call (hooks, data-parallel wrapping) with this call's masks.
    detail::ForwardContextScope scope(*self_attn_, call_args_);
    return (*dropout1_)((*self_attn_)(x));
  };
  auto ff = [&](const DTensor& x) {
    DTensor h = (*linear1_)(x);
    h = activation_ == "relu" ? relu(h) : gelu(h);
    return (*dropout2_)((*linear2_)((*dropout_)(h)));
  };
  DTensor x = src;
  if (norm_first_) {
    x = add(x, sa((*norm1_)(x)));
    return add(x, ff((*norm2_)(x)));
  }
  x = (*norm1_)(add(x, sa(x)));
  return (*norm2_)(add(x, ff(x)));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  // Drawn from a throwaway generator (the copy's values are overwritten), so cloning leaves the
  // caller's generators where they were, as a deepcopy does.
  Generator scratch;
  ModuleOptions opts = opts_;
  opts.generator = &scratch;
  auto copy = std::make_shared<TransformerEncoderLayer>(d_model_, nhead_, dim_feedforward_,
                                                        dropout_p_, activation_, layer_norm_eps_,
                                                        batch_first_, norm_first_, bias_, opts);
  const auto from = named_parameters();
  const auto to = copy->named_parameters();
  DT_CHECK(from.size() == to.size(), "[TransformerEncoderLayer] clone: %d parameters, copy has %d",
           from.size(), to.size());
  for (size_t i = 0; i < from.size(); ++i) {
    DT_CHECK(is_local(from[i].second),
             "[TransformerEncoderLayer] clone: parameter '%s' is not local (placements %s); "
             "clone the layer before parallelizing it",
             from[i].first, placements_str(from[i].second.placements()));
    Tensor(to[i].second.to_local()).copy_(from[i].second.to_local());
  }
  copy->train(is_training());
  return copy;
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer,
                                       int64_t num_layers, ModulePtr norm)
    : num_layers_(num_layers), norm_(std::move(norm)) {
  DT_CHECK(num_layers >= 0, "[TransformerEncoder] num_layers %d must be >= 0", num_layers);
  auto layers = std::make_shared<ModuleList>();
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.push_back(encoder_layer.clone());
    layers->append(layers_.back());
  }
  register_module("layers", layers);
  if (norm_ != nullptr) register_module("norm", norm_);
}

DTensor TransformerEncoder::forward(const DTensor& src, const DTensor& mask,
                                    const DTensor& src_key_padding_mask, bool is_causal) {
  DTensor x = src;
  for (auto& layer : layers_) x = layer->forward(x, mask, src_key_padding_mask, is_causal);
  return norm_ != nullptr ? (*norm_)(x) : x;
}

}  // namespace dtensor::nn
