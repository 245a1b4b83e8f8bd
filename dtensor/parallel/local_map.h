// local_map: PyTorch's torch.distributed.tensor.experimental.local_map for C++ — call a function
// written for local tensors on DTensors.
//
//   // A column-parallel linear: x Replicate, w Shard(0) ([out, in] rows split), y Shard(-1).
//   auto colwise = dt::local_map(
//       [](absl::Span<const dt::DTensor> in) { return dt::DTensorList{dt::linear(in[0], in[1])}; },
//       {{dt::Shard(-1)}}, {dt::Placements{dt::Replicate()}, dt::Placements{dt::Shard(0)}}, mesh);
//   dt::DTensor y = colwise({x, w})[0];
//
// A local tensor inside a differentiable computation is a local DTensor (a Replicate DTensor on
// this process's self mesh, see dtensor/core/distributed_tensor.h), so `fn` takes and returns
// local DTensors: it runs on each rank's shards and may issue collectives of its own.
#pragma once

#include <absl/types/span.h>

#include <functional>
#include <optional>
#include <vector>

#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/placement.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {

// A function over local DTensors (inputs and outputs), and the function local_map returns.
using LocalMapFunction = std::function<DTensorList(absl::Span<const DTensor> inputs)>;

struct LocalMapOptions {
  // Per input (empty: none given): the placements each input's gradient is read as (PyTorch's
  // to_local(grad_placements=...)): the local gradient fn's backward gives an input is taken as
  // this rank's piece of a gradient laid out so, then flows back like a redistribute gradient.
  // std::nullopt (or an empty list): to_local_dtensor()'s default, the input's placements with
  // Partial made Replicate. Pass e.g. {Partial()} for a Replicate input whose local gradients are
  // partial sums.
  std::vector<std::optional<Placements>> in_grad_placements;
  // An input on the mesh whose placements differ from in_placements is redistributed to them
  // (differentiable) instead of raising.
  bool redistribute_inputs = false;
  // Per output (empty: none given): its global shape, taken as given (no communication).
  // std::nullopt: an output with a Shard placement on a mesh dim of size > 1 gets its global shape
  // from every rank's local size along the sharded dims (one small int64 all-gather per call
  // over the whole mesh, shared by all such outputs; on a CUDA mesh also a host-to-device copy
  // and a synchronising copy back, every call: give out_shapes for a layer called every step;
  // see local_map below); any other output's is its local shape.
  std::vector<std::optional<Shape>> out_shapes;
  // from_local's run_check for the outputs: one all-gather of a small record per mesh dim of
  // size > 1 per output, raising on every rank when a local output does not fit its placements
  // and global shape (given or inferred), e.g. replicas of different shapes along a Replicate
  // mesh dim, then the broadcast of Replicate mesh dims from their first member. Off by default,
  // as PyTorch.
  bool run_check = false;
};

// Wraps `fn` (written for local DTensors) into a function over DTensors on `mesh`, as PyTorch's
// local_map(fn, out_placements, in_placements, in_grad_placements, mesh, redistribute_inputs).
// A call with inputs `args`:
//  - an input on `mesh` is checked against in_placements[i] (a Shard(d < 0) counts from the
//    input's last dim) and raises "[local_map] input 1 has placements [S(0)] but in_placements[1]
//    is [R] ..." when they differ, unless options.redistribute_inputs; then its local shard, a
//    local DTensor recorded by autograd (to_local_dtensor with in_grad_placements[i]), is passed
//    to fn. in_placements empty: no check, every input is taken as it is; in_placements[i] ==
//    std::nullopt for an input on the mesh raises.
//  - an input that is a local DTensor (self mesh) or undefined passes through unchanged (when
//    in_placements[i] is std::nullopt, a local input on a 1-rank mesh passes through too); an
//    input on another mesh raises.
//  - fn's outputs, local DTensors, one per entry of out_placements (another count raises), become
//    DTensors on `mesh` with those placements (from_local; communication: below, and run_check);
//    a Partial output placement says the local results are partial values (e.g. of a
//    row-parallel matmul) and is kept Partial. Each output's gradient is read as from_local's
//    default (its placements with Partial made Replicate) and taken as this rank's piece.
//  - the global shape of an output with a Shard placement and no out_shapes entry: every rank of
//    the mesh all-gathers its local sizes along the sharded dims of every such output (one int64
//    all-gather per call over the whole mesh, labelled "local_map" in CommDebugMode; under
//    dtensor::compile it runs at the capture only, the replays keep the captured shapes). For
//    the ranks an output is split over (those differing only on the mesh dims of size > 1 that
//    shard it), along each sharded dim the global size is the sum of one full set of pieces,
//    e.g. 5 from pieces 3 and 2, 9 from 3, 3, 3, 0; the pieces must be that size's torch.chunk
//    layout (compute_local_shape_and_offset), and replicas (ranks differing only on the other
//    mesh dims) must hold pieces of the same sizes. Every rank checks every group, so a bad
//    layout raises on every rank of the mesh: "[local_map] output 0 with placements [S(0)]: the
//    local sizes along the sharded dims (rank 0: [1], rank 1: [2]) are not the torch.chunk
//    pieces of any global size ...; pass out_shapes[0] ...". PyTorch instead takes local size *
//    mesh size (even shards), silently wrong for an uneven output (a different global shape on
//    each rank). The sizes along dims no mesh dim shards are not exchanged (run_check checks
//    them).
//  - fn's outputs are checked (their count, each defined and a local DTensor). When the call
//    exchanges sizes (above), each rank's verdict travels with its sizes and every rank raises
//    the same error, naming the first rank (mesh order) whose outputs are bad: "[local_map]
//    output 0 is undefined on rank 3 (expected a local DTensor)". Otherwise (every Shard output
//    given out_shapes, or none) nothing is exchanged and the check is local: only the rank whose
//    fn returned bad outputs raises, the others go on to their next collective and the job ends
//    at its deadline. A function that may have nothing to return on some rank should return an
//    empty local DTensor (e.g. 0 rows of an empty shard), not DTensor().
//  - when no input is on `mesh`, fn's outputs are returned as they are (PyTorch's behaviour when
//    no argument is a DTensor).
// Every other error depends only on arguments every rank shares (placements, counts, meshes), so
// it is raised on every rank (out_shapes with an entry count other than out_placements' raises
// here). Argument shapes: in_placements and in_grad_placements have one entry
// per input when not empty (checked at each call), each a list of mesh.ndim() placements (checked
// here); out_placements one list of mesh.ndim() placements per output. Differentiable (autograd
// records the to_local / from_local steps, and fn's own ops). Under dtensor::compile: see
// docs/SEMANTICS.md ("local_map").
LocalMapFunction local_map(LocalMapFunction fn, std::vector<Placements> out_placements,
                           std::vector<std::optional<Placements>> in_placements,
                           const DeviceMesh& mesh, LocalMapOptions options = {});

}  // namespace dtensor
