// Normalisation layers over the channels of [N, C, *] inputs: BatchNorm1d/2d/3d, SyncBatchNorm,
// GroupNorm, InstanceNorm1d/2d/3d, LocalResponseNorm (PyTorch names, arguments, defaults, parameter
// and buffer initialisation), written with dtensor/ops/norm/norm.h.
//
// Running statistics are buffers, not parameters (no gradient, not in parameters()): local
// DTensors (self mesh) running_mean [C] (zeros) and running_var [C] (ones), taken as Replicate
// on the input's mesh in forward, so the in-place update of a training step writes the module's
// own values, identical on every rank. The mode is Module::train() / eval(). They are
// registered buffers (Module::named_buffers: "running_mean", "running_var" and BatchNorm's
// "num_batches_tracked", an int64 [] CPU tensor), as PyTorch's, so checkpoints keep them.
//
// SyncBatchNorm is BatchNorm on any [N, C, *] input: dtensor's batch_norm on a batch-sharded
// DTensor already computes the global statistics with one all-reduce (no process group to pass;
// the input's mesh says which ranks share the batch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dtensor/nn/module.h"

namespace dtensor::nn {

// The state BatchNorm and InstanceNorm share (PyTorch's _NormBase): num_features > 0, eps,
// momentum, the parameters "weight" [C] (ones) and "bias" [C] (zeros) when affine, and with
// track_running_stats the buffers running_mean [C] (zeros), running_var [C] (ones) and
// num_batches_tracked (int64 [] on the CPU, 0), registered in PyTorch's state_dict order
// (_NormBase registers the count for InstanceNorm too, which never advances it).
class NormBase : public Module {
 public:
  // The name given at construction ("BatchNorm", "InstanceNorm"); subclasses may override it.
  std::string type_name() const override { return type_; }
  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  std::optional<double> momentum() const { return momentum_; }
  bool track_running_stats() const { return running_mean_.defined(); }
  // The buffers (undefined without track_running_stats).
  const DTensor& running_mean() const { return running_mean_; }
  const DTensor& running_var() const { return running_var_; }
  int64_t num_batches_tracked() const;
  // PyTorch's reset_running_stats(): zeros, ones, 0.
  void reset_running_stats();

 protected:
  // `type` is type_name(), also while the state is registered (in the base constructor, where a
  // subclass's override is not called yet), so messages name the layer ("[BatchNorm] ...").
  NormBase(const char* type, int64_t num_features, double eps, std::optional<double> momentum,
           bool affine, bool track_running_stats, const ModuleOptions& opts);
  // reset_running_stats() and the affine parameters back to ones and zeros.
  void reset_own_parameters(Generator* gen) override;

  const char* type_;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  DTensor running_mean_;
  DTensor running_var_;
  DTensor num_batches_tracked_;  // undefined without track_running_stats
};

// Batch normalisation over every dim but the channels (dim 1). momentum = nullopt: the
// cumulative moving average (momentum 1 / num_batches_tracked), as PyTorch's momentum=None. In
// training mode (or without running statistics) the batch statistics normalise and update the
// running ones; in eval mode the running statistics normalise.
class BatchNorm : public NormBase {
 public:
  BatchNorm(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
            bool affine = true, bool track_running_stats = true, ModuleOptions opts = {});
  DTensor forward(const DTensor& x) override;

 protected:
  // Throws "[<type>] expected ..." when x's dim count is not one the layer takes.
  virtual void check_input_dim(const DTensor& x) const;
};

// BatchNorm over N spatial dims (libtorch's BatchNormImplBase<D>): BatchNorm1d takes [N, C] or
// [N, C, L], BatchNorm2d [N, C, H, W], BatchNorm3d [N, C, D, H, W].
template <int N>
class BatchNormNd : public BatchNorm {
 public:
  using BatchNorm::BatchNorm;
  std::string type_name() const override;

 protected:
  void check_input_dim(const DTensor& x) const override;
};

// Its members are instantiated in norm_layers.cc for N = 1, 2, 3 only.
using BatchNorm1d = BatchNormNd<1>;
using BatchNorm2d = BatchNormNd<2>;
using BatchNorm3d = BatchNormNd<3>;

// Any [N, C, *] input (see the file comment).
class SyncBatchNorm : public BatchNorm {
 public:
  using BatchNorm::BatchNorm;
  std::string type_name() const override { return "SyncBatchNorm"; }
};

// Group normalisation: "weight" [num_channels] (ones) and "bias" (zeros) when affine.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            ModuleOptions opts = {});
  std::string type_name() const override { return "GroupNorm"; }
  DTensor forward(const DTensor& x) override;
  int64_t num_groups() const { return num_groups_; }

 protected:
  void reset_own_parameters(Generator* gen) override;

 private:
  int64_t num_groups_;
  double eps_;
};

// Instance normalisation (PyTorch's defaults: affine = false, track_running_stats = false).
// Takes a batched [N, C, *spatial] or an unbatched [C, *spatial] input (spatial_dims() spatial
// dims). With running statistics, eval mode normalises with them. momentum = nullopt is
// PyTorch's momentum=None, which for InstanceNorm (unlike BatchNorm) is momentum 0: training
// steps leave the running statistics as they are (_InstanceNorm passes 0.0 to instance_norm
// and never counts num_batches_tracked).
class InstanceNorm : public NormBase {
 public:
  InstanceNorm(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
               bool affine = false, bool track_running_stats = false, ModuleOptions opts = {});
  DTensor forward(const DTensor& x) override;

 protected:
  // The number of spatial dims of a batched input (1 for InstanceNorm1d).
  virtual int64_t spatial_dims() const = 0;
};

// InstanceNorm over N spatial dims (libtorch's InstanceNormImpl<D>): InstanceNorm1d takes
// [N, C, L] or [C, L], InstanceNorm2d [N, C, H, W] or [C, H, W].
template <int N>
class InstanceNormNd : public InstanceNorm {
 public:
  using InstanceNorm::InstanceNorm;
  std::string type_name() const override;

 protected:
  int64_t spatial_dims() const override { return N; }
};

// Its members are instantiated in norm_layers.cc for N = 1, 2, 3 only.
using InstanceNorm1d = InstanceNormNd<1>;
using InstanceNorm2d = InstanceNormNd<2>;
using InstanceNorm3d = InstanceNormNd<3>;

// Local response normalisation across channels (PyTorch's LocalResponseNorm, round 9):
// x / (k + alpha / size * sum of x^2 over the `size` channels around c)^beta, on (N, C, *)
// inputs of 3 or more dims; written as PyTorch's F.local_response_norm (x^2 zero-padded along the
// channels by size / 2 before and (size - 1) / 2 after, averaged by avg_pool2d / avg_pool3d with
// a (size, 1[, 1]) window), so values and gradients follow PyTorch's.
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
  std::string type_name() const override { return "LocalResponseNorm"; }
  DTensor forward(const DTensor& x) override;
  int64_t size() const { return size_; }
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  double k() const { return k_; }

 private:
  int64_t size_;
  double alpha_, beta_, k_;
};

}  // namespace dtensor::nn
