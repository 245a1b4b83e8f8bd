// The collective-communication interface every backend (MPI, NCCL) implements.
//
// Public calls validate their tensors (contiguous, same dtype, sizes that fit, a device the
// backend serves), record the call for CommDebugMode, then hand over to the backend's do_*
// method. Every call returns a Work handle: the operation may still be running; wait() blocks
// until it is done or the collective deadline expires (see deadline.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace dtensor {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin, kProduct };
std::string_view reduce_op_name(ReduceOp op);  // "sum", "avg", "max", "min", "product"

// The kinds of collective, for CommDebugMode counts and deadline messages.
enum class CollectiveKind : uint8_t {
  kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSend, kRecv, kBarrier, kScatter
};
inline constexpr int kNumCollectiveKinds = 9;
std::string_view collective_name(CollectiveKind k);  // "all_reduce", "all_gather", ...

// Handle for an issued operation.
class Work {
 public:
  virtual ~Work() = default;
  // Non-blocking completion test.
  virtual bool is_completed() = 0;
  // Blocks until done. If the collective deadline passes first, the job is ended (this rank
  // and the others: MPI_Abort / ncclCommAbort) with a message naming the collective, the
  // communicator's description (mesh dim), its ranks and the tensor shape.
  virtual void wait() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// A Work that is already complete (local no-ops, size-1 communicators).
WorkPtr completed_work();

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // World ranks of the members, in communicator-rank order (for messages).
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // "mpi" or "nccl".
  virtual std::string_view backend() const = 0;
  // Devices this backend moves data for (MPI: CPU, and CUDA by staging; NCCL: CUDA).
  virtual bool supports(Device device) const = 0;
  // Free text naming what the communicator serves, e.g. "mesh dim 1 (tp)"; used in errors.
  const std::string& description() const { return description_; }
  void set_description(std::string d) { description_ = std::move(d); }

  // In place: every rank ends with op over all ranks' `tensor`. kAvg divides by size()
  // (integer dtypes: truncating division).
  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op);
  // Out of place: every rank's `output` ends with op over all ranks' `input`; `input` is left
  // unchanged. Same shape, dtype and device; the two must not partly overlap (the very same
  // tensor is allowed and reduces in place). Counted as one all_reduce by CommDebugMode.
  WorkPtr all_reduce(const Tensor& output, const Tensor& input, ReduceOp op);
  // output.numel() == size() * input.numel(); rank r's input lands in elements
  // [r * n, (r + 1) * n) of the (contiguous) output.
  WorkPtr all_gather(const Tensor& output, const Tensor& input);
  // input.numel() == size() * output.numel(); rank r gets op over all ranks of input block r.
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op);
  // input and output have the same numel, divisible by size(); block j of rank i's input
  // becomes block i of rank j's output.
  WorkPtr all_to_all(const Tensor& output, const Tensor& input);
  // In place: every rank ends with root's `tensor`.
  WorkPtr broadcast(const Tensor& tensor, int root);
  // Root's contiguous `input` of shape [size(), output.sizes()...] is split into size() blocks;
  // block k lands in rank k's `output` (the root keeps block root). On other ranks `input` is
  // ignored and may be undefined. Shapes are checked on the root only (a wrong shape there
  // throws before anything is sent). Counted by CommDebugMode with the bytes of `output`.
  WorkPtr scatter(const Tensor& output, const Tensor& input, int root);
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0);
  WorkPtr recv(const Tensor& tensor, int src, int tag = 0);
  WorkPtr barrier();

  // MPI_Comm_split semantics: ranks with the same color form a new communicator, ordered by
  // key. Collective over this communicator. color < 0 returns nullptr on that rank.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;

 protected:
  Communicator(int rank, int size, std::vector<int> world_ranks)
      : rank_(rank), size_(size), world_ranks_(std::move(world_ranks)) {}

  virtual WorkPtr do_all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  // Out-of-place all_reduce with validated, non-overlapping buffers. The default copies input
  // into output and reduces output in place; backends override it to skip that copy.
  virtual WorkPtr do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op);
  virtual WorkPtr do_all_gather(const Tensor& output, const Tensor& input) = 0;
  virtual WorkPtr do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) = 0;
  virtual WorkPtr do_all_to_all(const Tensor& output, const Tensor& input) = 0;
  virtual WorkPtr do_broadcast(const Tensor& tensor, int root) = 0;
  // `input` is validated on the root only (undefined or ignored elsewhere).
  virtual WorkPtr do_scatter(const Tensor& output, const Tensor& input, int root) = 0;
  virtual WorkPtr do_send(const Tensor& tensor, int dst, int tag) = 0;
  virtual WorkPtr do_recv(const Tensor& tensor, int src, int tag) = 0;
  virtual WorkPtr do_barrier() = 0;

 private:
  int rank_;
  int size_;
  std::vector<int> world_ranks_;
  std::string description_;
};

using CommunicatorPtr = std::shared_ptr<Communicator>;

}  // namespace dtensor
