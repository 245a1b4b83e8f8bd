#include "parallel/data_parallel/grad_comm.h"

namespace dtensor::detail {

void DpCollective::wait() {
  if (work_ != nullptr) work_->wait();
  work_ = nullptr;
}

DpCollective launch_all_gather(Communicator& comm, const Tensor& output, const Tensor& input) {
  return DpCollective(comm.all_gather(output, input));
}

DpCollective launch_reduce_scatter_avg(Communicator& comm, const Tensor& output,
                                       const Tensor& input) {
  return DpCollective(comm.reduce_scatter(output, input, ReduceOp::kAvg));
}

DpCollective launch_all_reduce_avg(Communicator& comm, const Tensor& tensor) {
  return DpCollective(comm.all_reduce(tensor, ReduceOp::kAvg));
}

void PendingReductions::add(DpCollective c, std::function<void()> finish) {
  pending_.emplace_back(std::move(c), std::move(finish));
}

void PendingReductions::finish_all() {
  // Cleared first: a finish that throws leaves nothing half-pending for the next backward.
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [c, finish] : pending) c.wait();
  for (auto& [c, finish] : pending) finish();
}

void PendingReductions::discard_all() {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [c, finish] : pending) c.wait();
}

}  // namespace dtensor::detail
