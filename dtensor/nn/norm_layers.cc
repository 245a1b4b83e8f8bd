#include "dtensor/nn/norm_layers.h"

#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {
namespace {

// `name` of m taken onto x's mesh (functional::on_mesh), or undefined when m has none.
DTensor param_on_input(const Module& m, std::string_view name, const DTensor& x) {
  return m.has_param(name)
             ? functional::on_mesh(m.param(name), x.device_mesh(), m.type_name(), name)
             : DTensor();
}

// A buffer taken onto x's mesh: a local buffer becomes a Replicate DTensor sharing its storage,
// so the op's in-place update writes the module's value.
DTensor buffer_on_input(const Module& m, const DTensor& b, const DTensor& x) {
  return functional::on_mesh(b, x.device_mesh(), m.type_name(), "running statistic");
}

void register_affine(Module& m, int64_t c, bool affine, const ModuleOptions& opts) {
  if (!affine) return;
  m.register_parameter("weight", detail::constant_parameter({c}, 1.0, opts));
  m.register_parameter("bias", detail::constant_parameter({c}, 0.0, opts));
}

void reset_affine(Module& m) {
  if (m.has_param("weight")) Tensor(m.param("weight").to_local()).fill_(Scalar(1.0));
  if (m.has_param("bias")) Tensor(m.param("bias").to_local()).zero_();
}

}  // namespace

// ---- NormBase -------------------------------------------------------------------------------
NormBase::NormBase(const char* type, int64_t num_features, double eps,
                   std::optional<double> momentum, bool affine, bool track_running_stats,
                   const ModuleOptions& opts)
    : type_(type), num_features_(num_features), eps_(eps), momentum_(momentum) {
  DT_CHECK(num_features > 0, "[%s] num_features %d must be > 0", type, num_features);
  register_affine(*this, num_features, affine, opts);
  if (!track_running_stats) return;
  running_mean_ = detail::constant_parameter({num_features}, 0.0, opts).detach();
  running_var_ = detail::constant_parameter({num_features}, 1.0, opts).detach();
  register_buffer("running_mean", running_mean_);
  register_buffer("running_var", running_var_);
  num_batches_tracked_ = local_dtensor(zeros({}, kInt64));
  register_buffer("num_batches_tracked", num_batches_tracked_);
}

int64_t NormBase::num_batches_tracked() const {
  return num_batches_tracked_.defined() ? num_batches_tracked_.to_local().data<int64_t>()[0] : 0;
}

void NormBase::reset_running_stats() {
  if (!running_mean_.defined()) return;
  Tensor(running_mean_.to_local()).zero_();
  Tensor(running_var_.to_local()).fill_(Scalar(1.0));
  Tensor(num_batches_tracked_.to_local()).zero_();
}

void NormBase::reset_own_parameters(Generator*) {
  reset_running_stats();
  reset_affine(*this);
}

// ---- BatchNorm ------------------------------------------------------------------------------
BatchNorm::BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                     bool track_running_stats, ModuleOptions opts)
    : NormBase("BatchNorm", num_features, eps, momentum, affine, track_running_stats, opts) {}

void BatchNorm::check_input_dim(const DTensor& x) const {
  DT_CHECK(x.dim() >= 2, "[%s] expected an input of at least 2 dims (N, C, ...), got %s",
           type_name(), shape_str(x.shape()));
}

template <int N>
std::string BatchNormNd<N>::type_name() const {
  constexpr const char* kNames[] = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d"};
  return kNames[N - 1];
}

// PyTorch's checks and messages (_check_input_dim).
template <int N>
void BatchNormNd<N>::check_input_dim(const DTensor& x) const {
  if constexpr (N == 1) {
    DT_CHECK(x.dim() == 2 || x.dim() == 3, "[%s] expected 2D or 3D input (got %dD input)",
             type_name(), x.dim());
  } else {
    DT_CHECK(x.dim() == N + 2, "[%s] expected %dD input (got %dD input)", type_name(), N + 2,
             x.dim());
  }
}

template class BatchNormNd<1>;
template class BatchNormNd<2>;
template class BatchNormNd<3>;

DTensor BatchNorm::forward(const DTensor& x) {
  DT_CHECK(x.defined(), "[%s] input is undefined (expected a DTensor)", type_name());
  check_input_dim(x);
  // PyTorch's _BatchNorm.forward: the step is counted in training mode, momentum = None is
  // the cumulative average, and without running statistics the batch statistics are used in
  // eval mode too.
  double factor = momentum_.value_or(0.0);
  if (is_training() && running_mean_.defined()) {
    // Counted as a step of its own when a step is captured (replay counts too); the cumulative
    // average's factor would change on every replay, so it is refused there.
    dtensor::detail::run_recorded("host", "num_batches_tracked", {}, {}, 0,
                                  [this](absl::Span<const Tensor>, absl::Span<Tensor>) {
                                    ++num_batches_tracked_.to_local().data<int64_t>()[0];
                                  });
    if (!momentum_) {
      dtensor::detail::refuse_in_capture(
          "BatchNorm with momentum = None (its cumulative-average factor changes every step)",
          /*even_inside=*/true);
      factor = 1.0 / static_cast<double>(num_batches_tracked());
    }
  }
  const bool use_batch_stats = is_training() || !running_mean_.defined();
  return ::dtensor::batch_norm(x, buffer_on_input(*this, running_mean_, x),
                               buffer_on_input(*this, running_var_, x),
                               param_on_input(*this, "weight", x), param_on_input(*this, "bias", x),
                               use_batch_stats, factor, eps_);
}

// ---- GroupNorm ------------------------------------------------------------------------------
GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine,
                     ModuleOptions opts)
    : num_groups_(num_groups), eps_(eps) {
  DT_CHECK(num_groups > 0 && num_channels % num_groups == 0,
           "[GroupNorm] num_channels %d must be divisible by num_groups %d", num_channels,
           num_groups);
  register_affine(*this, num_channels, affine, opts);
}

void GroupNorm::reset_own_parameters(Generator*) {
  reset_affine(*this);
}

DTensor GroupNorm::forward(const DTensor& x) {
  DT_CHECK(x.defined(), "[GroupNorm] input is undefined (expected a DTensor)");
  return ::dtensor::group_norm(x, num_groups_, param_on_input(*this, "weight", x),
                               param_on_input(*this, "bias", x), eps_);
}

// ---- InstanceNorm ---------------------------------------------------------------------------
// num_batches_tracked is a buffer only (PyTorch's instance_norm never counts).
InstanceNorm::InstanceNorm(int64_t num_features, double eps, std::optional<double> momentum,
                           bool affine, bool track_running_stats, ModuleOptions opts)
    : NormBase("InstanceNorm", num_features, eps, momentum, affine, track_running_stats, opts) {}

template <int N>
std::string InstanceNormNd<N>::type_name() const {
  constexpr const char* kNames[] = {"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"};
  return kNames[N - 1];
}

template class InstanceNormNd<1>;
template class InstanceNormNd<2>;
template class InstanceNormNd<3>;

DTensor InstanceNorm::forward(const DTensor& x) {
  DT_CHECK(x.defined(), "[%s] input is undefined (expected a DTensor)", type_name());
  const int64_t batched = spatial_dims() + 2;
  DT_CHECK(x.dim() == batched || x.dim() == batched - 1,
           "[%s] expected %dD or %dD input (got %dD input)", type_name(), batched - 1, batched,
           x.dim());
  const int64_t channel_dim = x.dim() == batched ? 1 : 0;
  DT_CHECK(x.size(channel_dim) == num_features_,
           "[%s] expected input's size at dim=%d to match num_features (%d), but got: %d.",
           type_name(), channel_dim, num_features_, x.size(channel_dim));
  // PyTorch: the input statistics in training mode or without running statistics.
  const bool use_input_stats = is_training() || !running_mean_.defined();
  const DTensor xb = x.dim() == batched ? x : x.unsqueeze(0);
  DTensor y = ::dtensor::instance_norm(
      xb, buffer_on_input(*this, running_mean_, x), buffer_on_input(*this, running_var_, x),
      param_on_input(*this, "weight", x), param_on_input(*this, "bias", x), use_input_stats,
      momentum_.value_or(0.0), eps_);
  return x.dim() == batched ? y : y.squeeze(0);
}

// ---- LocalResponseNorm ----------------------------------------------------------------------
LocalResponseNorm::LocalResponseNorm(int64_t size, double alpha, double beta, double k)
    : size_(size), alpha_(alpha), beta_(beta), k_(k) {
  DT_CHECK(size > 0, "[LocalResponseNorm] size must be > 0, got %d", size);
}

DTensor LocalResponseNorm::forward(const DTensor& x) {
  DT_CHECK(x.dim() >= 3,
           "[LocalResponseNorm] Expected 3D or higher dimensionality input (got %d dimensions)",
           x.dim());
  if (x.numel() == 0) return x;
  const int64_t before = size_ / 2, after = (size_ - 1) / 2;
  DTensor div = mul(x, x);
  if (x.dim() == 3) {
    div = pad(unsqueeze(div, 1), {0, 0, before, after});
    div = squeeze(avg_pool2d(div, {size_, 1}, {1}), 1);
  } else {
    div = reshape(div, {x.size(0), 1, x.size(1), x.size(2), -1});
    div = pad(div, {0, 0, 0, 0, before, after});
    div = reshape(squeeze(avg_pool3d(div, {size_, 1, 1}, {1}), 1), x.shape());
  }
  return dtensor::div(x, pow(add(mul(div, Scalar(alpha_)), Scalar(k_)), Scalar(beta_)));
}

}  // namespace dtensor::nn
