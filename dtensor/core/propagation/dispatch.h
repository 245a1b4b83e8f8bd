// Op dispatch on DTensors: look up the sharding (propagating on a cache miss), redistribute
// the inputs that need it, run the op's registered local kernel on the local tensors with a
// KernelContext that says what was chosen, wrap the outputs with the cached output specs. On a
// cache hit nothing is re-propagated and nothing is allocated besides the output tensors.
// Ranks outside the mesh skip the kernel and every collective and get empty local outputs
// (PyTorch semantics). Ops whose output shape depends on the data (OpInfo::
// data_dependent_shape: masked_select, nonzero) get their outputs' specs from the kernel's
// results on each call (data_dependent_output_spec) instead of the cache.
//
// An error raised on this rank after propagation (redistributing the inputs, the kernel, an
// allocation) is reported to the mesh's other ranks before it is rethrown
// (report_failure_on_mesh in dtensor/core/check_ranks.h): their next collective on the mesh raises
// it instead of waiting for this rank (DESIGN.md item 10).
//
// This is the sharded half of an op call: the DTensor functions of dtensor/ops/ go through
// autograd::dispatch (dtensor/autograd/dispatch.h), which calls dispatch_sharded and records the
// call for backward when an input requires grad.
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

#include <memory>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/tensor/scalar.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// What dispatch chose for one call, handed to the op's local kernel: the schema (op, the
// inputs' specs as passed, args), the OutputSharding (output specs; input specs after
// redistribution) and this rank's mesh coordinate. Kernels whose work depends on the layout
// read it instead of propagating again, e.g. the vocab-sharded embedding reads its shard's
// row offset, a view its local target shape, linear whether the bias is added on this rank.
class KernelContext {
 public:
  KernelContext(const OpSchema& schema, const OutputSharding& sharding, const Shape& coordinate)
      : schema_(schema), sharding_(sharding), coordinate_(coordinate) {}

  const OpSchema& schema() const { return schema_; }
  const OpInfo& op() const { return schema_.op(); }
  const OutputSharding& sharding() const { return sharding_; }
  // This rank's coordinate in the mesh.
  const Shape& coordinate() const { return coordinate_; }
  const DeviceMesh& mesh() const { return schema_.mesh(); }

  int64_t num_inputs() const { return schema_.num_inputs(); }
  // The spec of local input i as the kernel sees it (after redistribution).
  const DTensorSpec& input_spec(int64_t i) const;
  const DTensorSpec& output_spec(int64_t o) const { return *sharding_.outputs[o]; }
  // This rank's shard (shape, global offset) of input i (after redistribution) / output o.
  LocalShard input_shard(int64_t i) const { return input_spec(i).local_shard(coordinate_); }
  LocalShard output_shard(int64_t o) const { return output_spec(o).local_shard(coordinate_); }

  template <typename T>
  const T& arg(int64_t i) const {
    return schema_.arg<T>(i);
  }
  bool has_arg(int64_t i) const { return schema_.has_arg(i); }
  // A runtime scalar arg (int, float or bool) as a Scalar.
  Scalar scalar(int64_t i) const;

 private:
  const OpSchema& schema_;
  const OutputSharding& sharding_;
  const Shape& coordinate_;
};

// A scalar as an op arg (int, float or bool), the inverse of KernelContext::scalar.
ArgValue scalar_arg(const Scalar& s);

// The spec of output o of an op with OpInfo::data_dependent_shape, from the local kernel's
// result `out`: the placeholder's mesh and placements (all Replicate, so the local tensor is the
// whole output) with out's shape. Throws "[op] local kernel returned [3, 1] int64 for output 0,
// expected [0, 2] int64 (0 = any size)" when the rank, the dtype or a fixed (non-zero) dim of
// the placeholder differs, and "[op] output 0 has a data-dependent shape and must be Replicate"
// for other placements.
std::shared_ptr<const DTensorSpec> data_dependent_output_spec(const OpInfo& op, size_t o,
                                                              const Tensor& out,
                                                              const DTensorSpec& placeholder);

// What a dispatch did, for callers that keep it (autograd saves the inputs the kernel saw).
struct DispatchTrace {
  std::shared_ptr<const OutputSharding> sharding;
  // The local inputs the kernel ran on (after redistribution), kept only when the op saves an
  // input for backward (OpInfo::saved_inputs); empty outside the mesh.
  absl::InlinedVector<Tensor, 4> inputs;
};

// Runs `op` on `inputs` (all defined, all on one mesh) with args `args` (as declared by the
// op's RuntimeSchemaInfo) and its registered kernel. Throws "[op] inputs live on different
// meshes (argument other)", "[op] argument other is an undefined DTensor", propagation errors
// with the schema appended, and "[op] local kernel returned shape [..] for output 0, expected
// [..]" when a kernel disagrees with the output spec. For in-place ops the kernel writes into
// inputs[0] and returns it as output 0. `trace`, when given, receives the sharding and the
// local inputs the kernel saw.
DTensorList dispatch_sharded(const OpInfo& op, absl::Span<const DTensor* const> inputs,
                             absl::Span<const ArgValue> args, DispatchTrace* trace = nullptr);

}  // namespace dtensor
