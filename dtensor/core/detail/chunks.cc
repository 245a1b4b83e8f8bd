#include "dtensor/core/detail/chunks.h"

#include <array>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {
namespace {

// Shape `s` with [n] prepended.
Shape with_leading(int64_t n, IntSpan s) {
  Shape out;
  out.reserve(s.size() + 1);
  out.push_back(n);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// Per-thread host buffers reused for the executor's internal staging (packed collective inputs,
// gather buffers whose contents are copied out). On first touch fresh host memory costs a page
// fault per page, which for multi-MB buffers costs more than the copy itself. Two slots (a step
// needs at most an input and an output buffer at once); a slot is handed out only while nothing
// else references it (use_count() == 1), so a tensor that outlived its step can never be
// overwritten. Buffers above kMaxScratchBytes are not kept. CUDA memory comes from the
// stream-ordered pool already and is not cached here.
constexpr size_t kMaxScratchBytes = size_t{64} << 20;

class ScratchPool {
 public:
  Tensor empty_tensor(const Shape& shape, DType dtype, Device device) {
    const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    if (!device.is_cpu() || nbytes == 0 || nbytes > kMaxScratchBytes) {
      return empty(shape, TensorOptions(dtype, device));
    }
    Storage* pick = nullptr;   // the smallest free slot that fits
    Storage* spare = nullptr;  // an empty or free slot to replace otherwise
    for (Storage& slot : slots_) {
      const bool free = !slot.defined() || slot.use_count() == 1;
      if (!free) continue;
      if (slot.defined() && slot.nbytes() >= nbytes &&
          (pick == nullptr || slot.nbytes() < pick->nbytes())) {
        pick = &slot;
      }
      if (spare == nullptr || !slot.defined() ||
          (spare->defined() && slot.nbytes() < spare->nbytes())) {
        spare = &slot;
      }
    }
    Storage storage;
    if (pick != nullptr) {
      storage = *pick;
    } else {
      storage = Storage::allocate(nbytes, device);
      if (spare != nullptr) *spare = storage;
    }
    return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape));
  }

 private:
  std::array<Storage, 2> slots_;
};

// An uninitialised contiguous tensor for data that does not leave the executor.
Tensor scratch_empty(const Shape& shape, const Tensor& like) {
  thread_local ScratchPool pool;
  return pool.empty_tensor(shape, like.dtype(), like.device());
}

}  // namespace

// A contiguous [n, block_shape...] buffer in which block k will hold chunk k of a dim that has
// `full` elements split n ways (torch.chunk), padded to the chunk size. Only the valid region
// of a block is ever read back, so the padding is just zeroed (no garbage on the wire) and
// never copied around. `scratch`: the buffer does not outlive the step (a reused one is fine).
Tensor block_buffer(int64_t n, const Shape& block_shape, const Tensor& like, bool scratch) {
  const Shape shape = with_leading(n, block_shape);
  return scratch ? scratch_empty(shape, like)
                 : empty(shape, TensorOptions(like.dtype(), like.device()));
}

void zero_tail(const Tensor& block, int64_t dim, int64_t valid) {
  const int64_t tail = block.size(dim) - valid;
  if (tail > 0) block.narrow(dim, valid, tail).zero_();
}

Tensor pack_chunks(const Tensor& x, int64_t e, int64_t n, int64_t d, int64_t d_size) {
  const int64_t m = x.size(e);
  const int64_t padded = chunk_bounds(m, n, 0).size;
  const bool pad_d = d >= 0 && x.size(d) != d_size;
  Shape block_shape(x.shape().begin(), x.shape().end());
  block_shape[e] = padded;
  if (d >= 0) block_shape[d] = d_size;
  if (e == 0 && padded * n == m && !pad_d) return x.contiguous().view(with_leading(n, block_shape));
  Tensor buffer = block_buffer(n, block_shape, x, /*scratch=*/true);
  for (int64_t k = 0; k < n; ++k) {
    const ChunkBounds b = chunk_bounds(m, n, k);
    Tensor block = buffer.select(0, k);
    Tensor dst = block.narrow(e, 0, b.size);
    if (pad_d) {
      zero_tail(block.narrow(e, 0, b.size), d, x.size(d));
      dst = dst.narrow(d, 0, x.size(d));
    }
    zero_tail(block, e, b.size);
    if (b.size > 0) dst.copy_(x.narrow(e, b.offset, b.size));
  }
  return buffer;
}

bool unpack_is_view(const Shape& block_shape, int64_t d, const Shape& target) {
  if (d != 0) return false;
  for (size_t j = 1; j < target.size(); ++j) {
    if (block_shape[j] != target[j]) return false;
  }
  return true;
}

// The inverse layout change after a gather-like collective: `buffer` is [n, ...] and block k
// holds rank k's chunk of dim d (valid length chunk_bounds(full_d, n, k).size) at the start of
// dim d; every other dim of a block is cut to `target` (a prefix). Returns the blocks joined
// along d (shape `target`). When d == 0 and nothing else is cut, the chunks already lie in
// order at the start of the buffer, so the result is a view; otherwise it costs one copy.
Tensor unpack_chunks(const Tensor& buffer, int64_t d, int64_t full_d, const Shape& target) {
  const int64_t n = buffer.size(0);
  const Shape block_shape(buffer.shape().begin() + 1, buffer.shape().end());
  if (unpack_is_view(block_shape, d, target)) {
    Shape merged(target.begin(), target.end());
    merged[0] = n * buffer.size(1);
    return buffer.view(merged).narrow(0, 0, full_d);
  }
  Tensor out = empty(target, TensorOptions(buffer.dtype(), buffer.device()));
  for (int64_t k = 0; k < n; ++k) {
    const ChunkBounds b = chunk_bounds(full_d, n, k);
    if (b.size == 0 || out.numel() == 0) continue;
    Tensor src = buffer.select(0, k);
    for (size_t j = 0; j < target.size(); ++j) {
      const int64_t len = static_cast<int64_t>(j) == d ? b.size : target[j];
      if (src.size(j) != len) src = src.narrow(j, 0, len);
    }
    out.narrow(d, b.offset, b.size).copy_(src);
  }
  return out;
}

}  // namespace dtensor::detail
