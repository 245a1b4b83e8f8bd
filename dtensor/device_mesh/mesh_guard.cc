#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace detail {
namespace {

struct GuardEntry {
  DeviceMesh mesh;
  std::shared_ptr<std::atomic<bool>> gone;  // set when the guard is destroyed elsewhere
};

std::vector<GuardEntry>& mesh_stack() {
  thread_local std::vector<GuardEntry> stack;
  return stack;
}

// A misuse seen by a destructor on this thread, reported by the next call that reads the stack.
std::string& pending_misuse() {
  thread_local std::string message;
  return message;
}

void report_misuse(const char* op) {
  std::string& misuse = pending_misuse();
  if (!misuse.empty()) {
    const std::string message = std::move(misuse);
    misuse.clear();
    DT_FAIL("[%s] %s", op, message);
  }
  auto& stack = mesh_stack();
  const auto gone =
      std::find_if(stack.begin(), stack.end(), [](const GuardEntry& e) { return e.gone->load(); });
  if (gone != stack.end()) {
    const std::string mesh = gone->mesh.str();
    stack.erase(std::remove_if(stack.begin(), stack.end(),
                               [](const GuardEntry& e) { return e.gone->load(); }),
                stack.end());
    DT_FAIL(
        "[%s] the MeshGuard for %s, created on this thread, was destroyed on another thread (a "
        "MeshGuard belongs to the thread that created it: the mesh stack is thread-local); its "
        "entry is now removed",
        op, mesh);
  }
}

}  // namespace
}  // namespace detail

MeshGuard::MeshGuard(DeviceMesh mesh) : gone_(std::make_shared<std::atomic<bool>>(false)) {
  DT_CHECK(mesh.defined(),
           "[MeshGuard] mesh is an empty DeviceMesh handle (expected a mesh built by DeviceMesh "
           "or init_device_mesh)");
  detail::report_misuse("MeshGuard");
  detail::mesh_stack().push_back({std::move(mesh), gone_});
}

MeshGuard::~MeshGuard() {
  auto& stack = detail::mesh_stack();
  if (!stack.empty() && stack.back().gone == gone_) {
    stack.pop_back();
    return;
  }
  gone_->store(true);
  const auto mine = std::find_if(stack.begin(), stack.end(),
                                 [&](const detail::GuardEntry& e) { return e.gone == gone_; });
  if (mine == stack.end()) return;  // created on another thread: that thread reports it
  detail::pending_misuse() = absl::StrFormat(
      "a MeshGuard for %s was destroyed out of order, while the MeshGuard for %s opened after it "
      "was still alive (guards must be destroyed innermost first, as scopes do); its entry was "
      "removed, the inner guard's mesh is current",
      mine->mesh.str(), stack.back().mesh.str());
  stack.erase(mine);
}

const DeviceMesh& current_mesh() {
  detail::report_misuse("current_mesh");
  const auto& stack = detail::mesh_stack();
  DT_CHECK(!stack.empty(),
           "[current_mesh] no device mesh is set: pass a mesh or open a dtensor::MeshGuard");
  return stack.back().mesh;
}

bool has_current_mesh() {
  detail::report_misuse("has_current_mesh");
  return !detail::mesh_stack().empty();
}

}  // namespace dtensor
