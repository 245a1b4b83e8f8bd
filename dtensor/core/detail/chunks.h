// The padded chunk layout of the collectives that move torch.chunk pieces (the redistribute
// executor's gathers, reduce-scatters and all-to-alls, distribute_tensor's scatter): a
// [n, block...] buffer whose block k holds chunk k of a dim, padded to the chunk size
// ceil(m / n). One implementation, shared.
#pragma once

#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

// A contiguous [n, block_shape...] buffer like `like` (dtype, device). `scratch`: it does not
// outlive the caller's step, so a per-thread host buffer may be reused (fresh host memory pays
// a page fault per page on first touch); otherwise a fresh tensor.
Tensor block_buffer(int64_t n, const Shape& block_shape, const Tensor& like, bool scratch);

// Zeroes the part of `block` past `valid` along dim `dim` (the padding of an uneven chunk).
void zero_tail(const Tensor& block, int64_t dim, int64_t valid);

// Packs x for a collective that sends block k of dim `e` to rank k: block k of the result is
// chunk k of x along e, padded to the chunk size, and (when d >= 0) dim d padded to `d_size`.
// Shape [n, block...]. One copy of x into a scratch buffer; the e == 0 even case with nothing
// else to pad is a view of x (when contiguous).
Tensor pack_chunks(const Tensor& x, int64_t e, int64_t n, int64_t d = -1, int64_t d_size = 0);

// Whether unpack_chunks of a buffer with blocks of `block_shape` returns a view of the buffer
// (d == 0 and no other dim cut) rather than a copy.
bool unpack_is_view(const Shape& block_shape, int64_t d, const Shape& target);

// The inverse layout change after a gather-like collective: `buffer` is [n, ...] and block k
// holds rank k's chunk of dim d (valid length chunk_bounds(full_d, n, k).size) at the start of
// dim d; every other dim of a block is cut to `target` (a prefix). Returns the blocks joined
// along d (shape `target`): a view of the buffer when unpack_is_view, else one copy.
Tensor unpack_chunks(const Tensor& buffer, int64_t d, int64_t full_d, const Shape& target);

}  // namespace dtensor::detail
