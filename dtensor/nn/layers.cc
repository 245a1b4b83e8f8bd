#include "dtensor/nn/layers.h"

#include <cmath>

#include "dtensor/nn/functional.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
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

// PyTorch's _fill_padding_idx_with_zero: the rank holding global row padding_idx of the
// (possibly vocab-sharded) table zeroes its local copy of it; no communication.
void Embedding::zero_padding_row() {
  if (!padding_idx_) return;
  const DTensor& w = param("weight");
  const LocalShard mine = w.spec().local_shard();
  if (mine.shape.empty()) return;  // this rank is outside the table's mesh
  const int64_t row = *padding_idx_ - mine.offset[0];
  if (row >= 0 && row < mine.shape[0]) Tensor(w.to_local()).narrow(0, row, 1).zero_();
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

}  // namespace dtensor::nn
