#include "dtensor/nn/layers.h"

#include <cmath>

#include "dtensor/nn/functional.h"
#include "dtensor/ops/elementwise/elementwise.h"
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

DTensor uniform_parameter(IntSpan shape, double bound, const ModuleOptions& opts) {
  Tensor t = empty(shape, TensorOptions(opts.dtype));
  uniform_(t, -bound, bound, generator_of(opts));
  return local(t.to(opts.device));
}

DTensor normal_parameter(IntSpan shape, const ModuleOptions& opts) {
  Tensor t = randn(shape, TensorOptions(opts.dtype), generator_of(opts));
  return local(t.to(opts.device));
}

DTensor constant_parameter(IntSpan shape, double value, const ModuleOptions& opts) {
  return local(full(shape, Scalar(value), TensorOptions(opts.dtype, opts.device)));
}

}  // namespace detail

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
  return functional::linear(x, param("weight"), has_param("bias") ? param("bias") : DTensor());
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, ModuleOptions opts)
    : num_(num_embeddings), dim_(embedding_dim) {
  DT_CHECK(num_embeddings >= 0 && embedding_dim >= 0,
           "[Embedding] num_embeddings %d and embedding_dim %d must be >= 0", num_embeddings,
           embedding_dim);
  register_parameter("weight", detail::normal_parameter({num_embeddings, embedding_dim}, opts));
}

void Embedding::reset_own_parameters(Generator* gen) {
  normal_(param("weight"), 0.0, 1.0, gen);
}

DTensor Embedding::forward(const DTensor& indices) {
  return functional::embedding(indices, param("weight"));
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool elementwise_affine, ModuleOptions opts)
    : eps_(eps) {
  DT_CHECK(dim >= 0, "[LayerNorm] dim %d must be >= 0", dim);
  if (elementwise_affine) {
    register_parameter("weight", detail::constant_parameter({dim}, 1.0, opts));
    register_parameter("bias", detail::constant_parameter({dim}, 0.0, opts));
  }
}

void LayerNorm::reset_own_parameters(Generator*) {
  if (has_param("weight")) Tensor(param("weight").to_local()).fill_(Scalar(1.0));
  if (has_param("bias")) Tensor(param("bias").to_local()).zero_();
}

DTensor LayerNorm::forward(const DTensor& x) {
  return functional::layer_norm(x, has_param("weight") ? param("weight") : DTensor(),
                                has_param("bias") ? param("bias") : DTensor(), eps_);
}

RMSNorm::RMSNorm(int64_t dim, std::optional<double> eps, ModuleOptions opts) : eps_(eps) {
  DT_CHECK(dim >= 0, "[RMSNorm] dim %d must be >= 0", dim);
  register_parameter("weight", detail::constant_parameter({dim}, 1.0, opts));
}

void RMSNorm::reset_own_parameters(Generator*) {
  Tensor(param("weight").to_local()).fill_(Scalar(1.0));
}

DTensor RMSNorm::forward(const DTensor& x) {
  return functional::rms_norm(x, param("weight"), eps_);
}

}  // namespace dtensor::nn
