// The CUDA row kernels of the scan family when dtensor is built without CUDA (unreachable: no
// CUDA tensor can exist).
#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/tensor/error.h"

namespace dtensor::detail {

void scan_rows_cuda(ScanOp op, const Tensor&, const Tensor&, bool, const Tensor&) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)",
          op == ScanOp::kSum ? "cumsum" : (op == ScanOp::kProd ? "cumprod" : "logcumsumexp"));
}

void sort_rows_cuda(const Tensor&, bool, const Tensor&, const Tensor&) {
  DT_FAIL("[sort] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void cumextreme_rows_cuda(bool is_max, const Tensor&, const Tensor&, const Tensor&) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)",
          is_max ? "cummax" : "cummin");
}

void cumprod_backward_rows_cuda(const Tensor&, const Tensor&, const Tensor&) {
  DT_FAIL("[cumprod_backward] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)");
}

void pick_rows_cuda(PickOp op, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  DT_FAIL("[%s] dtensor was built without CUDA (configure with -DDTENSOR_CUDA=ON)",
          op == PickOp::kMedian ? "median" : "mode");
}

}  // namespace dtensor::detail
