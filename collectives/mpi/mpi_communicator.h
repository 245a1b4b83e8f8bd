// The MPI backend: every collective is a nonblocking MPI call (MPI_Iallreduce, ...) returning a
// Work whose wait() polls MPI_Test until completion or the collective deadline. CPU tensors are
// used in place; CUDA tensors are staged through pinned host memory (when CUDA is compiled in).
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

#include "collectives/communicator.h"

namespace dtensor {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps `comm`. With `owned` the communicator is freed (MPI_Comm_free) in the destructor,
  // unless MPI is already finalised by then.
  MpiCommunicator(MPI_Comm comm, bool owned);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::string_view backend() const override { return "mpi"; }
  // The CPU always; CUDA devices when CUDA is compiled in (by staging through host memory).
  bool supports(Device device) const override;
  // Exchanges (color, key) with a deadline-guarded all_gather first, so that a missing rank
  // ends the job instead of hanging in MPI_Comm_split. The child's description is
  // "<parent description>/color <c>" until the caller sets another.
  std::shared_ptr<Communicator> split(int color, int key) override;

  MPI_Comm mpi_comm() const { return comm_; }

 protected:
  WorkPtr do_all_reduce(const Tensor& tensor, ReduceOp op) override;
  // MPI_Iallreduce with distinct send and receive buffers (MPI_IN_PLACE when output is input:
  // do_all_reduce calls it that way).
  WorkPtr do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_gather(const Tensor& output, const Tensor& input) override;
  WorkPtr do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_to_all(const Tensor& output, const Tensor& input) override;
  WorkPtr do_broadcast(const Tensor& tensor, int root) override;
  // MPI_Iscatter; bf16/fp16 travel as plain 16-bit elements.
  WorkPtr do_scatter(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr do_send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr do_recv(const Tensor& tensor, int src, int tag) override;
  WorkPtr do_barrier() override;

 private:
  MPI_Comm comm_;
  bool owned_;
};

namespace detail {
// Waits for `request` with the MPI backend's polling loop (sched_yield, then sleeps growing to
// ~1 ms) and ends the job when the collective deadline passes; `what` is called to build the
// deadline message only then.
void wait_mpi_request(MPI_Request* request, const std::function<std::string()>& what);
// "mesh dim 1 (tp) (mpi, rank 1 of 2, world ranks [0, 1])"
std::string describe_communicator(const Communicator& comm);
}  // namespace detail

}  // namespace dtensor
