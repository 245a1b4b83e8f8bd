// Parameterless layers with torch.nn's names, arguments and defaults: Identity, Flatten,
// Unflatten and Dropout. forward calls the DTensor op (view ops of dtensor/ops/view, dropout of
// dtensor/rng/dtensor_random.h), so a sharded input keeps its shards as the op allows.
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

}  // namespace dtensor::nn
