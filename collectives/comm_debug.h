// CommDebugMode: counts the collectives issued while it is alive (PyTorch's CommDebugMode).
//
//   dtensor::CommDebugMode comm;
//   auto y = x.redistribute(mesh, {dtensor::Replicate()});
//   REQUIRE(comm.count(dtensor::CollectiveKind::kAllGather) == 1);
//
// Scopes nest; each counts what was issued during its own lifetime, on this thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "collectives/communicator.h"

namespace dtensor {

class CommDebugMode {
 public:
  CommDebugMode();
  ~CommDebugMode();
  CommDebugMode(const CommDebugMode&) = delete;
  CommDebugMode& operator=(const CommDebugMode&) = delete;

  int64_t count(CollectiveKind kind) const;
  int64_t total_count() const;
  // Bytes of the tensors passed (input for gathers/sends, the tensor for in-place ops, the
  // output (the block each rank receives) for scatter).
  int64_t bytes(CollectiveKind kind) const;
  // "all_gather: 1 (4096 B), all_reduce: 2 (...)"
  std::string str() const;

  // How many of the counted operations ran on a communicator of one rank (a size-1 mesh dim:
  // the library never issues one, a relabel suffices).
  int64_t single_rank_count() const;

  // Called by Communicator for every issued operation, with its communicator's size.
  static void record(CollectiveKind kind, int64_t bytes, int64_t ranks);

 private:
  std::array<int64_t, kNumCollectiveKinds> counts_{};
  std::array<int64_t, kNumCollectiveKinds> bytes_{};
  int64_t single_rank_count_ = 0;
  CommDebugMode* parent_;
};

}  // namespace dtensor
