// Op dispatch on DTensors: look up the sharding (propagating on a cache miss), redistribute
// the inputs that need it, run the local kernel on local tensors, wrap the outputs with the
// cached output specs. On a cache hit nothing is re-propagated and nothing is allocated
// besides the output tensors. Ranks outside the mesh skip the kernel and every collective and
// get empty local outputs (PyTorch semantics).
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/functional/function_ref.h>
#include <absl/types/span.h>

#include "dtensor/distributed_tensor.h"
#include "dtensor/propagation/op_schema.h"
#include "dtensor/propagation/sharding_propagation.h"
#include "tensor/tensor.h"

namespace dtensor {

// Local kernel of a single-output op: gets the (redistributed) local inputs, returns the
// local output.
using LocalKernel = absl::FunctionRef<Tensor(absl::Span<const Tensor> locals)>;
// Local kernel of a multi-output op: fills `outputs` (one per output of the op).
using MultiLocalKernel =
    absl::FunctionRef<void(absl::Span<const Tensor> locals, absl::Span<Tensor> outputs)>;

using DTensorList = absl::InlinedVector<DTensor, 2>;

// Runs `op` on `inputs` (all defined, all on one mesh) with args `args` (as declared by the
// op's RuntimeSchemaInfo). Throws "[op] inputs live on different meshes (argument other)",
// "[op] argument other is an undefined DTensor", propagation errors with the schema
// appended, and "[op] local kernel returned shape [..] for output 0, expected [..]" when a
// kernel disagrees with the output spec. For in-place ops the kernel must write into
// locals[0] and return it.
DTensor dispatch(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                 absl::Span<const ArgValue> args, LocalKernel kernel);
// Same for ops with several outputs.
DTensorList dispatch_multi(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                           absl::Span<const ArgValue> args, MultiLocalKernel kernel);

}  // namespace dtensor
