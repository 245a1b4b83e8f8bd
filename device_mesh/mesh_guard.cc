#include <vector>

#include "device_mesh/device_mesh.h"
#include "tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

std::vector<DeviceMesh>& mesh_stack() {
  thread_local std::vector<DeviceMesh> stack;
  return stack;
}

}  // namespace
}  // namespace detail

MeshGuard::MeshGuard(DeviceMesh mesh) {
  DT_CHECK(mesh.defined(),
           "[MeshGuard] mesh is an empty DeviceMesh handle (expected a mesh built by DeviceMesh "
           "or init_device_mesh)");
  detail::mesh_stack().push_back(std::move(mesh));
}

MeshGuard::~MeshGuard() {
  detail::mesh_stack().pop_back();
}

const DeviceMesh& current_mesh() {
  const auto& stack = detail::mesh_stack();
  DT_CHECK(!stack.empty(),
           "[current_mesh] no device mesh is set: pass a mesh or open a dtensor::MeshGuard");
  return stack.back();
}

bool has_current_mesh() {
  return !detail::mesh_stack().empty();
}

}  // namespace dtensor
