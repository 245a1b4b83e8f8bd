// The MPI backend. A collective's data moves by the blocking MPI call (MPI_Allreduce, ...) on
// the issuing thread, under a deadline watchdog, and returns a completed Work: Open MPI moves a
// nonblocking collective only inside MPI calls, so posting MPI_Iallreduce and returning buys no
// overlap on the caller's thread (overlap comes from the communication thread,
// dtensor/collectives/comm_worker.h), while the blocking algorithms are often faster (in-place
// all-reduce of 512 KB on 4 ranks: 230 us blocking, 337 us MPI_Iallreduce + MPI_Wait;
// reduce-scatter of 16 MB: 12.7 ms against 37.5 ms). The exception is all_gather, whose
// nonblocking form is the faster at every size measured: MPI_Iallgather, then a Work whose
// wait() polls. The form depends on the collective's kind only, so every rank uses the same one
// (MPI never pairs a blocking collective with a nonblocking one). The consistency check's
// fingerprint exchange is blocking as well (on every rank, whatever the fingerprints say, so
// that ranks that disagree still pair up). Point-to-point stays nonblocking (a Work whose
// wait() polls MPI_Test until completion or the deadline): a send and a receive posted in
// either order must not block each other. Since a collective completes at issue, ranks must
// issue collectives on different communicators in the same order (communicator.h; before, only
// collectives larger than the check's inline block, whose fingerprints are compared at issue,
// needed that). CPU tensors are used in place; CUDA tensors are staged through pinned host
// memory (when CUDA is compiled in). Communicators return MPI errors as codes
// (MPI_ERRORS_RETURN), raised as dtensor::Error: a size mismatch (MPI_ERR_TRUNCATE) is an
// error, not an abort. Reductions: float16/bfloat16 sum, avg and product travel as float32 (one
// rounding, as on one device); max/min of floating types propagate NaN (user-defined MPI ops;
// MPI_MAX drops a NaN depending on the order); floating sums, averages and products over 3+
// ranks associate in rank order whatever the message size (rank_ordered_reduce.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dtensor/collectives/communicator.h"

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
  // CPU memory, unless set_regions_enabled(false).
  bool supports_regions(Device device) const override;
  // Whether CPU collectives move strided regions with derived datatypes (supports_regions): on
  // by default; off, callers pack into contiguous blocks as they do for CUDA tensors. For tests
  // and benchmarks that compare the two paths (they give the same bits). Process-wide: every
  // rank must set the same value at the same point of the program, with no collective and no
  // async redistribute in flight (the executor reads it per step, possibly on the
  // communication thread).
  static void set_regions_enabled(bool on);
  static bool regions_enabled();
  MPI_Comm mpi_comm() const { return comm_; }
  // MPI_TAG_UB, read on MPI_COMM_WORLD (at least 32767 by the standard; Open MPI 4.1: 8388607).
  int tag_upper_bound() const override;

 protected:
  WorkPtr do_all_reduce(const Tensor& tensor, ReduceOp op) override;
  // MPI_Allreduce with MPI_IN_PLACE: a distinct output first receives a copy of the input
  // (do_all_reduce passes output == input).
  WorkPtr do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_gather(const Tensor& output, const Tensor& input) override;
  // MPI_Alltoallw with one datatype per source rank (its region of the output). CPU tensors
  // only.
  WorkPtr do_all_gather_into_regions(const Tensor& output, const Tensor& input,
                                     const std::vector<Shape>& offsets,
                                     const std::vector<Shape>& shapes) override;
  WorkPtr do_all_to_all_regions(const Tensor& output, const Tensor& input,
                                const std::vector<Shape>& send_offsets,
                                const std::vector<Shape>& send_shapes,
                                const std::vector<Shape>& recv_offsets,
                                const std::vector<Shape>& recv_shapes) override;
  WorkPtr do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_to_all(const Tensor& output, const Tensor& input) override;
  WorkPtr do_broadcast(const Tensor& tensor, int root) override;
  // MPI_Scatter; bf16/fp16 travel as plain 16-bit elements.
  WorkPtr do_scatter(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr do_send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr do_recv(const Tensor& tensor, int src, int tag) override;
  WorkPtr do_barrier() override;
  // MPI_Comm_split (the members have met in split()'s exchange). The child's description is
  // "<parent description>/color <c>" until the caller sets another.
  std::shared_ptr<Communicator> do_split(int color, int key) override;
  // MPI_Comm_create_group over the members (collective over them only).
  std::shared_ptr<Communicator> do_create_group(const std::vector<int>& members) override;
  // MPI_Allgather of detail::kSlotBytes bytes per rank (blocking on every rank).
  WorkPtr do_exchange_slots(const void* mine, void* all, std::string_view what,
                            const Tensor* shape_of) override;
  bool supports_inline() const override { return true; }

 private:
  // Runs `call` (a blocking MPI collective on comm_, returning its error code) on this thread
  // under the collective deadline (detail::DeadlineWatch), then `on_complete`; returns a
  // completed Work. Throws dtensor::Error on an MPI error.
  WorkPtr run_blocking(std::string_view name, const Tensor* shape_of,
                       const std::function<int()>& call, const std::function<void()>& on_complete);

  MPI_Comm comm_;
  bool owned_;
};

namespace detail {
// Waits for `request` with the MPI backend's polling loop (sched_yield, then sleeps growing to
// ~1 ms) and ends the job when the collective deadline passes; `what` is called to build the
// deadline message only then.
void wait_mpi_request(MPI_Request* request, const std::function<std::string()>& what);
// How many collectives this process has run in their blocking form so far (for tests).
int64_t mpi_blocking_collectives();
// Completes every MPI backend Work still in flight (results land as if waited). Called by the
// Runtime before MPI_Finalize, so that a Work waited (or dropped) after it finds nothing left to
// do in MPI. A Work that cannot complete ends the job at the collective deadline.
void complete_pending_mpi_work();
}  // namespace detail

}  // namespace dtensor
