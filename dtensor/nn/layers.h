// Basic layers: Linear, Embedding, LayerNorm, RMSNorm (PyTorch names, parameter names and
// shapes; forward only). Initial values are drawn on the CPU for the full parameter shape (see
// ModuleOptions), so every rank builds the same model after the same manual_seed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "dtensor/nn/module.h"
#include "dtensor/nn/two_input_module.h"

namespace dtensor::nn {

// y = x @ weight^T + bias. Parameters "weight" [out, in] and "bias" [out] (when `bias`),
// both uniform on [-1/sqrt(in), 1/sqrt(in)) (PyTorch's default bound).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, ModuleOptions opts = {});
  std::string type_name() const override { return "Linear"; }
  DTensor forward(const DTensor& x) override;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  int64_t in_;
  int64_t out_;
};

// Lookup table: "weight" [num_embeddings, embedding_dim], standard normal. The input holds
// integer indices (int32 or int64) of any shape; the output appends embedding_dim.
// padding_idx (PyTorch's; negative counts from the end, -num <= padding_idx < num, stored
// normalised): that row starts as zeros (after every reset_parameters too) and its gradient is
// always zero (F.embedding's padding_idx), on a vocab-sharded table as well.
// max_norm, norm_type, scale_grad_by_freq: F.embedding's (dtensor::embedding,
// dtensor/ops/embedding/embedding.h): each forward rescales in place the looked-up rows whose
// norm exceeds max_norm; each row's gradient is divided by its count in the (global) batch.
// They follow padding_idx in PyTorch's order; every argument after padding_idx is a template of
// its exact type (floating / bool), so a braced {} always lands on the ModuleOptions.
class Embedding : public Module {
  template <typename T>
  static constexpr bool index_type = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  template <typename T>
  struct optional_index : std::false_type {};
  template <typename U>
  struct optional_index<std::optional<U>> : std::bool_constant<index_type<U>> {};
  template <typename T>
  static constexpr bool padding_idx_type =
      index_type<T> || optional_index<T>::value || std::is_same_v<T, std::nullopt_t>;
  template <typename T>
  static constexpr bool max_norm_type =
      std::is_floating_point_v<T> || std::is_same_v<T, std::optional<double>> ||
      std::is_same_v<T, std::nullopt_t>;

 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, ModuleOptions opts = {})
      : Embedding(num_embeddings, embedding_dim, opts, std::nullopt) {}
  // padding_idx: an integer, a std::optional of one or std::nullopt (a template, so that a
  // braced {} in its place is the ModuleOptions of the form above, as for LayerNorm's bias).
  template <typename PaddingIdx, std::enable_if_t<padding_idx_type<PaddingIdx>, int> = 0>
  Embedding(int64_t num_embeddings, int64_t embedding_dim, PaddingIdx padding_idx,
            ModuleOptions opts = {})
      : Embedding(num_embeddings, embedding_dim, opts, std::optional<int64_t>(padding_idx)) {}
  // max_norm: a floating number, a std::optional<double> or std::nullopt; norm_type floating;
  // scale_grad_by_freq a bool.
  template <typename PaddingIdx, typename MaxNorm,
            std::enable_if_t<padding_idx_type<PaddingIdx> && max_norm_type<MaxNorm>, int> = 0>
  Embedding(int64_t num_embeddings, int64_t embedding_dim, PaddingIdx padding_idx, MaxNorm max_norm,
            ModuleOptions opts = {})
      : Embedding(num_embeddings, embedding_dim, opts, std::optional<int64_t>(padding_idx),
                  std::optional<double>(max_norm)) {}
  template <typename PaddingIdx, typename MaxNorm, typename NormType,
            std::enable_if_t<padding_idx_type<PaddingIdx> && max_norm_type<MaxNorm> &&
                                 std::is_floating_point_v<NormType>,
                             int> = 0>
  Embedding(int64_t num_embeddings, int64_t embedding_dim, PaddingIdx padding_idx, MaxNorm max_norm,
            NormType norm_type, ModuleOptions opts = {})
      : Embedding(num_embeddings, embedding_dim, opts, std::optional<int64_t>(padding_idx),
                  std::optional<double>(max_norm), norm_type) {}
  template <
      typename PaddingIdx, typename MaxNorm, typename NormType, typename ScaleGrad,
      std::enable_if_t<padding_idx_type<PaddingIdx> && max_norm_type<MaxNorm> &&
                           std::is_floating_point_v<NormType> && std::is_same_v<ScaleGrad, bool>,
                       int> = 0>
  Embedding(int64_t num_embeddings, int64_t embedding_dim, PaddingIdx padding_idx, MaxNorm max_norm,
            NormType norm_type, ScaleGrad scale_grad_by_freq, ModuleOptions opts = {})
      : Embedding(num_embeddings, embedding_dim, opts, std::optional<int64_t>(padding_idx),
                  std::optional<double>(max_norm), norm_type, scale_grad_by_freq) {}
  std::string type_name() const override { return "Embedding"; }
  DTensor forward(const DTensor& indices) override;
  int64_t num_embeddings() const { return num_; }
  int64_t embedding_dim() const { return dim_; }
  std::optional<int64_t> padding_idx() const { return padding_idx_; }
  std::optional<double> max_norm() const { return max_norm_; }
  double norm_type() const { return norm_type_; }
  bool scale_grad_by_freq() const { return scale_grad_by_freq_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, const ModuleOptions& opts,
            std::optional<int64_t> padding_idx, std::optional<double> max_norm = std::nullopt,
            double norm_type = 2.0, bool scale_grad_by_freq = false);
  void zero_padding_row();

  int64_t num_;
  int64_t dim_;
  std::optional<int64_t> padding_idx_;
  std::optional<double> max_norm_;
  double norm_type_ = 2.0;
  bool scale_grad_by_freq_ = false;
};

// Layer norm over the last dim: "weight" [dim] (ones) when elementwise_affine, and "bias" [dim]
// (zeros) when elementwise_affine and bias (PyTorch 2.1's bias=False: weight only, no "bias" in
// the state_dict).
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true, ModuleOptions opts = {})
      : LayerNorm(dim, eps, elementwise_affine, opts, true) {}
  // PyTorch's order, bias after elementwise_affine. `bias` must be a bool (a template, so that a
  // braced {} in its place is the ModuleOptions of the form above, as it was before this form
  // existed, instead of a silent bias=false).
  template <typename Bias, std::enable_if_t<std::is_same_v<Bias, bool>, int> = 0>
  LayerNorm(int64_t dim, double eps, bool elementwise_affine, Bias bias, ModuleOptions opts = {})
      : LayerNorm(dim, eps, elementwise_affine, opts, bias) {}
  std::string type_name() const override { return "LayerNorm"; }
  DTensor forward(const DTensor& x) override;

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  LayerNorm(int64_t dim, double eps, bool elementwise_affine, const ModuleOptions& opts, bool bias);
  double eps_;
};

// RMS norm over the last dim: "weight" [dim] (ones) when elementwise_affine (no parameter
// otherwise). eps = nullopt: machine epsilon.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt, ModuleOptions opts = {})
      : RMSNorm(dim, eps, opts, true) {}
  // PyTorch's order, elementwise_affine after eps; a bool only (as LayerNorm's bias: a braced {}
  // there is the ModuleOptions of the form above, not a silent elementwise_affine=false).
  template <typename Affine, std::enable_if_t<std::is_same_v<Affine, bool>, int> = 0>
  RMSNorm(int64_t dim, std::optional<double> eps, Affine elementwise_affine,
          ModuleOptions opts = {})
      : RMSNorm(dim, eps, opts, elementwise_affine) {}
  std::string type_name() const override { return "RMSNorm"; }
  DTensor forward(const DTensor& x) override;

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  RMSNorm(int64_t dim, std::optional<double> eps, const ModuleOptions& opts,
          bool elementwise_affine);
  std::optional<double> eps_;
};

// y = x1^T weight[o] x2 + bias[o] for every output feature o (PyTorch's Bilinear, round 9).
// x1 (*, in1_features) and x2 (*, in2_features) share their leading dims. Parameters "weight"
// [out, in1, in2] and "bias" [out] (when `bias`), both uniform on [-1/sqrt(in1), 1/sqrt(in1)).
// forward is an exact composite: matmul(x1, weight as [in1, out in2]), times x2, summed over in2.
class Bilinear : public TwoInputModule {
 public:
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true,
           ModuleOptions opts = {});
  std::string type_name() const override { return "Bilinear"; }
  using TwoInputModule::forward;
  DTensor forward(const DTensor& x1, const DTensor& x2) override;
  std::array<std::string_view, 2> input_names() const override { return {"input1", "input2"}; }
  int64_t in1_features() const { return in1_; }
  int64_t in2_features() const { return in2_; }
  int64_t out_features() const { return out_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  int64_t in1_, in2_, out_;
};

// EmbeddingBag's options after (num_embeddings, embedding_dim), PyTorch's names and defaults
// (sparse and _weight are not offered).
struct EmbeddingBagOptions {
  std::optional<double> max_norm = std::nullopt;
  double norm_type = 2.0;
  bool scale_grad_by_freq = false;
  std::string mode = "mean";  // "sum", "mean" or "max"
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx = std::nullopt;
};

// PyTorch's EmbeddingBag (round 9): "weight" [num_embeddings, embedding_dim], standard normal,
// the padding_idx row zero. forward_bags(input, offsets, per_sample_weights) reduces the looked-up
// rows of each bag by mode: a 2-D input [B, L] is B bags of L (no offsets); a 1-D input with
// 1-D offsets (the start of each bag; with include_last_offset the last entry ends the last bag)
// has len(offsets) bags (len(offsets) - 1 with include_last_offset, whose last entry must then be
// the input's size), read to the host to number the bags. Entries equal to padding_idx
// are left out (an empty or all-padding bag gives zeros; mean divides by the bag's other
// entries); per_sample_weights (input's shape) scale the rows, mode "sum" only. An exact
// composite of embedding (with max_norm / norm_type / scale_grad_by_freq as Embedding's),
// index_add (sum, mean) and scatter_reduce amax (max; ties split the gradient evenly where
// PyTorch gives it to the first, the same row's total). forward(x) is forward_bags(x).
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, EmbeddingBagOptions options = {},
               ModuleOptions opts = {});
  std::string type_name() const override { return "EmbeddingBag"; }
  DTensor forward(const DTensor& input) override { return forward_bags(input); }
  DTensor forward_bags(const DTensor& input, const DTensor& offsets = {},
                       const DTensor& per_sample_weights = {});
  const EmbeddingBagOptions& options() const { return options_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  EmbeddingBagOptions options_;
};

namespace detail {
// A self-mesh parameter of `shape` in opts' dtype/device: uniform on [-bound, bound) drawn
// from opts' generator (the CPU default one when null).
DTensor uniform_parameter(IntSpan shape, double bound, const ModuleOptions& opts);
// Standard normal values, same rules.
DTensor normal_parameter(IntSpan shape, const ModuleOptions& opts);
// Constant values (no random draws).
DTensor constant_parameter(IntSpan shape, double value, const ModuleOptions& opts);
}  // namespace detail

}  // namespace dtensor::nn
