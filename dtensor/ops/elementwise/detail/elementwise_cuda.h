// CUDA entry points of the elementwise kernels, one per CPU kernel of elementwise_kernels.h
// with the same contract (operands already converted to one dtype and broadcastable to `out`,
// all on out's CUDA device; `out` may alias an input exactly). They launch on the current
// stream and return without synchronising. Built from elementwise_cuda.cu when CUDA is on;
// elementwise_no_cuda.cc throws otherwise.
#pragma once

#include "dtensor/ops/elementwise/detail/elementwise_kernels.h"

namespace dtensor::detail {

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void binary_scalar_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s,
                        bool scalar_first);
void compare_cuda(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void compare_scalar_cuda(CompareOp op, const Tensor& out, const Tensor& a, const Scalar& s);
void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& a, const Scalar& param);
void nan_to_num_cuda(const Tensor& out, const Tensor& a, double nan, double posinf, double neginf);
void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void param_activation_cuda(ParamActivation op, const Tensor& out, const Tensor& a, double p0,
                           double p1);
void activation_backward_cuda(ActivationGrad op, const Tensor& out, const Tensor& grad,
                              const Tensor& x);

}  // namespace dtensor::detail
