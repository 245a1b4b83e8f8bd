// The collective-communication interface every backend (MPI, NCCL) implements.
//
// Public calls validate their tensors (contiguous, same dtype, sizes that fit, a device the
// backend serves), record the call for CommDebugMode, check that every rank issues the same
// collective (below), then hand over to the backend's do_* method. Every call returns a Work
// handle: the operation may still be running (NCCL; MPI point-to-point), or already be done
// (the MPI backend runs collectives in their blocking form at issue); wait() blocks until it
// is done, and no wait lasts past the collective deadline (see deadline.h): the job is ended.
// Ranks must issue collectives in the same order on each communicator, and, since a backend
// may complete a collective at issue, in the same relative order across communicators (a rank
// issuing on A then B while another issues on B then A waits until the deadline).
//
// Consistency check. Ranks must issue the same collectives, in the same order, with the same
// kind, dtype, element count, reduce op and root, on each communicator. Each collective carries
// a fingerprint of exactly these (plus the communicator's sequence number, counted from its
// creation, and the thread's CollectiveLabel) that the ranks compare BEFORE any data moves, so
// a divergence raises dtensor::Error on every rank of the communicator, naming both sides, e.g.
//   "[all_gather] collective mismatch on mesh dim 0 (x) (...): rank 1 issued all_reduce(sum,
//    float32, 16 elements) #12 where rank 0 issued all_gather(float32, 16 elements) #12 ..."
// instead of pairing different collectives (which returns garbage, aborts inside MPI or, with
// Open MPI's CMA single-copy transport or NCCL, can write past a buffer). A call that throws a
// validation error still takes a sequence number, so a rank that failed alone is caught at its
// next collective. The collectives whose pieces differ in size by rank (the region exchanges,
// all_gather_into_dim) also check that what each rank sends a peer is what that peer expects
// ("ranks disagree on the sizes of the pieces ...", collective_check.h PeerBytes; sizes only:
// a piece's elements land in its region in row-major order, whatever the region's shape).
// After a mismatch nothing was exchanged but the fingerprints: the communicator stays usable.
//
// Cost: the fingerprints travel in one allgather of a 256-byte block per rank. A collective
// whose whole payload fits in the rest of the block (192 bytes: an all_reduce of up to 48
// float32, a barrier, ...) is computed from that exchange and needs nothing more (it is then
// usually faster than the plain MPI call); a larger one waits for the exchange, then runs its
// own (one extra small round trip). The check cannot overlap the exchange with the data
// collective: a mismatched data collective may already have corrupted memory by the time the
// fingerprints disagree. docs/RELIABILITY.md has the measured cost. Environment variable
// DTENSOR_CHECK_COLLECTIVES (read at first use; set_collective_check_mode overrides it; every
// rank must use the same value, which is verified when the world communicator is created):
// unset, empty or "1": the check; "0": no check (divergent ranks are not detected). One-rank
// communicators have nothing to compare. The NCCL backend exchanges the fingerprints over its
// MPI twin (host memory), then enqueues its kernel; it has no inline path.
//
// Threads. A communicator is used by one thread at a time: a thread may issue on it only when no
// other thread is issuing on it and no other thread's collectives on it are still un-waited.
// (Different communicators may be used by different threads concurrently.) With the check on, a
// violation raises dtensor::Error "[op] ... two threads ..." on the rank that sees it, instead of
// pairing one thread's collective with another's on the peer. Two threads that take turns
// without overlapping are not detected; their order must then be the same on every rank.
#pragma once

#include <absl/types/span.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/tensor/tensor.h"

namespace dtensor {

namespace detail {
struct PeerBytes;  // dtensor/collectives/collective_check.h
}  // namespace detail

// Reduction of all_reduce / reduce_scatter and of Partial placements (kProduct: collectives only).
enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin, kProduct };
std::string_view reduce_op_name(ReduceOp op);  // "sum", "avg", "max", "min", "product"

// The kinds of collective, for CommDebugMode counts and deadline messages.
enum class CollectiveKind : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kScatter
};
// Number of CollectiveKind values.
inline constexpr int kNumCollectiveKinds = 9;
std::string_view collective_name(CollectiveKind k);  // "all_reduce", "all_gather", ...

// DTENSOR_CHECK_COLLECTIVES (see the top of this file): kOff "0", kOn unset, empty or "1".
enum class CollectiveCheckMode : uint8_t { kOff, kOn };
// The mode in force; reads the environment at first use and throws dtensor::Error
// "[collective check] DTENSOR_CHECK_COLLECTIVES='x' ..." for another value.
CollectiveCheckMode collective_check_mode();
// Overrides the mode for every communicator. Every rank must call it at the same point of the
// program (between collectives); not itself checked.
void set_collective_check_mode(CollectiveCheckMode mode);

// Names the collectives this thread issues while the label is alive (innermost wins), in
// consistency-check messages: "... all_gather(int64, 12 elements) #3 (DeviceMesh)". The label
// (at most 23 characters are kept) is part of the fingerprint: the same collective issued under
// different labels on two ranks is a mismatch. `label` must outlive the scope.
class CollectiveLabel {
 public:
  // Labels this thread's collectives with `label` until the guard goes.
  explicit CollectiveLabel(const char* label);
  ~CollectiveLabel();
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;

 private:
  const char* prev_;
};

// Handle for an issued operation.
class Work {
 public:
  virtual ~Work() = default;
  // Non-blocking completion test.
  virtual bool is_completed() = 0;
  // Blocks until done. If the collective deadline passes first, the job is ended (this rank
  // and the others: MPI_Abort / ncclCommAbort) with a message naming the collective, the
  // communicator's description (mesh dim), its ranks and the tensor shape (on MPI, a
  // collective's deadline runs out inside the issuing call).
  virtual void wait() = 0;
};
// Works are shared handles.
using WorkPtr = std::shared_ptr<Work>;

// A Work that is already complete (local no-ops, size-1 communicators).
WorkPtr completed_work();

// A group of ranks that issue collectives together (one per mesh dim); the public calls
// validate, record (CommDebugMode, DTENSOR_LOG) and check consistency, then call the backend's
// do_* hooks. See the top of this file.
class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  virtual ~Communicator() = default;

  // This process's rank in the communicator, and the number of ranks.
  int rank() const { return rank_; }
  int size() const { return size_; }
  // World ranks of the members, in communicator-rank order (for messages).
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // "mpi" or "nccl".
  virtual std::string_view backend() const = 0;
  // Devices this backend moves data for (MPI: CPU, and CUDA by staging; NCCL: CUDA).
  virtual bool supports(Device device) const = 0;
  // Whether operations must be issued in the same order on every rank across all of this
  // backend's communicators, not only per communicator; then a call waits for every earlier
  // async task (comm_worker.h), not only those using this communicator. NCCL: kernels of
  // different communicators may wait on each other on the device ("Using multiple NCCL
  // communicators concurrently" in NCCL's guide). MPI matches each communicator on its own.
  virtual bool orders_across_communicators() const { return false; }
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
  // Gathers along dim `dim` straight into place: rank r's contiguous `input` (output's shape
  // with dim `dim` = sizes[r]) lands in output.narrow(dim, sizes[0] + ... + sizes[r-1],
  // sizes[r]) of the contiguous `output`, with no staging buffer and no copy afterwards (the
  // MPI backend describes a strided destination with a derived datatype). `sizes` (one per
  // rank, uneven and zero allowed) must be the same on every rank and sum to output.size(dim).
  // Only on devices where supports_regions(); elsewhere callers gather into a buffer
  // and copy. Checked as an all_gather of output.numel() elements whose root field is `dim`.
  // Counted as one all_gather by CommDebugMode, with the bytes of `input`.
  WorkPtr all_gather_into_dim(const Tensor& output, const Tensor& input, int64_t dim,
                              const std::vector<int64_t>& sizes);
  // The general form: rank r's contiguous `input` (shape shapes[r]) lands in the region of the
  // contiguous `output` that starts at offsets[r] (per dim) with shape shapes[r]: e.g. the
  // blocks of a tensor sharded over two dims of a flattened mesh. One offset and one shape per
  // rank, the same on every rank, each region inside `output`; regions must not overlap (then
  // which piece wins is unspecified) and need not cover it (the rest is left as it was).
  // Same devices, checking and counting as all_gather_into_dim (whose root field here is -2).
  WorkPtr all_gather_into_regions(const Tensor& output, const Tensor& input,
                                  const std::vector<Shape>& offsets,
                                  const std::vector<Shape>& shapes);
  // Whether all_gather_into_dim / all_gather_into_regions / all_to_all_regions can move
  // strided regions straight into and out of place on `device` (MPI on CPU memory: derived
  // datatypes). Callers rely on it being the same on every rank of a communicator (a backend
  // property; MpiCommunicator::set_regions_enabled must keep it so).
  virtual bool supports_regions(Device /*device*/) const { return false; }
  // input.numel() == size() * output.numel(); rank r gets op over all ranks of input block r.
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op);
  // input and output have the same numel, divisible by size(); block j of rank i's input
  // becomes block i of rank j's output.
  WorkPtr all_to_all(const Tensor& output, const Tensor& input);
  // The exchange by regions, with no staging buffer on either side: region k of this rank's
  // contiguous `input` (send_offsets[k], send_shapes[k]) goes to rank k, and rank k's region
  // for this rank lands in region k of the contiguous `output` (recv_offsets[k],
  // recv_shapes[k]); pieces are matched element by element in row-major order, so rank i's
  // send_shapes[k] must hold as many elements as rank k's recv_shapes[i]. Regions may be
  // empty, sizes may differ from rank to rank (uneven blocks need no padding), and neither side
  // need be covered (the rest of `output` is left as it was). Receive regions must not
  // overlap. Only on devices where supports_regions(); elsewhere callers pack into blocks and
  // use all_to_all. Checked as an all_to_all without an element count (the sizes differ by
  // design: count field -1, never inline); counted as one all_to_all by CommDebugMode with the
  // bytes of `input`.
  WorkPtr all_to_all_regions(const Tensor& output, const Tensor& input,
                             const std::vector<Shape>& send_offsets,
                             const std::vector<Shape>& send_shapes,
                             const std::vector<Shape>& recv_offsets,
                             const std::vector<Shape>& recv_shapes);
  // In place: every rank ends with root's `tensor`.
  WorkPtr broadcast(const Tensor& tensor, int root);
  // Root's contiguous `input` of shape [size(), output.sizes()...] is split into size() blocks;
  // block k lands in rank k's `output` (the root keeps block root). On other ranks `input` is
  // ignored and may be undefined. Shapes are checked on the root only (a wrong shape there
  // throws before anything is sent). Counted by CommDebugMode with the bytes of `output`.
  WorkPtr scatter(const Tensor& output, const Tensor& input, int root);
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0);
  WorkPtr recv(const Tensor& tensor, int src, int tag = 0);
  // The largest tag send and recv accept: MPI_TAG_UB on MPI; 32767, the least the MPI standard
  // guarantees, on backends that do not say.
  virtual int tag_upper_bound() const { return 32767; }
  WorkPtr barrier();

  // MPI_Comm_split semantics: ranks with the same color form a new communicator, ordered by
  // key. Collective over this communicator. color < 0 returns nullptr on that rank. Always
  // checked (whatever the mode): every member must be splitting at this point, and a missing
  // one ends the job at the collective deadline instead of hanging in MPI_Comm_split.
  std::shared_ptr<Communicator> split(int color, int key);
  // Meets every other rank of this communicator: returns once all have called it, and ends the
  // job at the collective deadline when one does not come (a fingerprint exchange, like the one
  // split() does; not a collective for CommDebugMode). For guarding a blocking call that has
  // no deadline of its own, such as create_group.
  void meet();
  // A new communicator of `members` (ranks of this communicator, at least one, no repeats), in
  // that order, created by those ranks alone: the others do not call it (MPI_Comm_create_group;
  // the NCCL backend creates the MPI twin that way and bootstraps NCCL over it). Every member
  // passes the same list. Blocking, with no deadline of its own: callers first make sure the
  // members are all there (DeviceMesh meet()s on the lines of the dims it flattens). Throws
  // "[create_group] ..." for a list that does not name this rank or is malformed.
  std::shared_ptr<Communicator> create_group(const std::vector<int>& members);

  // Tells the other ranks of this communicator that this rank failed with `message` (DESIGN.md
  // item 10: ranks fail together), e.g. an allocation or a local kernel that failed on this
  // rank only. One exchange of the consistency check's block, which pairs with whatever
  // collective each other rank issues next here (or with its own report): that collective
  // raises dtensor::Error "<message> (raised on rank R; reported to this rank by its all_gather
  // on mesh dim 0 (x) ...)" on it, before any data moves, instead of waiting for this rank
  // until the deadline or pairing with another collective. When several ranks report at once,
  // the lowest one's message is raised; messages longer than 1024 bytes are cut. The ranks'
  // sequence numbers are realigned: the communicator stays usable. Returns once every rank has
  // come (the caller then raises its own error); a rank that never issues another collective
  // here makes the deadline end the job, with `message` in the deadline message. Nothing
  // happens on a one-rank communicator or with the check off (DTENSOR_CHECK_COLLECTIVES=0).
  // Throws what a collective call throws (MPI finalized, another thread's un-waited Work).
  void report_failure(std::string_view message);

  // Internal (consistency check, NCCL backend): allgather of one detail::kSlotBytes block per
  // rank, `mine` -> `all` (size() blocks, rank order), unchecked. `what` and `shape_of` (may be
  // null) name the collective in a deadline message.
  WorkPtr exchange_slots(const void* mine, void* all, std::string_view what,
                         const Tensor* shape_of) {
    return do_exchange_slots(mine, all, what, shape_of);
  }

 protected:
  // A backend's communicator: this rank, the size and the members' world ranks.
  Communicator(int rank, int size, std::vector<int> world_ranks)
      : rank_(rank), size_(size), world_ranks_(std::move(world_ranks)) {}

  // Backend hooks, called after validation: each posts one operation and returns its Work.
  virtual WorkPtr do_all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  // Out-of-place all_reduce with validated, non-overlapping buffers. The default copies input
  // into output and reduces output in place; backends override it to skip that copy.
  virtual WorkPtr do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op);
  virtual WorkPtr do_all_gather(const Tensor& output, const Tensor& input) = 0;
  // Only called where supports_regions() (regions validated); the default throws.
  virtual WorkPtr do_all_gather_into_regions(const Tensor& output, const Tensor& input,
                                             const std::vector<Shape>& offsets,
                                             const std::vector<Shape>& shapes);
  virtual WorkPtr do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) = 0;
  virtual WorkPtr do_all_to_all(const Tensor& output, const Tensor& input) = 0;
  // Only called where supports_regions() (regions validated); the default throws.
  virtual WorkPtr do_all_to_all_regions(const Tensor& output, const Tensor& input,
                                        const std::vector<Shape>& send_offsets,
                                        const std::vector<Shape>& send_shapes,
                                        const std::vector<Shape>& recv_offsets,
                                        const std::vector<Shape>& recv_shapes);
  virtual WorkPtr do_broadcast(const Tensor& tensor, int root) = 0;
  // `input` is validated on the root only (undefined or ignored elsewhere).
  virtual WorkPtr do_scatter(const Tensor& output, const Tensor& input, int root) = 0;
  virtual WorkPtr do_send(const Tensor& tensor, int dst, int tag) = 0;
  virtual WorkPtr do_recv(const Tensor& tensor, int src, int tag) = 0;
  virtual WorkPtr do_barrier() = 0;
  // The split itself; the members have already met (split() exchanged fingerprints).
  virtual std::shared_ptr<Communicator> do_split(int color, int key) = 0;
  // The group creation itself (members validated); the default throws (a backend without it).
  virtual std::shared_ptr<Communicator> do_create_group(const std::vector<int>& members);
  virtual WorkPtr do_exchange_slots(const void* mine, void* all, std::string_view what,
                                    const Tensor* shape_of) = 0;
  // Whether small collectives may be finished from the slots (host memory): MPI yes, NCCL no.
  // The same on every rank of a communicator.
  virtual bool supports_inline() const { return false; }

 private:
  class IssueScope;
  class CheckedWork;
  friend class CheckedWork;
  // Runs one checked collective: `payload` is what would travel inline (undefined: nothing),
  // `finish_inline` computes the outputs from the slots, `issue_data` posts the backend's own
  // collective; `peers`, for pieces whose sizes differ by rank, what this rank sends to and
  // expects from each peer (checked to pair up across the ranks). Defined in communicator.cc
  // (its only user).
  template <typename Finish, typename IssueData>
  WorkPtr run_checked(IssueScope& scope, uint8_t kind, const Tensor* shape_of, DType dtype, int op,
                      int root, int64_t count, const Tensor& payload, Finish&& finish_inline,
                      IssueData&& issue_data, const detail::PeerBytes* peers = nullptr);
  // The fingerprint exchange of split() and meet() (defined in communicator.cc).
  void meet_as(IssueScope& scope, uint8_t kind, const char* what);
  // After an exchange whose slots `all` hold a failure report (lowest reporting rank
  // `failed`): realigns the sequence number, runs the extra exchanges that carry the rest of
  // the longest message (this rank sends the rest of `mine`, empty unless it reports too) and
  // returns the message of `failed`.
  std::string failure_message(const char* all, int failed, std::string_view mine,
                              std::string_view what);
  // all_gather_into_regions inside the caller's scope (all_gather_into_dim is one).
  WorkPtr gather_into_regions(IssueScope& scope, const Tensor& output, const Tensor& input,
                              const std::vector<Shape>& offsets, const std::vector<Shape>& shapes,
                              int root_code);
  int rank_;
  int size_;
  std::vector<int> world_ranks_;
  std::string description_;
  // Consistency check and thread rule state.
  uint64_t seq_ = 0;                   // public collective calls so far
  std::atomic<uint64_t> issuing_{0};   // token of the thread inside a call, 0 when none
  std::atomic<uint64_t> owner_{0};     // token of the thread that issued last
  std::atomic<int64_t> in_flight_{0};  // checked Works not yet completed
};

// Communicators are shared (meshes hold one per dim).
using CommunicatorPtr = std::shared_ptr<Communicator>;

namespace detail {
// "mesh dim 1 (tp) (mpi, rank 1 of 2, world ranks [0, 1])"
std::string describe_communicator(const Communicator& comm);
}  // namespace detail

// For a catch block: reports the exception in flight (Communicator::report_failure; its what(),
// with "[op] " put in front unless it starts so) on each communicator of `comms` whose ranks do
// not know it yet: not on one where it was raised by the consistency check (a mismatch, or a
// peer's failure report: every rank of that communicator raised it at the same exchange), nor
// twice on one. A rank that learned of a failure from a peer so passes it on to its other
// communicators. Never throws (a report that cannot be made is skipped). Called by DTensor
// dispatch (every op, backward ops included), redistribute and the autograd engine with the
// communicators of their mesh; see docs/RELIABILITY.md.
void report_failure_in_flight(absl::Span<Communicator* const> comms, std::string_view op) noexcept;

}  // namespace dtensor
