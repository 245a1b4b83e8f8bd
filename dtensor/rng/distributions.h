// Random distributions as data (RandomSpec) and the block generator behind every random op.
//
// Element mapping (the contract that makes random ops sharding-invariant, docs/RNG.md):
// a random op with base offset `o` (in Philox words, dtensor/rng/philox.h) over a tensor of global
// shape G gives the element with global row-major linear index i the words
// [o + i * W, o + (i + 1) * W), where W = words_per_element(spec):
//   uniform  float32/float16/bfloat16: 1, float64: 2
//   normal   float32/float16/bfloat16: 2, float64: 4     (Box-Muller, one normal per element)
//   bernoulli, dropout: 1                                  randint: 2
// After the op the generator's offset advances by words_to_reserve(spec, numel(G)) =
// numel(G) * W rounded up to a multiple of 4 (whole Philox blocks).
//
// A block (for example a DTensor shard) of G starting at `block_offset` is generated alone by
// fill_random(block, spec, seed, o, G, block_offset) and equals the same block cut from the
// full tensor: each element only depends on (seed, o, its global index).
#pragma once

#include <cstdint>
#include <string_view>

#include "dtensor/tensor/tensor.h"

namespace dtensor {

enum class RandomKind : uint8_t {
  kUniform,      // [low, high)
  kNormal,       // mean, stddev
  kBernoulli,    // 1 with probability p, else 0
  kRandint,      // integers in [int_low, int_high)
  kDropoutMask,  // 1 / (1 - p) with probability 1 - p, else 0 (the scaled dropout mask)
};

std::string_view random_kind_name(RandomKind k);  // "uniform", "normal", ...

// A distribution, its parameters and the dtype of the values. Only the fields of `kind` are
// read. Valid dtypes: uniform, normal, dropout mask: floating; bernoulli: any; randint:
// int32, int64 or floating.
struct RandomSpec {
  RandomKind kind = RandomKind::kUniform;
  DType dtype = DType::kFloat32;
  double low = 0.0, high = 1.0;       // uniform
  double mean = 0.0, stddev = 1.0;    // normal
  double p = 0.5;                     // bernoulli: P(1); dropout: P(drop)
  int64_t int_low = 0, int_high = 2;  // randint

  static RandomSpec uniform(DType dtype = DType::kFloat32, double low = 0.0, double high = 1.0);
  static RandomSpec normal(DType dtype = DType::kFloat32, double mean = 0.0, double stddev = 1.0);
  static RandomSpec bernoulli(DType dtype, double p);
  static RandomSpec randint(DType dtype, int64_t low, int64_t high);
  static RandomSpec dropout_mask(DType dtype, double p);
};

// Throws "[op] ..." when the dtype does not suit the kind or a parameter is out of range
// (uniform: low <= high, both finite; normal: stddev >= 0; p in [0, 1]; randint: low < high and
// [low, high) representable in the dtype).
void check_random_spec(const RandomSpec& spec, std::string_view op);

// W: Philox words consumed per element (see the table above). Checks the spec.
int64_t words_per_element(const RandomSpec& spec);

// Words a random op over `numel` elements reserves: numel * W rounded up to a multiple of 4.
uint64_t words_to_reserve(const RandomSpec& spec, int64_t numel);

// Fills `out` (any strides, CPU or CUDA; shape = the block's shape; dtype = spec.dtype) with
// the values elements [block_offset, block_offset + out.shape) of a random tensor of
// `global_shape` get under (seed, offset). Throws when ranks differ, the block does not fit in
// `global_shape`, or the spec is invalid. A 0-d tensor is a block of a 0-d global shape.
void fill_random(const Tensor& out, const RandomSpec& spec, uint64_t seed, uint64_t offset,
                 IntSpan global_shape, IntSpan block_offset);

// Dropout of one block: out = keep ? input * 1 / (1 - p) : 0 with keep decided exactly as
// RandomSpec::dropout_mask (W = 1). `input` and `out` have the block's shape and the same
// floating dtype and device (out may alias input); `mask`, when defined, is a bool tensor of
// the same shape that receives keep.
void dropout_block(const Tensor& input, const Tensor& out, const Tensor& mask, double p,
                   uint64_t seed, uint64_t offset, IntSpan global_shape, IntSpan block_offset);

// Threads the CPU generator uses for large tensors (above ~64K elements). 0 (the default)
// means the intra-op thread count, dtensor::get_num_threads() (dtensor/ops/threads.h: 1 unless
// set). Values do not depend on the thread count.
void set_rng_num_threads(int n);
int rng_num_threads();

}  // namespace dtensor
