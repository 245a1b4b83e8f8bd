#include "dtensor/parallel/data_parallel/detail/grad_comm.h"

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/comm_worker.h"
#include "dtensor/tensor/detail/capture_hook.h"

namespace dtensor::detail {

void DpCollective::wait() {
  if (work_ != nullptr) work_->wait();
  work_ = nullptr;
}

// Parameter gathers and gradient reductions run on the communication thread
// (dtensor/collectives/comm_worker.h), so they progress while the caller goes on computing (a
// prefetched gather during the previous unit's forward, a reduction during the rest of the
// backward); the tensors are held by the task until it ran. CommDebugMode counts them when
// launched, on the launching thread (with the labels current there), as if issued there;
// inside the task nothing is recorded twice (the inline path, without the thread, records
// nothing itself either). While a step is captured (dtensor::compile) the collective runs at
// once on this thread instead: it is part of a recorded primitive, which leaves nothing in
// flight (replay runs the primitive again, asynchronously then, waited inside it).
namespace {
DpCollective start(CollectiveKind kind, const Tensor& counted, Communicator& comm,
                   std::function<void()> task) {
  if (capture_recorder() != nullptr) {
    task();  // the communicator counts it, on this thread
    return DpCollective();
  }
  CommDebugMode::record(kind, static_cast<int64_t>(counted.nbytes()), comm.size());
  // Declared with its communicator: operations on other communicators (a context-parallel
  // ring hop, a tensor-parallel all-reduce) need not wait for it.
  return DpCollective(submit_async(comm, std::move(task), /*capture_debug=*/false));
}
}  // namespace

DpCollective launch_all_gather(Communicator& comm, const Tensor& output, const Tensor& input) {
  return start(
      CollectiveKind::kAllGather, input, comm,
      [c = comm.shared_from_this(), output, input] { c->all_gather(output, input)->wait(); });
}

DpCollective launch_reduce_scatter_avg(Communicator& comm, const Tensor& output,
                                       const Tensor& input) {
  return start(CollectiveKind::kReduceScatter, input, comm,
               [c = comm.shared_from_this(), output, input] {
                 c->reduce_scatter(output, input, ReduceOp::kAvg)->wait();
               });
}

DpCollective launch_all_reduce_avg(Communicator& comm, const Tensor& tensor) {
  return start(CollectiveKind::kAllReduce, tensor, comm, [c = comm.shared_from_this(), tensor] {
    c->all_reduce(tensor, ReduceOp::kAvg)->wait();
  });
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
