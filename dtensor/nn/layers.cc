#include "dtensor/nn/layers.h"

#include <cmath>
#include <utility>
#include <vector>

#include "dtensor/nn/functional.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {
namespace detail {

namespace {
Generator* generator_of(const ModuleOptions& opts) {
  return opts.generator != nullptr ? opts.generator : &default_generator(Device());
}
}  // namespace

// On the meta device (a dry run's model) a parameter is only its shape and dtype: no values are
// drawn, and the generator does not advance.
namespace {
DTensor meta_parameter(IntSpan shape, const ModuleOptions& opts) {
  return local_dtensor(empty(shape, TensorOptions(opts.dtype, opts.device)));
}
}  // namespace

DTensor uniform_parameter(IntSpan shape, double bound, const ModuleOptions& opts) {
  if (opts.device.is_meta()) return meta_parameter(shape, opts);
  Tensor t = empty(shape, TensorOptions(opts.dtype));
  uniform_(t, -bound, bound, generator_of(opts));
  return local_dtensor(t.to(opts.device));
}

DTensor normal_parameter(IntSpan shape, const ModuleOptions& opts) {
  if (opts.device.is_meta()) return meta_parameter(shape, opts);
  Tensor t = randn(shape, TensorOptions(opts.dtype), generator_of(opts));
  return local_dtensor(t.to(opts.device));
}

DTensor constant_parameter(IntSpan shape, double value, const ModuleOptions& opts) {
  return local_dtensor(full(shape, Scalar(value), TensorOptions(opts.dtype, opts.device)));
}

}  // namespace detail

namespace {
// The mesh of a module's input, which its parameters are taken onto (functional::on_mesh: a
// self-mesh parameter counts as Replicate there) before the op's one DTensor form runs.
const DeviceMesh& input_mesh(const DTensor& x, std::string_view op, std::string_view what) {
  DT_CHECK(x.defined(), "[%s] %s is undefined (expected a DTensor)", op, what);
  return x.device_mesh();
}
// The parameter `name` taken onto `mesh`, or an undefined DTensor when the module has none.
DTensor param_on(const Module& m, std::string_view name, const DeviceMesh& mesh,
                 std::string_view op) {
  return m.has_param(name) ? functional::on_mesh(m.param(name), mesh, op, name) : DTensor();
}
// PyTorch's _fill_padding_idx_with_zero: the rank holding global row `row` of the (possibly
// vocab-sharded) table zeroes its local copy of it; no communication.
void zero_row(const DTensor& w, std::optional<int64_t> row) {
  if (!row) return;
  const LocalShard mine = w.spec().local_shard();
  if (mine.shape.empty()) return;  // this rank is outside the table's mesh
  const int64_t local = *row - mine.offset[0];
  if (local >= 0 && local < mine.shape[0]) Tensor(w.to_local()).narrow(0, local, 1).zero_();
}
// A norm's normalised shape: the last dim of x.
int64_t last_dim(const DTensor& x, std::string_view op) {
  DT_CHECK(x.dim() >= 1, "[%s] input must have at least 1 dim, got a 0-d tensor", op);
  return x.size(-1);
}
}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, ModuleOptions opts)
    : in_(in_features), out_(out_features) {
  DT_CHECK(in_features >= 0 && out_features >= 0,
           "[Linear] in_features %d and out_features %d must be >= 0", in_features, out_features);
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  register_parameter("weight", detail::uniform_parameter({out_features, in_features}, bound, opts));
  if (bias) register_parameter("bias", detail::uniform_parameter({out_features}, bound, opts));
}

void Linear::reset_own_parameters(Generator* gen) {
  const double bound = in_ > 0 ? 1.0 / std::sqrt(static_cast<double>(in_)) : 0.0;
  uniform_(param("weight"), -bound, bound, gen);
  if (has_param("bias")) uniform_(param("bias"), -bound, bound, gen);
}

DTensor Linear::forward(const DTensor& x) {
  constexpr std::string_view kOp = "linear";
  const DeviceMesh& mesh = input_mesh(x, kOp, "input");
  DT_CHECK(has_param("weight"), "[%s] weight is undefined (expected a DTensor)", kOp);
  return ::dtensor::linear(x, param_on(*this, "weight", mesh, kOp),
                           param_on(*this, "bias", mesh, kOp));
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, const ModuleOptions& opts,
                     std::optional<int64_t> padding_idx, std::optional<double> max_norm,
                     double norm_type, bool scale_grad_by_freq)
    : num_(num_embeddings),
      dim_(embedding_dim),
      max_norm_(max_norm),
      norm_type_(norm_type),
      scale_grad_by_freq_(scale_grad_by_freq) {
  DT_CHECK(num_embeddings >= 0 && embedding_dim >= 0,
           "[Embedding] num_embeddings %d and embedding_dim %d must be >= 0", num_embeddings,
           embedding_dim);
  if (padding_idx) {
    DT_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings,
             "[Embedding] padding_idx %d must be within num_embeddings (expected %d <= "
             "padding_idx < %d)",
             *padding_idx, -num_embeddings, num_embeddings);
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  register_parameter("weight", detail::normal_parameter({num_embeddings, embedding_dim}, opts));
  zero_padding_row();
}

// PyTorch's _fill_padding_idx_with_zero (Embedding, EmbeddingBag).
void Embedding::zero_padding_row() {
  zero_row(param("weight"), padding_idx_);
}

void Embedding::reset_own_parameters(Generator* gen) {
  normal_(param("weight"), 0.0, 1.0, gen);
  zero_padding_row();
}

DTensor Embedding::forward(const DTensor& indices) {
  constexpr std::string_view kOp = "embedding";
  const DeviceMesh& mesh = input_mesh(indices, kOp, "indices");
  return ::dtensor::embedding(indices, param_on(*this, "weight", mesh, kOp), padding_idx_,
                              max_norm_, norm_type_, scale_grad_by_freq_);
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool elementwise_affine, const ModuleOptions& opts,
                     bool bias)
    : eps_(eps) {
  DT_CHECK(dim >= 0, "[LayerNorm] dim %d must be >= 0", dim);
  if (!elementwise_affine) return;
  register_parameter("weight", detail::constant_parameter({dim}, 1.0, opts));
  if (bias) register_parameter("bias", detail::constant_parameter({dim}, 0.0, opts));
}

void LayerNorm::reset_own_parameters(Generator*) {
  if (has_param("weight")) Tensor(param("weight").to_local()).fill_(Scalar(1.0));
  if (has_param("bias")) Tensor(param("bias").to_local()).zero_();
}

DTensor LayerNorm::forward(const DTensor& x) {
  constexpr std::string_view kOp = "layer_norm";
  const DeviceMesh& mesh = input_mesh(x, kOp, "input");
  const int64_t d = last_dim(x, kOp);
  return ::dtensor::layer_norm(x, IntSpan(&d, 1), param_on(*this, "weight", mesh, kOp),
                               param_on(*this, "bias", mesh, kOp), eps_);
}

RMSNorm::RMSNorm(int64_t dim, std::optional<double> eps, const ModuleOptions& opts,
                 bool elementwise_affine)
    : eps_(eps) {
  DT_CHECK(dim >= 0, "[RMSNorm] dim %d must be >= 0", dim);
  if (elementwise_affine) {
    register_parameter("weight", detail::constant_parameter({dim}, 1.0, opts));
  }
}

void RMSNorm::reset_own_parameters(Generator*) {
  if (has_param("weight")) Tensor(param("weight").to_local()).fill_(Scalar(1.0));
}

DTensor RMSNorm::forward(const DTensor& x) {
  constexpr std::string_view kOp = "rms_norm";
  const DeviceMesh& mesh = input_mesh(x, kOp, "input");
  const int64_t d = last_dim(x, kOp);
  return ::dtensor::rms_norm(x, IntSpan(&d, 1), param_on(*this, "weight", mesh, kOp), eps_);
}

Bilinear::Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias,
                   ModuleOptions opts)
    : in1_(in1_features), in2_(in2_features), out_(out_features) {
  DT_CHECK(in1_features > 0 && in2_features >= 0 && out_features >= 0,
           "[Bilinear] in1_features %d must be > 0, in2_features %d and out_features %d >= 0",
           in1_features, in2_features, out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in1_features));
  register_parameter(
      "weight", detail::uniform_parameter({out_features, in1_features, in2_features}, bound, opts));
  if (bias) register_parameter("bias", detail::uniform_parameter({out_features}, bound, opts));
}

void Bilinear::reset_own_parameters(Generator* gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in1_));
  uniform_(param("weight"), -bound, bound, gen);
  if (has_param("bias")) uniform_(param("bias"), -bound, bound, gen);
}

DTensor Bilinear::forward(const DTensor& x1, const DTensor& x2) {
  constexpr std::string_view kOp = "bilinear";
  const DeviceMesh& mesh = input_mesh(x1, kOp, "input1");
  input_mesh(x2, kOp, "input2");
  DT_CHECK(x1.dim() >= 1 && x1.dim() == x2.dim() && x1.size(-1) == in1_ && x2.size(-1) == in2_ &&
               Shape(x1.shape().begin(), x1.shape().end() - 1) ==
                   Shape(x2.shape().begin(), x2.shape().end() - 1),
           "[%s] expected input1 (*, %d) and input2 (*, %d) with the same leading dims, got %s and "
           "%s",
           kOp, in1_, in2_, shape_str(x1.shape()), shape_str(x2.shape()));
  const DTensor w = param_on(*this, "weight", mesh, kOp);
  // [.., out in2] = x1 @ weight as [in1, out in2]; times x2 and summed over in2.
  const DTensor t = matmul(x1, reshape(permute(w, {1, 0, 2}), {in1_, out_ * in2_}));
  Shape split(x1.shape().begin(), x1.shape().end() - 1);
  split.push_back(out_);
  split.push_back(in2_);
  const DTensor y = sum(mul(reshape(t, split), unsqueeze(x2, -2)), {-1});
  return has_param("bias") ? add(y, param_on(*this, "bias", mesh, kOp)) : y;
}

EmbeddingBag::EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim,
                           EmbeddingBagOptions options, ModuleOptions opts)
    : options_(std::move(options)) {
  DT_CHECK(num_embeddings >= 0 && embedding_dim >= 0,
           "[EmbeddingBag] num_embeddings %d and embedding_dim %d must be >= 0", num_embeddings,
           embedding_dim);
  DT_CHECK(options_.mode == "sum" || options_.mode == "mean" || options_.mode == "max",
           "[EmbeddingBag] mode has to be one of sum, mean or max, got '%s'", options_.mode);
  if (options_.padding_idx) {
    int64_t& pad = *options_.padding_idx;
    DT_CHECK(pad >= -num_embeddings && pad < num_embeddings,
             "[EmbeddingBag] padding_idx %d must be within num_embeddings (expected %d <= "
             "padding_idx < %d)",
             pad, -num_embeddings, num_embeddings);
    if (pad < 0) pad += num_embeddings;
  }
  register_parameter("weight", detail::normal_parameter({num_embeddings, embedding_dim}, opts));
  zero_row(param("weight"), options_.padding_idx);
}

void EmbeddingBag::reset_own_parameters(Generator* gen) {
  normal_(param("weight"), 0.0, 1.0, gen);
  zero_row(param("weight"), options_.padding_idx);
}

DTensor EmbeddingBag::forward_bags(const DTensor& input, const DTensor& offsets,
                                   const DTensor& per_sample_weights) {
  constexpr std::string_view kOp = "embedding_bag";
  const DeviceMesh& mesh = input_mesh(input, kOp, "input");
  const EmbeddingBagOptions& o = options_;
  DT_CHECK(!per_sample_weights.defined() || o.mode == "sum",
           "[%s] per_sample_weights is only supported for mode='sum' (got mode='%s')", kOp, o.mode);
  DT_CHECK(!per_sample_weights.defined() || per_sample_weights.shape() == input.shape(),
           "[%s] per_sample_weights %s must have the input's shape %s", kOp,
           shape_str(per_sample_weights.shape()), shape_str(input.shape()));
  // The bag of every entry of the flattened input, numbered on the host.
  const int64_t n = input.numel();
  std::vector<int64_t> bag_of(static_cast<size_t>(n));
  int64_t bags = 0;
  if (input.dim() == 2) {
    DT_CHECK(!offsets.defined(), "[%s] if input is 2D, then offsets has to be None", kOp);
    bags = input.size(0);
    for (int64_t i = 0; i < n; ++i) bag_of[i] = i / input.size(1);
  } else {
    DT_CHECK(input.dim() == 1 && offsets.defined() && offsets.dim() == 1,
             "[%s] input has to be 1D or 2D Tensor, with 1D offsets for a 1D input, got input "
             "%dD and %s offsets",
             kOp, input.dim(), offsets.defined() ? "defined" : "no");
    const std::vector<int64_t> off = offsets.full_tensor().to(kInt64).to_vector<int64_t>();
    bags = static_cast<int64_t>(off.size()) - (o.include_last_offset ? 1 : 0);
    DT_CHECK(off.empty() || off[0] == 0,
             "[%s] offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
             "from position 0. However, got %d",
             kOp, off.empty() ? 0 : off[0]);
    for (size_t b = 0; b < off.size(); ++b) {
      DT_CHECK(off[b] <= n && (b == 0 || off[b] >= off[b - 1]),
               "[%s] offsets must be nondecreasing and at most the input's size %d, got %d at %d",
               kOp, n, off[b], static_cast<int64_t>(b));
    }
    for (int64_t b = 0; b < bags; ++b) {
      const int64_t end = b + 1 < static_cast<int64_t>(off.size()) ? off[b + 1] : n;
      for (int64_t i = off[b]; i < end; ++i) bag_of[i] = b;
    }
    DT_CHECK(!o.include_last_offset || (!off.empty() && off.back() == n),
             "[%s] with include_last_offset the last offset must be the input's size %d", kOp, n);
  }
  const DTensor flat = reshape(input, {n});
  const Tensor bag_local = from_vector<int64_t>(bag_of, {n}).to(input.to_local().device());
  const DTensor bag = functional::on_mesh(local_dtensor(bag_local), mesh, kOp, "bag index");
  const DTensor rows = ::dtensor::embedding(flat, param_on(*this, "weight", mesh, kOp),
                                            o.padding_idx, o.max_norm, o.norm_type,
                                            o.scale_grad_by_freq);  // [n, D]
  const int64_t dim = rows.size(1);
  const DTensor keep = o.padding_idx ? ne(flat, Scalar(*o.padding_idx)) : DTensor();
  const std::vector<Placement> replicate(static_cast<size_t>(mesh.ndim()), Replicate());
  const DTensor out0 = ::dtensor::zeros({bags, dim}, mesh, replicate, rows.dtype());
  const DTensor count0 = ::dtensor::zeros({bags}, mesh, replicate, rows.dtype());
  if (o.mode == "max") {
    const DTensor src =
        keep.defined() ? where(unsqueeze(keep, 1), rows, full_like(rows, Scalar(-INFINITY))) : rows;
    const DTensor index = expand(unsqueeze(bag, 1), {n, dim});
    const DTensor m = scatter_reduce(out0, 0, index, src, "amax", false);
    if (!keep.defined()) return m;
    // A bag of padding only stays zero, as PyTorch's.
    const DTensor count = index_add(count0, 0, bag, cast(keep, rows.dtype()));
    return where(unsqueeze(gt(count, Scalar(0.0)), 1), m, full_like(m, Scalar(0.0)));
  }
  DTensor src = rows;
  if (keep.defined()) src = mul(src, unsqueeze(cast(keep, rows.dtype()), 1));
  if (per_sample_weights.defined()) {
    src = mul(
        src,
        unsqueeze(
            reshape(functional::on_mesh(per_sample_weights, mesh, kOp, "per_sample_weights"), {n}),
            1));
  }
  const DTensor sum = index_add(out0, 0, bag, src);
  if (o.mode == "sum") return sum;
  const DTensor ones =
      keep.defined() ? cast(keep, rows.dtype()) : full_like(cast(flat, rows.dtype()), Scalar(1.0));
  const DTensor count = index_add(count0, 0, bag, ones);
  return div(sum, unsqueeze(clamp_min(count, Scalar(1.0)), 1));
}

}  // namespace dtensor::nn
