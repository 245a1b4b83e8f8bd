// Internal: block geometry shared by the CPU and CUDA paths of fill_random / dropout_block.
#pragma once

#include <cstdint>

#include "dtensor/rng/distributions.h"
#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

// A block of a global row-major tensor, with dims of size 1 dropped and adjacent dims merged
// when both the global index and every operand's memory are contiguous across them.
// Element e of the block (row-major over `size`) with multi-index idx has global linear index
// gbase + sum(idx[d] * gstride[d]) and lives at sum(idx[d] * stride[k][d]) in operand k.
struct BlockGeometry {
  Shape size;  // at least one dim unless numel == 0
  Shape gstride;
  Shape stride[3];
  int nops = 0;
  uint64_t gbase = 0;
  int64_t numel = 0;
};

// Checks (op-named errors) that the block fits and builds its geometry. `operand_strides` are
// the strides of the tensors walked together (all of the block's shape).
BlockGeometry make_block_geometry(std::string_view op, IntSpan block_shape, IntSpan global_shape,
                                  IntSpan block_offset, const IntSpan* operand_strides, int nops);

// CPU kernels (fill_cpu.cc). Arguments are already checked.
void fill_random_cpu(const Tensor& out, const RandomSpec& spec, uint64_t seed, uint64_t offset,
                     const BlockGeometry& g);
void dropout_cpu(const Tensor& input, const Tensor& out, const Tensor& mask, double p,
                 uint64_t seed, uint64_t offset, const BlockGeometry& g);

// Fills out[0 .. 4 * nblocks) with the Philox blocks b0, b0 + 1, ... of the stream of `seed`
// (block numbers wrap modulo 2^62, like word numbers modulo 2^64). Uses AVX2 when the CPU has
// it; philox_fill_blocks_generic is the portable path (exported for tests).
void philox_fill_blocks(uint64_t seed, uint64_t b0, int64_t nblocks, uint32_t* out);
void philox_fill_blocks_generic(uint64_t seed, uint64_t b0, int64_t nblocks, uint32_t* out);

}  // namespace dtensor::detail
