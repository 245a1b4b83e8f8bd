// The NCCL backend (CUDA tensors). Compiled only with CUDA. Collectives run on the
// communicator's own stream, ordered after the compute stream (the default stream) by a CUDA
// event, and the compute stream is made to wait for their completion event, so later kernels
// see the results. Work::wait() blocks the host until the completion event fires, polling
// ncclCommGetAsyncError so that a peer failure raises an error and an expired deadline aborts
// the communicator (ncclCommAbort) and ends the job.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "dtensor/collectives/communicator.h"

namespace dtensor {

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (initialised, on CUDA device `device`). `mpi` is an MPI-backend
  // communicator with the same members in the same order (used for splits and messages).
  NcclCommunicator(ncclComm_t comm, CommunicatorPtr mpi, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string_view backend() const override { return "nccl"; }
  bool orders_across_communicators() const override { return true; }
  // CUDA tensors on this communicator's device.
  bool supports(Device device) const override;

  ncclComm_t nccl_comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

 protected:
  WorkPtr do_all_reduce(const Tensor& tensor, ReduceOp op) override;
  // ncclAllReduce with distinct send and receive buffers.
  WorkPtr do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) override;
  // The floating max / min of both all-reduces (and of reduce_scatter, inline): the values as
  // integer keys, so that a NaN on one rank gives NaN as on MPI and on one device (nan_minmax.h).
  WorkPtr keyed_all_reduce(const Tensor& output, const Tensor& input, ReduceOp op);
  WorkPtr do_all_gather(const Tensor& output, const Tensor& input) override;
  WorkPtr do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_to_all(const Tensor& output, const Tensor& input) override;
  WorkPtr do_broadcast(const Tensor& tensor, int root) override;
  // One group: the root copies its own block with cudaMemcpyAsync on the NCCL stream and
  // ncclSends every other block; every other rank ncclRecvs its block.
  WorkPtr do_scatter(const Tensor& output, const Tensor& input, int root) override;
  // Between two ranks NCCL matches point-to-point messages by issue order (`tag` is ignored)
  // and each call is enqueued on its own, not grouped: a rank that posts a recv and then a send
  // to peers that do the same (a ring) can block until the collective deadline ends the job,
  // where MPI would complete; pair such exchanges in one order on every rank (send first on
  // even ranks) or use all_to_all. A send to or a recv from this rank itself never reaches NCCL
  // (it refuses a self recv not grouped with its send): the two pair here as MPI pairs them
  // (the oldest pending one of the other kind with the same tag, posted in either order) and
  // the second one posted copies device to device on the NCCL stream; the first one's Work
  // completes with that copy, or raises the error the pairing raised (a dtype or size
  // mismatch), and waiting on it before the second is posted raises (it could never complete).
  // Empty self messages pair too.
  WorkPtr do_send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr do_recv(const Tensor& tensor, int src, int tag) override;
  // A one-element all_reduce (NCCL has no barrier).
  WorkPtr do_barrier() override;
  // ncclCommSplit (nonblocking, deadline-guarded), with the MPI twin split alongside.
  std::shared_ptr<Communicator> do_split(int color, int key) override;
  // The MPI twin's group, then an NCCL communicator bootstrapped over it.
  std::shared_ptr<Communicator> do_create_group(const std::vector<int>& members) override;
  // The consistency check's fingerprints travel over the MPI twin (host memory) and are
  // compared before the kernel is enqueued; there is no inline path, so every checked NCCL
  // collective costs one small MPI allgather (a host round trip) besides the NCCL kernel.
  WorkPtr do_exchange_slots(const void* mine, void* all, std::string_view what,
                            const Tensor* shape_of) override;

 private:
  template <typename Enqueue>
  WorkPtr launch(CollectiveKind kind, const Tensor* shape_of, std::vector<Tensor> keep_alive,
                 Enqueue&& enqueue);

  class SelfWork;
  // The self send or recv posted first, waiting for its match (see do_send).
  struct PendingSelf {
    Tensor tensor;
    int tag = 0;
    std::shared_ptr<SelfWork> work;
  };
  // Pairs a self send (`is_send`) or recv with the oldest pending one of the other kind with
  // the same tag, or queues it.
  WorkPtr self_p2p(const Tensor& tensor, int tag, bool is_send);

  ncclComm_t comm_;
  CommunicatorPtr mpi_;
  std::mutex self_mu_;  // guards the pending self messages
  std::deque<PendingSelf> self_sends_, self_recvs_;
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the compute stream before each collective
};

}  // namespace dtensor
