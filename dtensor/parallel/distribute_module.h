// distribute_module: PyTorch's torch.distributed.tensor.distribute_module for the nn Module
// tree — the low-level building block under parallelize_module, for users who place
// parameters and move activations themselves.
//
//   dt::distribute_module(model, mesh,
//       [](std::string_view name, nn::Module& m, const dt::DeviceMesh& mesh) {
//         if (name == "fc1") m.set_parameter("weight", dt::distribute_tensor(
//             m.param("weight").full_tensor(), mesh, {dt::Shard(0)}));
//       },
//       [](nn::Module&, const dt::DTensor& x, const dt::DeviceMesh& mesh) {
//         return x.redistribute(mesh, {dt::Replicate()});   // or from_local(...)
//       });
#pragma once

#include <functional>
#include <string_view>

#include "dtensor/nn/module.h"

namespace dtensor {

// Called once per module of the tree (the root first, named "", then pre-order with
// fully-qualified names): places that module's own parameters on `mesh` (set_parameter with a
// DTensor on the mesh).
using PartitionFn =
    std::function<void(std::string_view name, nn::Module& module, const DeviceMesh& mesh)>;
// A forward pre-hook: maps the module's input to what its forward sees (e.g. a local tensor
// to a DTensor on the mesh).
using InputFn =
    std::function<DTensor(nn::Module& module, const DTensor& input, const DeviceMesh& mesh)>;
// A forward hook: maps the forward's output to what the call returns. It owns the output (a
// function taking it by value may std::move it into a redistribute, which then works in its
// memory); one taking const DTensor& fits too.
using OutputFn = std::function<DTensor(nn::Module& module, DTensor output, const DeviceMesh& mesh)>;

// Applies partition_fn to every module of the tree, then replicates every parameter it left
// off the mesh (distribute_tensor(full value, mesh, all Replicate) from the mesh's first
// rank, as PyTorch: every rank then holds that rank's values), then registers input_fn as a
// forward pre-hook and output_fn as a forward hook of `module` (each when given). Collective
// over the mesh when parameters are replicated. A parameter partition_fn put on another mesh
// raises "[distribute_module] parameter 'fc1.weight' is on DeviceMesh(...) after partition_fn;
// expected mesh DeviceMesh(...)" on every rank (the check is on the arguments alone). Returns
// `module`.
nn::Module& distribute_module(nn::Module& module, const DeviceMesh& mesh,
                              const PartitionFn& partition_fn = nullptr,
                              const InputFn& input_fn = nullptr,
                              const OutputFn& output_fn = nullptr);

}  // namespace dtensor
