// Parameterless layers with torch.nn's names, arguments and defaults: Identity, Flatten,
// Unflatten, Dropout, PixelShuffle / PixelUnshuffle / ChannelShuffle, Dropout1d / 2d / 3d,
// AlphaDropout, FeatureAlphaDropout, Unfold and Fold. forward calls the DTensor op (view ops of
// dtensor/ops/view, dropout of dtensor/rng/dtensor_random.h), so a sharded input keeps its shards
// as the op allows.
#pragma once

#include <cstdint>
#include <string>

#include "dtensor/nn/module.h"
#include "dtensor/rng/generator.h"

namespace dtensor::nn {

// Returns its input (the same DTensor, no copy). PyTorch's Identity ignores its constructor's
// arguments; this one takes none.
class Identity : public Module {
 public:
  Identity() = default;
  std::string type_name() const override { return "Identity"; }
  DTensor forward(const DTensor& x) override { return x; }
};

// flatten(x, start_dim, end_dim): dims start_dim..end_dim merged into one; the defaults keep
// the batch dim (PyTorch's start_dim=1, end_dim=-1).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim_(start_dim), end_dim_(end_dim) {}
  std::string type_name() const override { return "Flatten"; }
  DTensor forward(const DTensor& x) override;
  int64_t start_dim() const { return start_dim_; }
  int64_t end_dim() const { return end_dim_; }

 private:
  int64_t start_dim_;
  int64_t end_dim_;
};

// unflatten(x, dim, sizes): dim split into `sizes` (one of them may be -1).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, IntSpan unflattened_size)
      : dim_(dim), sizes_(unflattened_size.begin(), unflattened_size.end()) {}
  std::string type_name() const override { return "Unflatten"; }
  DTensor forward(const DTensor& x) override;
  int64_t dim() const { return dim_; }
  const Shape& unflattened_size() const { return sizes_; }

 private:
  int64_t dim_;
  Shape sizes_;
};

// dropout(x, p) while the module is training (Module::train, the default): each element is
// zeroed with probability p and the rest scaled by 1 / (1 - p), with the DTensor RNG
// (dtensor/rng/dtensor_random.h), so the mask of global element i depends only on i and the
// generator state: a sharded input gets exactly the full input's mask, on every rank, with no
// communication. In eval() it returns its input and draws nothing. `gen`: the generator to draw
// from (nullptr: the default one of the input's device). p outside [0, 1] raises
// "[Dropout] dropout probability has to be between 0 and 1, but got 1.5" (PyTorch's words).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  std::string type_name() const override { return "Dropout"; }
  DTensor forward(const DTensor& x) override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

// ---- Round 9 (helper INV): the shuffles and the other dropouts of torch.nn.

// pixel_shuffle(x, upscale_factor): (*, C r^2, H, W) -> (*, C, H r, W r), a reshape / permute /
// reshape as PyTorch's (exact; gradients are the inverse permutation).
class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor);
  std::string type_name() const override { return "PixelShuffle"; }
  DTensor forward(const DTensor& x) override;
  int64_t upscale_factor() const { return r_; }

 private:
  int64_t r_;
};

// pixel_unshuffle(x, downscale_factor): (*, C, H r, W r) -> (*, C r^2, H, W), PixelShuffle's
// inverse.
class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor);
  std::string type_name() const override { return "PixelUnshuffle"; }
  DTensor forward(const DTensor& x) override;
  int64_t downscale_factor() const { return r_; }

 private:
  int64_t r_;
};

// channel_shuffle(x, groups): (N, C, *) with channels regrouped as (C/g, g) from (g, C/g)
// (PyTorch's ChannelShuffle); C must be divisible by groups.
class ChannelShuffle : public Module {
 public:
  explicit ChannelShuffle(int64_t groups);
  std::string type_name() const override { return "ChannelShuffle"; }
  DTensor forward(const DTensor& x) override;
  int64_t groups() const { return groups_; }

 private:
  int64_t groups_;
};

// Channel-wise dropout (Dropout1d / 2d / 3d, and FeatureAlphaDropout below): in training, every
// (sample, channel) of an (N, C, *spatial) input is zeroed as a whole with probability p and the
// rest scaled by 1 / (1 - p) (p == 1: x * 0). Unbatched (C, *spatial) inputs (one spatial dim
// fewer) are taken for Dropout1d / 3d, as PyTorch's; Dropout2d takes PyTorch's 3-D input as
// (N, C, L) (PyTorch warns and does the same). The mask [N, C, 1, ..] is drawn replicated from
// dtensor's RNG (bernoulli through `gen`, else the default tracker), so every rank sees the same
// mask for any placement of x; PyTorch's distribution, not its draws. eval(): the input.
class FeatureDropoutNd : public Module {
 public:
  std::string type_name() const override { return name_; }
  DTensor forward(const DTensor& x) override;
  double p() const { return p_; }

 protected:
  FeatureDropoutNd(int64_t nd, const char* name, double p, Generator* gen, bool alpha = false);

 private:
  int64_t nd_;
  std::string name_;
  double p_;
  Generator* gen_;
  bool alpha_;
};

class Dropout1d : public FeatureDropoutNd {
 public:
  explicit Dropout1d(double p = 0.5, Generator* gen = nullptr)
      : FeatureDropoutNd(1, "Dropout1d", p, gen) {}
};
class Dropout2d : public FeatureDropoutNd {
 public:
  explicit Dropout2d(double p = 0.5, Generator* gen = nullptr)
      : FeatureDropoutNd(2, "Dropout2d", p, gen) {}
};
class Dropout3d : public FeatureDropoutNd {
 public:
  explicit Dropout3d(double p = 0.5, Generator* gen = nullptr)
      : FeatureDropoutNd(3, "Dropout3d", p, gen) {}
};

// AlphaDropout (SELU's dropout): in training, with keep mask m (probability 1 - p), alpha =
// 1.7580993408473766, a = 1 / sqrt((alpha^2 p + 1)(1 - p)): x (m a) + (m - 1) alpha a + alpha a p,
// PyTorch's formula (kept elements a x + alpha a p, dropped ones alpha a (p - 1)); p == 1: x * 0.
// The mask is dtensor's RNG's (as Dropout's). FeatureAlphaDropout: the same with one mask value
// per (sample, channel) of an (N, C, *) input (PyTorch's feature noise: no unbatched form).
class AlphaDropout : public Module {
 public:
  explicit AlphaDropout(double p = 0.5, Generator* gen = nullptr);
  std::string type_name() const override { return "AlphaDropout"; }
  DTensor forward(const DTensor& x) override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

class FeatureAlphaDropout : public FeatureDropoutNd {
 public:
  explicit FeatureAlphaDropout(double p = 0.5, Generator* gen = nullptr)
      : FeatureDropoutNd(0, "FeatureAlphaDropout", p, gen, true) {}
};

// Unfold (im2col) and Fold (col2im) with PyTorch's arguments: kernel_size, dilation (1),
// padding (0), stride (1), each one value or two (H, W). Unfold takes (N, C, H, W) or (C, H, W)
// and gives (N, C kh kw, L), L the number of blocks, channel index c kh kw + i kw + j; Fold is
// its adjoint ((N, C kh kw, L) or unbatched -> (N, C, output_size), overlapping blocks summed).
// Exact composites: Unfold stacks the kh kw strided slices of the zero-padded input; Fold
// spreads every kernel offset's block over the padded output (zeros interleaved by the stride,
// padded into place) and adds them in kernel order (PyTorch's col2im order), then crops.
class Unfold : public Module {
 public:
  explicit Unfold(IntSpan kernel_size, IntSpan dilation = {1}, IntSpan padding = {0},
                  IntSpan stride = {1});
  std::string type_name() const override { return "Unfold"; }
  DTensor forward(const DTensor& x) override;

 private:
  Shape kernel_size_, dilation_, padding_, stride_;
};

class Fold : public Module {
 public:
  Fold(IntSpan output_size, IntSpan kernel_size, IntSpan dilation = {1}, IntSpan padding = {0},
       IntSpan stride = {1});
  std::string type_name() const override { return "Fold"; }
  DTensor forward(const DTensor& x) override;

 private:
  Shape output_size_, kernel_size_, dilation_, padding_, stride_;
};

}  // namespace dtensor::nn
