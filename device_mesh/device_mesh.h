// DeviceMesh: an N-d array of world ranks with named dims, one communicator per dim.
//
// A mesh is a cheap shared handle: copies refer to the same ranks and communicators.
// Communicators are created once when the mesh is built (MPI_Comm_split / ncclCommSplit over
// the world, collective over all world ranks) and shared by every submesh cut from it.
// Ranks outside the mesh get an empty coordinate and no communicators (PyTorch semantics).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/communicator.h"
#include "tensor/shape.h"

namespace dtensor {

class DeviceMesh {
 public:
  // An empty handle; only assignment and defined() are valid on it.
  DeviceMesh() = default;
  // `mesh_shape` with row-major `ranks` (world ranks, a permutation of a subset of the world,
  // each at most once); `dim_names` empty or one unique name per dim. Collective: every world
  // rank must construct the same mesh. Throws dtensor::Error on a bad mesh.
  DeviceMesh(DeviceType device_type, IntSpan mesh_shape, std::vector<int> ranks,
             std::vector<std::string> dim_names = {});

  bool defined() const { return impl_ != nullptr; }
  DeviceType device_type() const;
  int64_t ndim() const;
  const Shape& shape() const;
  int64_t size() const;             // number of ranks in the mesh
  int64_t size(int64_t dim) const;  // ranks along one dim
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

  // Submesh over one named dim / several (in the order given): the slice through this
  // process's coordinate. Shares the parent's communicators. On a rank outside the mesh it is
  // the slice through coordinate 0, which does not contain this process.
  DeviceMesh operator[](std::string_view dim_name) const;
  DeviceMesh operator[](std::initializer_list<std::string_view> dim_names) const;
  DeviceMesh submesh(const std::vector<int64_t>& dims) const;

  // Same device type, shape, ranks and dim names.
  bool operator==(const DeviceMesh& other) const;
  size_t hash() const;
  std::string str() const;  // "DeviceMesh(cpu, [[0, 1], [2, 3]], dims=(dp, tp))"

  template <typename H> friend H AbslHashValue(H h, const DeviceMesh& m) {
    return H::combine(std::move(h), m.hash());
  }

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// A mesh over world ranks 0..prod(shape)-1 in row-major order (PyTorch init_device_mesh).
// Throws when the mesh needs more ranks than the world has.
DeviceMesh init_device_mesh(DeviceType device_type, IntSpan mesh_shape,
                            std::vector<std::string> dim_names = {});
inline DeviceMesh init_device_mesh(DeviceType device_type, std::initializer_list<int64_t> shape,
                                   std::vector<std::string> dim_names = {}) {
  return init_device_mesh(device_type, IntSpan(shape.begin(), shape.size()), std::move(dim_names));
}

// ---- the thread-local default-mesh stack -----------------------------------------------------

// Pushes `mesh` as the current mesh for this thread; the destructor pops it. Guards nest.
class MeshGuard {
 public:
  explicit MeshGuard(DeviceMesh mesh);
  ~MeshGuard();
  MeshGuard(const MeshGuard&) = delete;
  MeshGuard& operator=(const MeshGuard&) = delete;
};

// The innermost guarded mesh; throws "[current_mesh] no mesh is set ..." when none is.
const DeviceMesh& current_mesh();
bool has_current_mesh();

}  // namespace dtensor
