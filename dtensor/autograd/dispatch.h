// The op call of every DTensor function in dtensor/ops/: dispatch_sharded (propagate, redistribute,
// run the registered kernel, wrap) plus, when grad mode is on and an input requires grad,
// recording of a node that runs the op's backward formula. Recording costs nothing when no
// input requires grad (one thread-local read and a flag per input).
//
// Recording rules:
//   - An op without a backward formula is not differentiable when OpInfo::backward is empty
//     and OpInfo::differentiable is false (comparisons, argmax): its outputs do not require
//     grad. Integer outputs never do.
//   - Saved inputs are the local tensors the kernel ran on (after redistribution), so backward
//     does not redistribute them again; only those OpInfo::saved_inputs / saved_outputs name
//     are kept.
//   - In-place ops (OpInfo::inplace) bump the version of self's storage; a backward that would
//     read a tensor modified since it was saved throws. Under grad mode an in-place op on a
//     leaf that requires grad, or on a view of a tensor that requires grad, throws (as
//     PyTorch), and one on a tensor that requires grad re-points its history at the new node.
#pragma once

#include <absl/types/span.h>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/op_schema.h"

namespace dtensor {

// Single-output op (throws "[op] the op has N outputs; use dispatch_multi" otherwise).
DTensor dispatch(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                 absl::Span<const ArgValue> args = {});
// Any number of outputs.
DTensorList dispatch_multi(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                           absl::Span<const ArgValue> args = {});

}  // namespace dtensor
