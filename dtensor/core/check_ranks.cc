#include "dtensor/core/check_ranks.h"

#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {
constexpr int64_t kMessageBytes = 1024;
}  // namespace

void check_on_all_ranks(const DeviceMesh& mesh, absl::Span<const int64_t> mesh_dims,
                        std::string_view local_error) {
  DT_CHECK(mesh.contains_me(), "[check_on_all_ranks] this rank is not part of mesh %s", mesh.str());
  const Device device = detail::mesh_device(mesh, Tensor());
  const int64_t none = std::numeric_limits<int64_t>::max();
  // The lowest failing world rank of the group (an all-reduce(min) per mesh dim).
  Tensor flag = full({1}, local_error.empty() ? none : int64_t{world_rank()},
                     TensorOptions(DType::kInt64, device));
  bool communicated = false;
  for (int64_t m : mesh_dims) {
    if (mesh.size(m) == 1) continue;
    mesh.communicator(m)->all_reduce(flag, ReduceOp::kMin)->wait();
    communicated = true;
  }
  if (!communicated) {
    // Nothing to agree on: every rank that must know found the error itself.
    if (!local_error.empty()) DT_FAIL("%s", std::string(local_error));
    return;
  }
  const int64_t failing = flag.to(Device(kCPU)).data<int64_t>()[0];
  if (failing == none) return;

  // The failing rank's message reaches the group dim by dim (the member at the failing rank's
  // coordinate broadcasts; after the step for dim m every rank agreeing with it on the dims
  // after m holds the message).
  const std::vector<int>& ranks = mesh.ranks();
  const int64_t index =
      std::find(ranks.begin(), ranks.end(), static_cast<int>(failing)) - ranks.begin();
  const Shape root = detail::unravel_index(index, mesh.shape());
  Tensor message = zeros({kMessageBytes / 8}, TensorOptions(DType::kInt64));
  if (failing == world_rank()) {
    std::memcpy(message.data_ptr(), local_error.data(),
                std::min<size_t>(local_error.size(), kMessageBytes - 1));
  }
  message = message.to(device);
  for (int64_t m : mesh_dims) {
    if (mesh.size(m) == 1) continue;
    mesh.communicator(m)->broadcast(message, static_cast<int>(root[m]))->wait();
  }
  const Tensor host = message.to(Device(kCPU));
  const char* text = static_cast<const char*>(host.data_ptr());
  DT_FAIL("%s (raised on rank %d)", std::string(text, strnlen(text, kMessageBytes - 1)), failing);
}

void check_on_all_ranks(const DTensorSpec& data, std::string_view local_error) {
  absl::InlinedVector<int64_t, 4> dims;
  for (int64_t m = 0; m < data.mesh().ndim(); ++m) {
    if (!data.placement(m).is_replicate()) dims.push_back(m);
  }
  check_on_all_ranks(data.mesh(), dims, local_error);
}

void report_failure_on_mesh(const DeviceMesh& mesh, std::string_view op) noexcept {
  try {
    if (!mesh.defined() || !mesh.contains_me()) return;
    absl::InlinedVector<Communicator*, 4> comms;
    for (int64_t m = 0; m < mesh.ndim(); ++m) comms.push_back(mesh.communicator(m).get());
    report_failure_in_flight(comms, op);
  } catch (...) {
  }
}

}  // namespace dtensor
