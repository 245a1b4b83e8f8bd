// DeviceMesh: an N-d array of world ranks with named dims, one communicator per dim.
//
// A mesh is a cheap shared handle: copies refer to the same ranks and communicators.
// Communicators are created once when the mesh is built (Communicator::split of the world
// communicator, i.e. MPI_Comm_split / ncclCommSplit, collective over all world ranks) and shared
// by every submesh cut from it. Ranks outside the mesh get an empty coordinate and no
// communicators (PyTorch semantics).
//
// Communicator registry: the per-dim communicators of every constructed mesh are kept in a
// process-wide registry keyed by (device type, shape, ranks). Building an identical mesh again
// (dim names may differ) reuses them, so meshes created in a loop cost one split per dim once.
//
// Agreement: every construction of a mesh with a dim of size > 1 first compares, over the world
// communicator, what each rank builds (one small checked all_gather, also on a registry hit), so
// every world rank must construct the same meshes in the same order. A rank building another
// shape or rank order raises "[DeviceMesh] the ranks build different meshes: rank 3 builds
// DeviceMesh(cpu, [3, 2, 1, 0]) where ranks 0, 1, 2 build DeviceMesh(cpu, [0, 1, 2, 3]) ..."
// on every rank, before any split; a mesh built by only some ranks raises on those ranks
// "[DeviceMesh] building DeviceMesh(...) on this rank: ... collective mismatch ..." and on the
// others, at their next collective on the world communicator, a collective mismatch naming
// "(DeviceMesh)" (a rank that issues nothing more meets the collective deadline). Registered
// communicators live until the process exits or clear_device_mesh_registry() is called.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/tensor/shape.h"

namespace dtensor {

// Mesh dims of size 1 use a per-process self communicator and need no split, so a mesh whose
// dims all have size 1 — e.g. DeviceMesh(kCPU, {1}, {world_rank()}), the mesh of just this
// process — is built by each rank on its own, without communication.
class DeviceMesh {
 public:
  // An empty handle; only assignment and defined() are valid on it.
  DeviceMesh() = default;
  // `mesh_shape` (at least one dim, every size >= 1) with row-major `ranks` (world ranks, a
  // permutation of a subset of the world: each in [0, world_size) and at most once, exactly
  // prod(mesh_shape) of them); `dim_names` empty (then "dim0", "dim1", ...) or one unique,
  // non-empty name per dim. Collective over the WHOLE world: every world rank, in the mesh or
  // not, must construct the same mesh (checked, see above); the first construction of a given
  // (device type, shape, ranks) also splits, later ones reuse the registered communicators.
  // For each dim d it splits world_communicator(device_type) with color = the index of this
  // rank's line along d (the ranks sharing every other coordinate; -1 outside the mesh) and
  // key = the coordinate along d, and names the result "mesh dim <d> (<name>)".
  // Throws dtensor::Error "[DeviceMesh] ..." on a bad mesh; the checks depend only on the
  // arguments and the world size, so every rank throws the same error before communicating.
  DeviceMesh(DeviceType device_type, IntSpan mesh_shape, std::vector<int> ranks,
             std::vector<std::string> dim_names = {});

  // Whether this is a mesh (not an empty handle); its device type, rank (number of dims) and
  // shape.
  bool defined() const { return impl_ != nullptr; }
  DeviceType device_type() const;
  int64_t ndim() const;
  const Shape& shape() const;
  int64_t size() const;  // number of ranks in the mesh
  // Ranks along one dim. Mesh dims may be negative (counted from the end); an out-of-range dim
  // throws "[DeviceMesh] mesh dim 3 out of range for a 2-d mesh (expected -2..1)". The same
  // holds for every accessor taking a mesh dim.
  int64_t size(int64_t dim) const;
  const std::vector<std::string>& dim_names() const;
  // Index of a named dim; throws "[DeviceMesh] unknown mesh dim name 'x' (mesh dims: dp, tp)".
  int64_t dim_index(std::string_view name) const;
  // Row-major world ranks.
  const std::vector<int>& ranks() const;

  // This process's coordinate in the mesh; empty when it is not part of the mesh.
  const Shape& get_coordinate() const;
  bool contains_me() const { return !get_coordinate().empty(); }
  // This process's index along `dim` (its rank in communicator(dim)); -1 outside the mesh.
  int64_t get_local_rank(int64_t dim) const;
  int64_t get_local_rank(std::string_view dim_name) const;
  // The communicator along `dim` that contains this process; nullptr outside the mesh.
  const CommunicatorPtr& communicator(int64_t dim) const;
  // One communicator spanning several mesh dims (distinct, any order; taken ascending): the
  // ranks that share this process's coordinate on every other dim, ordered row-major over
  // `dims` (rank = flattened index of the coordinate along them), as PyTorch's
  // DeviceMesh._flatten. For a redistribute that moves several mesh dims the same way with one
  // collective. Created on first use by the group's ranks alone (they first meet on each dim's
  // communicator, so a missing rank ends the job at the collective deadline instead of
  // hanging), then kept in a process-wide registry keyed by (device type, ranks) and shared by
  // every mesh and submesh with that group; clear_device_mesh_registry() drops them. Every rank
  // of the group must ask for it at the same point (collective over the group the first time).
  // One dim, or one dim of size > 1, gives that dim's communicator; nullptr outside the mesh.
  CommunicatorPtr flattened_communicator(const std::vector<int64_t>& dims) const;

  // Submesh over one named dim / several (in the order given, at least one, no repeats): the
  // slice through this process's coordinate, with the selected dims' names. No communication:
  // it shares the parent's communicators for those dims (each holds exactly one line of the
  // slice). On a rank outside the mesh it is the slice through coordinate 0, which does not
  // contain this process. Submeshes are not put in the registry (they differ between ranks).
  DeviceMesh operator[](std::string_view dim_name) const;
  DeviceMesh operator[](std::initializer_list<std::string_view> dim_names) const;
  DeviceMesh submesh(const std::vector<int64_t>& dims) const;

  // Same device type, shape, ranks and dim names (two empty handles are equal).
  bool operator==(const DeviceMesh& other) const;
  // Hash of what operator== compares; computed once at construction (0 for an empty handle).
  size_t hash() const;
  std::string str() const;  // "DeviceMesh(cpu, [[0, 1], [2, 3]], dims=(dp, tp))"

  template <typename H>
  friend H AbslHashValue(H h, const DeviceMesh& m) {
    return H::combine(std::move(h), m.hash());
  }

 private:
  struct Impl;
  // The implementation; throws "[DeviceMesh] ... empty DeviceMesh handle" when undefined.
  const Impl& impl() const;
  std::shared_ptr<const Impl> impl_;
};

// A mesh over world ranks 0..prod(shape)-1 in row-major order (PyTorch init_device_mesh);
// `dim_names` as for DeviceMesh. Collective like the constructor. Throws
// "[init_device_mesh] mesh shape [2, 4] needs 8 ranks but the world has 4 (launch with
// mpirun -np 8)" when the mesh needs more ranks than the world has; a smaller mesh leaves the
// ranks prod(shape).. outside (empty coordinate, no communicators).
DeviceMesh init_device_mesh(DeviceType device_type, IntSpan mesh_shape,
                            std::vector<std::string> dim_names = {});
inline DeviceMesh init_device_mesh(DeviceType device_type, std::initializer_list<int64_t> shape,
                                   std::vector<std::string> dim_names = {}) {
  return init_device_mesh(device_type, IntSpan(shape.begin(), shape.size()), std::move(dim_names));
}

// ---- the thread-local default-mesh stack -----------------------------------------------------

// Pushes `mesh` as the current mesh for this thread; the destructor pops it. Guards nest
// (the innermost wins). Throws "[MeshGuard] ..." for an empty handle. A guard belongs to the
// thread that created it and must be destroyed there, innermost first (as scopes do). Misuse
// cannot throw from a destructor, so it is made harmless and reported by the next
// current_mesh() / has_current_mesh() / MeshGuard on the affected thread: a guard destroyed
// while an inner one is alive removes only its own entry ("[current_mesh] a MeshGuard for ...
// was destroyed out of order ..."); a guard destroyed on another thread retires its entry on
// its own thread ("... destroyed on another thread ...").
class MeshGuard {
 public:
  // Makes `mesh` the current mesh on this thread until the guard goes.
  explicit MeshGuard(DeviceMesh mesh);
  ~MeshGuard();
  MeshGuard(const MeshGuard&) = delete;
  MeshGuard& operator=(const MeshGuard&) = delete;

 private:
  std::shared_ptr<std::atomic<bool>> gone_;  // shared with this guard's stack entry
};

// The innermost guarded mesh on this thread; throws "[current_mesh] no device mesh is set:
// pass a mesh or open a dtensor::MeshGuard" when none is.
const DeviceMesh& current_mesh();
// Whether a MeshGuard is open on this thread.
bool has_current_mesh();

// Drops every registered mesh communicator (handles still held stay valid). Collective in
// effect: the next construction of any mesh splits again, so every world rank must call it at
// the same point of the program. Meant for tests and for tearing down before MPI_Finalize.
void clear_device_mesh_registry();
// Number of (device type, shape, ranks) entries in the registry (for tests).
int64_t device_mesh_registry_size();

}  // namespace dtensor
