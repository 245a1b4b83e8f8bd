// The one place data parallel issues its collectives (parameter all-gathers, gradient
// all-reduces and reduce-scatters). Each launch returns a handle; the caller waits on it only
// where the result is first needed (before unpacking into parameters or gradients). The
// gradient reductions run on the communication thread (dtensor/collectives/comm_worker.h) and so
// progress while the backward computes; the parameter all-gather is needed at once and is
// issued directly.
#pragma once

#include <functional>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::detail {

class DpCollective {
 public:
  DpCollective() = default;
  explicit DpCollective(WorkPtr work) : work_(std::move(work)) {}
  // Blocks until the collective is done (the collective deadline applies).
  void wait();

 private:
  WorkPtr work_;
};

DpCollective launch_all_gather(Communicator& comm, const Tensor& output, const Tensor& input);
DpCollective launch_reduce_scatter_avg(Communicator& comm, const Tensor& output,
                                       const Tensor& input);
DpCollective launch_all_reduce_avg(Communicator& comm, const Tensor& tensor);

// Collectives launched during one backward, finished (waited, then unpacked) in launch order
// at its end.
class PendingReductions {
 public:
  void add(DpCollective c, std::function<void()> finish);
  void finish_all();
  // Waits for every launched collective (each rank launched the same ones, so they complete)
  // and drops their finish steps: what a backward that raised midway launched.
  void discard_all();
  bool empty() const { return pending_.empty(); }

 private:
  std::vector<std::pair<DpCollective, std::function<void()>>> pending_;
};

}  // namespace dtensor::detail
