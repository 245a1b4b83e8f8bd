// DTensor: a global tensor described by a DTensorSpec, of which this process holds its local
// shard (a plain Tensor on the mesh's device). Cheap to copy (shared spec, shared storage).
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "dtensor/dtensor_spec.h"
#include "tensor/tensor.h"

namespace dtensor {

class DTensor {
 public:
  DTensor() = default;
  // Wraps a local shard that already matches `spec` (no checks, no communication). Used by
  // the library itself; users call from_local.
  DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec);

  // Builds a DTensor from each rank's local piece (PyTorch DTensor.from_local).
  // `shape`/`stride` give the global geometry when the shards are uneven; when empty the
  // global shape is inferred assuming even shards (local size * mesh size along sharded dims).
  // run_check: verifies across the mesh that every rank's local shape and dtype equal what the
  // placements imply (one all-gather of a small record per mesh dim; the first 16 dims of
  // each shape are compared; an inferred global shape is taken from the mesh's first rank)
  // and throws the same error on every rank, e.g. "[from_local] rank 3 holds a local shard of
  // shape [2, 5] but placements [S(0), R] on global shape [8, 5] imply [2, 4]" (followed by
  // "(mismatching ranks: 1, 3)" when several do). Ranks outside the mesh communicate nothing
  // and hold an empty local tensor. The local tensor is moved to the mesh's device when
  // needed; no copy when it is already there (the DTensor shares its storage).
  static DTensor from_local(const Tensor& local, const DeviceMesh& mesh, Placements placements,
                            bool run_check = false, IntSpan shape = {}, IntSpan stride = {});

  bool defined() const { return spec_ != nullptr; }
  // This process's shard (empty on ranks outside the mesh).
  const Tensor& to_local() const { return local_; }
  // The whole global tensor on every rank of the mesh (redistributes to all-Replicate).
  Tensor full_tensor() const;
  // The same logical tensor with other placements on `mesh` (must be this DTensor's mesh).
  // Issues the collectives of the cheapest plan (see redistribute.h).
  DTensor redistribute(const DeviceMesh& mesh, Placements placements) const;
  DTensor redistribute(Placements placements) const;

  const DTensorSpec& spec() const { return *spec_; }
  const std::shared_ptr<const DTensorSpec>& spec_ptr() const { return spec_; }
  const Placements& placements() const { return spec_->placements(); }
  const DeviceMesh& device_mesh() const { return spec_->mesh(); }
  const Shape& shape() const { return spec_->shape(); }
  const Shape& sizes() const { return spec_->shape(); }
  int64_t size(int64_t dim) const;
  int64_t dim() const { return spec_->ndim(); }
  int64_t numel() const { return spec_->numel(); }
  DType dtype() const { return spec_->dtype(); }
  Device device() const { return local_.device(); }

  // "DTensor(local=[4, 16], global=[8, 16], placements=[S(0), R], float32, mesh=[2, 2])"
  std::string str() const;

 private:
  Tensor local_;
  std::shared_ptr<const DTensorSpec> spec_;
};

std::ostream& operator<<(std::ostream& os, const DTensor& t);

// Distributes `tensor` over `mesh` with `placements` (PyTorch distribute_tensor).
// src_data_rank: the world rank whose `tensor` is the source of truth (it must be a rank of
// the mesh). Every rank of the mesh must pass a tensor of the same shape and dtype: this is
// checked first with one small all_gather per mesh dim (a fixed-size record: ndim, dtype, the
// first 16 sizes), and a mismatch throws on every rank of the mesh, e.g. "[distribute_tensor]
// argument tensor differs across ranks: rank 3 passed shape [9, 4] float32 but src_data_rank 0
// passed [8, 4] float32 (... mismatching ranks: 3)". CommDebugMode counts these all_gathers
// (they are real communication). Then the source's data moves down the mesh dims in order
// 0..ndim-1 (the nesting order of compute_local_shape_and_offset), on mesh.communicator(i):
// for Shard(d) on mesh dim i the member at the source's coordinate scatters the torch.chunk
// pieces of tensor dim d (padded to the chunk size ceil(m / n) for the transfer), so each
// rank receives only its piece, as in PyTorch; for Replicate/Partial it broadcasts its piece.
// So a source rank costs mesh.ndim() all_gathers + one scatter per sharded mesh dim + one
// broadcast per other mesh dim; a rank receives its piece after each step (only its shard's
// bytes, plus chunk padding, when every mesh dim shards).
// Pass std::nullopt when every rank already holds the same tensor: then no communication
// happens (and nothing is checked: a rank's shape and dtype are taken as the global ones) and
// each rank just takes its chunk. Partial placements keep
// the value on coordinate 0 of that mesh dim and zeros elsewhere for sum (the value
// everywhere for avg/max/min). Ranks outside the mesh get an empty local tensor and issue
// nothing. A contiguous, unsharded local may share storage with `tensor` (as in PyTorch).
DTensor distribute_tensor(const Tensor& tensor, const DeviceMesh& mesh, Placements placements,
                          std::optional<int> src_data_rank = 0);
// Same, on current_mesh() (the innermost MeshGuard).
DTensor distribute_tensor(const Tensor& tensor, Placements placements,
                          std::optional<int> src_data_rank = 0);

// Prints, on the mesh's first rank, which ranks hold which block of a 1-D or 2-D DTensor
// (PyTorch visualize_sharding). Returns the text (empty on other ranks).
std::string visualize_sharding(const DTensor& t, bool print = true);

}  // namespace dtensor
