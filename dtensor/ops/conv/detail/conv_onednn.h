// float32 convolutions through oneDNN's convolution primitive (conv_onednn_cpu.cc), the CPU
// kernels' first choice where it loads (common/detail/onednn_loader.h) and measures faster.
//
// Why: im2col + OpenBLAS sgemm (conv_cpu.cc) spent its time in the GEMM's packing and in im2col
// itself, and ran 3x3 convolutions 1.1-1.3x slower than PyTorch, which runs oneDNN's direct
// convolution (benchmarks/kernels/bench_ops2_notes.md has the figures). A 1x1 convolution with
// stride 1 and no padding stays on the GEMM: there cols is the input itself (no im2col) and the
// plain GEMM beat oneDNN's blocked layout and its reorders. float64 always stays on im2col
// (oneDNN has no f64 convolution).
#pragma once

#include <string>

#include "dtensor/ops/conv/detail/conv_kernels.h"

namespace dtensor::detail {

// Whether the next float32 CPU convolution of geometry g runs on oneDNN: DTENSOR_CONV=im2col or
// =onednn (read at every call, so a test can switch it between ops), else oneDNN when it loads
// and g is not a 1x1 / stride 1 / unpadded convolution. Raises "[convolution] ..." for another
// value of the variable, or for =onednn when oneDNN cannot be loaded.
bool conv_use_onednn(const ConvGeometry& g);

// One line for a report: what runs float32 CPU convolutions and why.
std::string conv_backend_info_str();

// The three kernels of conv_kernels.h on oneDNN, for contiguous float32 buffers (bias may be
// null). Each returns false, having written nothing, when oneDNN has no implementation for g
// (the caller then runs im2col; also where oneDNN would run its own im2col + GEMM rather than
// a direct kernel, unless DTENSOR_CONV=onednn), and raises "[convolution] oneDNN ..." on a failure
// after that. Primitives are built once per (pass, geometry, thread count) and kept: building one
// costs more than a small convolution.
bool conv_forward_onednn(const ConvGeometry& g, const float* im, const float* w, const float* bias,
                         float* col);
bool conv_data_onednn(const ConvGeometry& g, const float* col, const float* w, float* im);
bool conv_weight_onednn(const ConvGeometry& g, const float* im, const float* col, float* gw);

// Both gradients of a float32 CPU convolution (not transposed) at once: the input's (gim, from
// col = grad_output and w) and the weight's (gw, from im and col), with grad_output reordered
// into oneDNN's layout once for the two passes instead of once each (PyTorch reorders it twice).
// Contiguous tensors. Returns false, having written nothing, where conv_use_onednn(g) is false,
// either pass would not run on oneDNN, or the two want grad_output in different layouts: the
// caller then runs conv_data_cpu and conv_weight_cpu.
bool conv_backward_onednn(const ConvGeometry& g, const Tensor& col, const Tensor& im,
                          const Tensor& w, const Tensor& gim, const Tensor& gw);

}  // namespace dtensor::detail
