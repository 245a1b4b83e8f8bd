// TensorMeta (global shape, stride, dtype), DTensorSpec (mesh + placements + meta) and the
// one function that turns a spec into a rank's local shape and global offset.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "dtensor/core/placement.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {

// The global tensor a DTensor stands for: shape, stride and dtype (no data).
struct TensorMeta {
  Shape shape;                    // global shape
  Shape stride;                   // global (contiguous) stride
  DType dtype = DType::kFloat32;  // element type

  // Empty shape, float32; or the given shape and dtype with a contiguous (or given) stride.
  TensorMeta() = default;
  TensorMeta(Shape shape, DType dtype);  // contiguous stride
  TensorMeta(Shape shape, Shape stride, DType dtype);
  // Equal shape, stride and dtype.
  bool operator==(const TensorMeta&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const TensorMeta& m) {
    return H::combine(std::move(h), m.shape, m.stride, static_cast<uint8_t>(m.dtype));
  }
};

// A rank's piece of a sharded tensor: its local shape and the global index of its first
// element along every dim.
struct LocalShard {
  Shape shape;   // the local shard's shape
  Shape offset;  // global index of its first element, per dim
};

// THE shard-math function; every other piece of the library uses it.
// Placements are applied in mesh-dim order: mesh dim 0 chunks the global tensor
// (torch.chunk rule, chunk_bounds in dtensor/tensor/shape.h), mesh dim 1 chunks that piece, and so
// on, so [S(0), S(0)] on a 2x2 mesh splits dim 0 into 4 row blocks ordered by
// (coord0, coord1). Replicate and Partial leave the shape unchanged. An empty `coordinate`
// (a rank outside the mesh) gives an all-zero local shape.
// Example: global [5, 4], mesh [2, 2], placements [S(0), S(0)], coordinate (1, 0):
//   mesh dim 0: rows chunk(5, 2)[1] = offset 3, size 2; mesh dim 1: chunk(2, 2)[0] = offset
//   0, size 1 -> local shape [1, 4], offset [3, 0].
LocalShard compute_local_shape_and_offset(IntSpan global_shape, IntSpan mesh_shape,
                                          IntSpan coordinate, PlacementSpan placements);

// How a DTensor is laid out: its mesh, one placement per mesh dim and the global TensorMeta.
// Immutable, comparable and hashable (the hash is computed once); the sharding-propagation and
// redistribute caches key on it.
class DTensorSpec {
 public:
  // An empty spec (no mesh).
  DTensorSpec() = default;
  // Normalises negative Shard dims and validates: one placement per mesh dim, Shard dims in
  // range of the tensor's ndim. Throws "[op] ..." naming `op` on error. `placements` is any
  // contiguous range (copied: at most a few inline values, as cheap as a move).
  DTensorSpec(DeviceMesh mesh, PlacementSpan placements, TensorMeta meta,
              std::string_view op = "DTensorSpec");

  // The mesh, placements (one per mesh dim) and global meta, with shortcuts to the meta's
  // shape, dtype, rank and element count.
  const DeviceMesh& mesh() const { return mesh_; }
  const Placements& placements() const { return placements_; }
  const Placement& placement(int64_t mesh_dim) const { return placements_[mesh_dim]; }
  const TensorMeta& meta() const { return meta_; }
  const Shape& shape() const { return meta_.shape; }
  DType dtype() const { return meta_.dtype; }
  int64_t ndim() const { return static_cast<int64_t>(meta_.shape.size()); }
  int64_t numel() const;

  // Whether every placement is Replicate / any placement is Partial.
  bool is_replicated() const;  // every placement is Replicate
  bool has_partial() const;
  // Mesh dims sharding tensor dim `dim`, in mesh-dim order (nested sharding has several).
  absl::InlinedVector<int64_t, 4> mesh_dims_sharding(int64_t dim) const;

  // This process's local shard (empty for ranks outside the mesh).
  LocalShard local_shard() const;
  // The local shard of the rank at `coordinate`.
  LocalShard local_shard(IntSpan coordinate) const;

  // Same spec with other placements / meta (validated like the constructor; errors name `op`).
  DTensorSpec with_placements(PlacementSpan placements, std::string_view op = "DTensorSpec") const;
  DTensorSpec with_meta(TensorMeta meta, std::string_view op = "DTensorSpec") const;

  // Same mesh, placements and meta (the cached hashes are compared first).
  bool operator==(const DTensorSpec& o) const {
    return hash_ == o.hash_ && placements_ == o.placements_ && meta_ == o.meta_ && mesh_ == o.mesh_;
  }
  size_t hash() const { return hash_; }  ///< cached at construction
  template <typename H>
  friend H AbslHashValue(H h, const DTensorSpec& s) {
    return H::combine(std::move(h), s.hash_);
  }
  std::string str() const;  // "DTensorSpec([S(0), R], shape=[8, 16], float32, mesh=[2, 2])"

 private:
  DeviceMesh mesh_;
  Placements placements_;
  TensorMeta meta_;
  size_t hash_ = 0;
};

// Placements a user asks for (distribute_tensor, from_local, redistribute) that no tensor of
// `dtype` can have: Partial(avg) of bool. Throws "[op] Partial(avg) of a bool tensor ...".
// Internal specs (strategy candidates) are not checked: they only ever derive from user specs.
void check_user_placements(PlacementSpan placements, DType dtype, std::string_view op);

}  // namespace dtensor
