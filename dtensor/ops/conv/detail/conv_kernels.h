// The convolution kernels (conv_cpu.cc, conv_cuda.cu; conv_no_cuda.cc throws when CUDA is off),
// called by conv.cc after its checks, and the geometry they share.
//
// Every kernel is written for the relation of a convolution between an "im" tensor (the conv's
// input, the conv_transpose's output) [N, Ci, *im] and a "col" tensor (the conv's output, the
// conv_transpose's input) [N, Co, *col], with a weight [Co, Ci / groups, *k]: this is also the
// conv_transpose weight layout [C_in, C_out / groups, *k], so the three kernels serve both ops:
//   conv_forward:  col = conv(im, w)            (conv forward, conv_transpose grad_input)
//   conv_data:     im  = conv^T(col, w)         (conv grad_input, conv_transpose forward)
//   conv_weight:   gw  = sum_n col (x) im2col(im)  (conv grad_weight; conv_transpose's with
//                                                  im = grad_output, col = input)
// 1-d and 2-d convolutions are 3-d ones with leading spatial dims of size 1.
#pragma once

#include <array>
#include <cstdint>

#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

struct ConvGeometry {
  int64_t n = 0;       // batch
  int64_t groups = 1;  // >= 1; divides ci and co
  int64_t ci = 0;      // channels of the im side
  int64_t co = 0;      // channels of the col side
  // Spatial sizes (depth, height, width), padded with leading ones to 3 dims.
  std::array<int64_t, 3> im{1, 1, 1}, col{1, 1, 1}, k{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1};

  int64_t im_size() const { return im[0] * im[1] * im[2]; }
  int64_t col_size() const { return col[0] * col[1] * col[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

// Tensors are contiguous float32 or float64 (all one dtype) on the kernel's device; bias may be
// undefined (no bias). Outputs are written completely (not accumulated into).
// col [N, Co, *col] = conv(im [N, Ci, *im], w) + bias [Co].
void conv_forward_cpu(const ConvGeometry& g, const Tensor& im, const Tensor& w, const Tensor& bias,
                      const Tensor& col);
// im [N, Ci, *im] = conv^T(col [N, Co, *col], w) + bias [Ci].
void conv_data_cpu(const ConvGeometry& g, const Tensor& col, const Tensor& w, const Tensor& bias,
                   const Tensor& im);
// gw [Co, Ci / groups, *k] = the weight gradient of col = conv(im, w).
void conv_weight_cpu(const ConvGeometry& g, const Tensor& im, const Tensor& col, const Tensor& gw);

// The CUDA counterparts (direct kernels, one thread per output element).
void conv_forward_cuda(const ConvGeometry& g, const Tensor& im, const Tensor& w, const Tensor& bias,
                       const Tensor& col);
void conv_data_cuda(const ConvGeometry& g, const Tensor& col, const Tensor& w, const Tensor& bias,
                    const Tensor& im);
void conv_weight_cuda(const ConvGeometry& g, const Tensor& im, const Tensor& col, const Tensor& gw);

}  // namespace dtensor::detail
