// The backward kernels of softmax, the norms and the activations, and the norms' statistics, on
// CUDA against the CPU kernels. Float tolerances as in gpu_test_util.h (rtol_scale 4 for the row
// kernels and the weight / bias sums, which accumulate in float over hundreds of elements).
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/softmax/softmax.h"
#include "tests/gpu/gpu_test_util.h"

using namespace dtensor;
using namespace dtensor::gpu_test;

TEST_CASE("cuda softmax_backward and log_softmax_backward", "[gpu][softmax][backward]") {
  for (DType d : floating_dtypes()) {
    for (const Tensor& x : {make_input({7, 300}, d, 201), make_input({4, 5, 6}, d, 202),
                            make_input({0, 3}, d, 203)}) {
      for (int64_t dim = -1; dim < x.dim(); ++dim) {
        INFO(dtype_name(d) << " " << shape_str(x.sizes()) << " dim " << dim);
        const Tensor g = make_input(x.sizes(), d, 204);
        const Tensor y = softmax(x, dim), ly = log_softmax(x, dim);
        check_matches(softmax_backward(g.to(kGpu), y.to(kGpu), dim), softmax_backward(g, y, dim),
                      4);
        check_matches(log_softmax_backward(g.to(kGpu), ly.to(kGpu), dim),
                      log_softmax_backward(g, ly, dim), 4);
      }
    }
  }
}

TEST_CASE("cuda native norms and their backward", "[gpu][norm][backward]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor x = make_input({6, 5, 70}, d, 211), g = make_input({6, 5, 70}, d, 212);
    const Tensor w = make_input({70}, d, 213, 0.5, 2), b = make_input({70}, d, 214);
    const int64_t n[] = {70};
    const auto cpu = native_layer_norm(x, n, w, b);
    const auto gpu = native_layer_norm(x.to(kGpu), n, w.to(kGpu), b.to(kGpu));
    check_matches(gpu.output, cpu.output, 4);
    check_matches(gpu.mean, cpu.mean, 4);
    check_matches(gpu.rstd, cpu.rstd, 4);
    const auto gc = layer_norm_backward(g, x, n, cpu.mean, cpu.rstd, w);
    const auto gg = layer_norm_backward(g.to(kGpu), x.to(kGpu), n, gpu.mean, gpu.rstd, w.to(kGpu));
    check_matches(gg.grad_x, gc.grad_x, 4);
    check_matches(gg.grad_weight, gc.grad_weight, 4);
    check_matches(gg.grad_bias, gc.grad_bias, 4);
    const auto rc = native_rms_norm(x, n, w);
    const auto rg = native_rms_norm(x.to(kGpu), n, w.to(kGpu));
    check_matches(rg.output, rc.output, 4);
    check_matches(rg.rstd, rc.rstd, 4);
    const auto rgc = rms_norm_backward(g, x, n, rc.rstd, w);
    const auto rgg = rms_norm_backward(g.to(kGpu), x.to(kGpu), n, rg.rstd, w.to(kGpu));
    check_matches(rgg.grad_x, rgc.grad_x, 4);
    check_matches(rgg.grad_weight, rgc.grad_weight, 4);
  }
}

TEST_CASE("cuda activation backward kernels", "[gpu][elementwise][backward]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor x = make_input({33, 7}, d, 221, -6, 6), g = make_input({33, 7}, d, 222);
    const Tensor xg = x.to(kGpu), gg = g.to(kGpu);
    check_matches(gelu_backward(gg, xg), gelu_backward(g, x));
    check_matches(gelu_backward(gg, xg, GeluApproximate::kTanh),
                  gelu_backward(g, x, GeluApproximate::kTanh));
    check_matches(silu_backward(gg, xg), silu_backward(g, x));
    check_matches(sigmoid_backward(gg, sigmoid(x).to(kGpu)), sigmoid_backward(g, sigmoid(x)));
    check_matches(tanh_backward(gg, tanh(x).to(kGpu)), tanh_backward(g, tanh(x)));
    // A transposed (non-contiguous) grad.
    const Tensor gt = make_input({7, 33}, d, 223).transpose(0, 1);
    check_matches(silu_backward(gt.to(kGpu), xg), silu_backward(gt, x));
  }
}
