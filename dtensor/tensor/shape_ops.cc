#include "dtensor/tensor/shape_ops.h"

#include <algorithm>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/promote_types.h"

namespace dtensor {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  DT_CHECK(!tensors.empty(), "[cat] tensors is empty (expected at least one tensor)");
  for (size_t i = 0; i < tensors.size(); ++i) {
    DT_CHECK(tensors[i].defined(), "[cat] tensors[%d] is undefined", static_cast<int64_t>(i));
  }
  // Legacy rule (PyTorch): 1-d empty tensors are skipped whatever the other shapes are.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) {
    if (!skipped(t)) {
      ref = &t;
      break;
    }
  }
  if (ref == nullptr) ref = &tensors[0];
  DT_CHECK(ref->dim() > 0, "[cat] zero-dimensional tensors cannot be concatenated");
  const int64_t d = normalize_dim(dim, ref->dim(), "cat");
  Shape out_shape = ref->sizes();
  int64_t total = 0;
  // torch.cat promotes: the output has the dtype every input converts to (skipped inputs
  // included: cat([empty(0) float64, float32 [2, 3]]) is float64); copy_ converts.
  DType dtype = ref->dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    dtype = promote_types(dtype, t.dtype());
    DT_CHECK(t.device() == ref->device(), "[cat] tensors[%d] is on %s (expected %s)",
             static_cast<int64_t>(i), t.device().str(), ref->device().str());
    if (skipped(t) && &t != ref) continue;
    DT_CHECK(t.dim() == ref->dim(), "[cat] tensors[%d] has shape %s (expected %d dims like %s)",
             static_cast<int64_t>(i), shape_str(t.sizes()), ref->dim(), shape_str(ref->sizes()));
    for (int64_t k = 0; k < t.dim(); ++k) {
      DT_CHECK(k == d || t.sizes()[k] == ref->sizes()[k],
               "[cat] tensors[%d] has shape %s but %s is expected except at dim %d",
               static_cast<int64_t>(i), shape_str(t.sizes()), shape_str(ref->sizes()), d);
    }
    DT_CHECK(detail::checked_add(total, t.sizes()[d], &total),
             "[cat] the sizes along dim %d add up to more than int64 can count", d);
  }
  out_shape[d] = total;
  Tensor out = empty(out_shape, TensorOptions(dtype, ref->device()));
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t) && &t != ref) continue;
    const int64_t n = t.sizes()[d];
    if (n > 0) out.narrow(d, offset, n).copy_(t);
    offset += n;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  DT_CHECK(!tensors.empty(), "[stack] tensors is empty (expected at least one tensor)");
  DT_CHECK(tensors[0].defined(), "[stack] tensors[0] is undefined");
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    DT_CHECK(tensors[i].defined(), "[stack] tensors[%d] is undefined", static_cast<int64_t>(i));
    DT_CHECK(tensors[i].sizes() == tensors[0].sizes(),
             "[stack] tensors[%d] has shape %s (expected %s like tensors[0])",
             static_cast<int64_t>(i), shape_str(tensors[i].sizes()), shape_str(tensors[0].sizes()));
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  DT_CHECK(t.defined(), "[chunk] the tensor is undefined");
  DT_CHECK(chunks > 0, "[chunk] chunks %d must be positive", chunks);
  DT_CHECK(t.dim() > 0, "[chunk] cannot chunk a 0-d tensor");
  const int64_t d = normalize_dim(dim, t.dim(), "chunk");
  const int64_t n = t.sizes()[d];
  std::vector<Tensor> out;
  // chunk_bounds gives exactly `chunks` pieces; like torch.chunk, trailing empty ones are
  // dropped, except that an empty dim gives `chunks` empty views.
  for (int64_t i = 0; i < chunks; ++i) {
    const ChunkBounds b = chunk_bounds(n, chunks, i);
    if (b.size == 0 && n > 0) break;
    out.push_back(t.narrow(d, b.offset, b.size));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  DT_CHECK(t.defined(), "[split] the tensor is undefined");
  DT_CHECK(t.dim() > 0, "[split] cannot split a 0-d tensor");
  DT_CHECK(split_size >= 0, "[split] split_size %d must be non-negative", split_size);
  const int64_t d = normalize_dim(dim, t.dim(), "split");
  const int64_t n = t.sizes()[d];
  DT_CHECK(split_size > 0 || n == 0,
           "[split] split_size 0 can only split an empty dim (dim %d has size %d)", d, n);
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(t);
    return out;
  }
  for (int64_t off = 0; off < n; off += split_size) {
    out.push_back(t.narrow(d, off, std::min(split_size, n - off)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& t, IntSpan split_sizes, int64_t dim) {
  DT_CHECK(t.defined(), "[split] the tensor is undefined");
  DT_CHECK(t.dim() > 0, "[split] cannot split a 0-d tensor");
  const int64_t d = normalize_dim(dim, t.dim(), "split");
  const int64_t n = t.sizes()[d];
  int64_t sum = 0;
  for (int64_t s : split_sizes) {
    DT_CHECK(s >= 0, "[split] split_sizes %s has a negative size %d", shape_str(split_sizes), s);
    DT_CHECK(detail::checked_add(sum, s, &sum), "[split] split_sizes %s sum past int64",
             shape_str(split_sizes));
  }
  DT_CHECK(sum == n, "[split] split_sizes %s sum to %d but dim %d has size %d",
           shape_str(split_sizes), sum, d, n);
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t off = 0;
  for (int64_t s : split_sizes) {
    out.push_back(t.narrow(d, off, s));
    off += s;
  }
  return out;
}

Tensor pad(const Tensor& t, IntSpan pads, const Scalar& value) {
  DT_CHECK(t.defined(), "[pad] the tensor is undefined");
  DT_CHECK(pads.size() % 2 == 0, "[pad] pads %s has odd length %d (expected pairs lo, hi)",
           shape_str(pads), static_cast<int64_t>(pads.size()));
  DT_CHECK(static_cast<int64_t>(pads.size()) / 2 <= t.dim(),
           "[pad] pads %s covers %d dims but the tensor is %d-d", shape_str(pads),
           static_cast<int64_t>(pads.size()) / 2, t.dim());
  Shape out_shape = t.sizes();
  Tensor src = t;
  Shape dst_start(t.dim(), 0);
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    const int64_t d = t.dim() - 1 - static_cast<int64_t>(p);
    const int64_t lo = pads[2 * p];
    const int64_t hi = pads[2 * p + 1];
    const int64_t n = t.sizes()[d];
    int64_t out_n = 0;
    DT_CHECK(detail::checked_add(n, lo, &out_n) && detail::checked_add(out_n, hi, &out_n),
             "[pad] pads (%d, %d) on dim %d of size %d overflow int64", lo, hi, d, n);
    DT_CHECK(out_n >= 0, "[pad] pads (%d, %d) on dim %d of size %d give a negative size %d", lo, hi,
             d, n, out_n);
    out_shape[d] = out_n;
    // The part of the input that survives cropping, and where it lands in the output.
    const int64_t begin = lo < 0 ? -lo : 0;
    const int64_t end = hi < 0 ? n + hi : n;
    const int64_t keep = end > begin ? end - begin : 0;
    src = src.narrow(d, keep > 0 ? begin : 0, keep);
    dst_start[d] = lo > 0 ? lo : 0;
  }
  Tensor out = full(out_shape, value, TensorOptions(t.dtype(), t.device()));
  if (src.numel() > 0) {
    Tensor dst = out;
    for (int64_t d = 0; d < t.dim(); ++d) dst = dst.narrow(d, dst_start[d], src.sizes()[d]);
    dst.copy_(src);
  }
  return out;
}

bool box_intersection(IntSpan a_off, IntSpan a_shape, IntSpan b_off, IntSpan b_shape, Shape& off,
                      Shape& shape) {
  off.clear();
  shape.clear();
  for (size_t d = 0; d < a_off.size(); ++d) {
    const int64_t lo = std::max(a_off[d], b_off[d]);
    const int64_t hi = std::min(a_off[d] + a_shape[d], b_off[d] + b_shape[d]);
    if (hi <= lo) {
      off.clear();
      shape.clear();
      return false;
    }
    off.push_back(lo);
    shape.push_back(hi - lo);
  }
  return true;
}

Tensor box_view(Tensor t, IntSpan t_off, IntSpan off, IntSpan shape) {
  for (size_t d = 0; d < off.size(); ++d) {
    t = t.narrow(static_cast<int64_t>(d), off[d] - t_off[d], shape[d]);
  }
  return t;
}

}  // namespace dtensor
