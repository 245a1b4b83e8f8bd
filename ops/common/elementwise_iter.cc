#include "ops/common/elementwise_iter.h"

namespace dtensor::detail {

ElementwiseIter::ElementwiseIter(const Tensor& out, std::initializer_list<const Tensor*> inputs)
    : nops_(1 + static_cast<int>(inputs.size())), numel_(out.numel()) {
  DT_CHECK(nops_ <= kMaxIterOperands, "[ElementwiseIter] at most %d inputs, got %d",
           kMaxIterOperands - 1, nops_ - 1);
  if (numel_ == 0) return;
  const int64_t nd = out.dim();
  const Tensor* ops[kMaxIterOperands] = {&out};
  int k = 1;
  for (const Tensor* t : inputs) ops[k++] = t;

  // Check shapes and record data pointers, item sizes and dim offsets (inputs are aligned
  // to out's trailing dims).
  int64_t lead[kMaxIterOperands];
  int64_t item[kMaxIterOperands];
  for (k = 0; k < nops_; ++k) {
    const Tensor& t = *ops[k];
    lead[k] = nd - t.dim();
    item[k] = static_cast<int64_t>(t.itemsize());
    DT_CHECK(lead[k] >= 0, "[ElementwiseIter] operand %d has more dims (%d) than the output (%d)",
             k, t.dim(), nd);
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t s = t.sizes()[d];
      DT_CHECK(s == out.sizes()[d + lead[k]] || s == 1,
               "[ElementwiseIter] operand %d of shape %s does not broadcast to %s", k,
               shape_str(t.sizes()), shape_str(out.sizes()));
    }
    data_[k] = static_cast<char*>(t.data_ptr());
  }
  // Byte stride of operand k along out's dim d (0 where it broadcasts).
  auto stride_of = [&](int k, int64_t d) -> int64_t {
    const int64_t dk = d - lead[k];
    if (dk < 0 || ops[k]->sizes()[dk] == 1) return 0;
    return ops[k]->strides()[dk] * item[k];
  };

  // Drop size-1 dims; merge an outer dim into the inner one when every operand steps across
  // the pair uniformly (outer stride == inner stride * inner size).
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t size = out.sizes()[d];
    if (size == 1) continue;
    int64_t st[kMaxIterOperands];
    for (k = 0; k < nops_; ++k) st[k] = stride_of(k, d);
    bool merge = !sizes_.empty();
    for (k = 0; merge && k < nops_; ++k) merge = strides_[k].back() == st[k] * size;
    if (merge) {
      sizes_.back() *= size;
      for (k = 0; k < nops_; ++k) strides_[k].back() = st[k];
    } else {
      sizes_.push_back(size);
      for (k = 0; k < nops_; ++k) strides_[k].push_back(st[k]);
    }
  }
}

}  // namespace dtensor::detail
