#include "dtensor/collectives/communicator.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/logged_work.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/thread_token.h"

namespace dtensor {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kProduct:
      return "product";
  }
  return "?";
}

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kScatter:
      return "scatter";
  }
  return "?";
}

namespace detail {

std::string describe_communicator(const Communicator& comm) {
  return absl::StrFormat("%s (%s, rank %d of %d, world ranks [%s])",
                         comm.description().empty() ? "unnamed communicator" : comm.description(),
                         comm.backend(), comm.rank(), comm.size(),
                         absl::StrJoin(comm.world_ranks(), ", "));
}

}  // namespace detail

namespace {

class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

}  // namespace

WorkPtr completed_work() {
  static const WorkPtr work = std::make_shared<CompletedWork>();
  return work;
}

namespace {

// Checks shared by every tensor argument: defined, contiguous, on a device this backend serves.
void check_tensor(const Communicator& comm, std::string_view op, std::string_view arg,
                  const Tensor& t) {
  DT_CHECK(t.defined(), "[%s] %s is an undefined tensor (expected a defined tensor)", op, arg);
  DT_CHECK(t.is_contiguous(),
           "[%s] %s must be contiguous (got sizes %s, strides %s); call .contiguous() first", op,
           arg, shape_str(t.sizes()), shape_str(t.strides()));
  DT_CHECK(comm.supports(t.device()),
           "[%s] %s is on device %s, which the %s backend does not serve", op, arg,
           t.device().str(), comm.backend());
}

void check_pair(const Communicator& comm, std::string_view op, const Tensor& output,
                const Tensor& input) {
  check_tensor(comm, op, "output", output);
  check_tensor(comm, op, "input", input);
  DT_CHECK(output.dtype() == input.dtype(),
           "[%s] output dtype %s does not match input dtype %s (expected the same dtype)", op,
           dtype_name(output.dtype()), dtype_name(input.dtype()));
  DT_CHECK(output.device() == input.device(),
           "[%s] output is on %s but input is on %s (expected the same device)", op,
           output.device().str(), input.device().str());
}

void check_reduce_op(std::string_view op, const Tensor& t, ReduceOp rop) {
  DT_CHECK(!(t.dtype() == DType::kBool && rop == ReduceOp::kAvg),
           "[%s] reduce op avg is not defined for dtype bool (expected sum, max, min or product)",
           op);
}

void check_peer(const Communicator& comm, std::string_view op, std::string_view arg, int peer) {
  DT_CHECK(peer >= 0 && peer < comm.size(),
           "[%s] %s %d out of range for a communicator of size %d (expected 0..%d)", op, arg, peer,
           comm.size(), comm.size() - 1);
}

// all_gather's output / reduce_scatter's input: `whole` holds one block the size of `block` per
// rank.
void check_blocks(const Communicator& comm, std::string_view op, std::string_view whole_arg,
                  const Tensor& whole, std::string_view block_arg, const Tensor& block) {
  DT_CHECK(whole.numel() == comm.size() * block.numel(),
           "[%s] %s has %d elements (sizes %s), expected size() * %s.numel() = %d * %d = %d", op,
           whole_arg, whole.numel(), shape_str(whole.sizes()), block_arg, comm.size(),
           block.numel(), comm.size() * block.numel());
}

int64_t bytes_of(const Tensor& t) {
  return static_cast<int64_t>(t.nbytes());
}

}  // namespace

// ---- failures the ranks of a communicator already know ---------------------------------------

namespace {

// The error in flight on this thread and the communicators whose every rank raised it at the
// same exchange (a mismatch, a peer's failure report) or was told of it (report_failure), so
// that report_failure_in_flight does not report it there (again). The exception_ptr keeps the
// error alive, so a later error cannot take its address.
struct KnownFailure {
  std::exception_ptr error;
  std::vector<const Communicator*> comms;
};
thread_local KnownFailure t_known;

void note_known(const std::exception_ptr& error, const Communicator* comm) {
  if (t_known.error != error) {
    t_known.error = error;
    t_known.comms.clear();
  }
  t_known.comms.push_back(comm);
}

// Throws `error`, noted as known on every rank of `comm`.
[[noreturn]] void throw_known(Error error, const Communicator* comm) {
  std::exception_ptr e = std::make_exception_ptr(std::move(error));
  note_known(e, comm);
  std::rethrow_exception(e);
}

}  // namespace

// ---- the issue path shared by every public call ----------------------------------------------

// Entered by every public call before anything else: MPI must still be running and (with the
// check on) no other thread may be inside a call or hold un-waited Work on the communicator. Takes
// the call's sequence number, so a call that then fails validation on one rank only still moves
// that rank's sequence ahead and its next collective mismatches.
class Communicator::IssueScope {
 public:
  IssueScope(Communicator& comm, std::string_view op)
      : comm_(comm), op_(op), mode_(collective_check_mode()) {
    detail::check_mpi_running(op);
    // Async tasks submitted earlier on this communicator issue first (comm_worker.h: program
    // order on every rank).
    drain_async_for(comm);
    if (mode_ != CollectiveCheckMode::kOff) enter_thread();
    seq_ = ++comm.seq_;
  }
  ~IssueScope() {
    if (token_ != 0) comm_.issuing_.store(0, std::memory_order_release);
  }
  IssueScope(const IssueScope&) = delete;
  IssueScope& operator=(const IssueScope&) = delete;

  uint64_t seq() const { return seq_; }
  CollectiveCheckMode mode() const { return mode_; }
  std::string_view op() const { return op_; }
  // True the first time it is asked: run_checked wraps the issued Work for the collectives
  // log once (debug_log.h), then calls itself to issue it.
  bool take_log() { return !std::exchange(logged_, true); }

 private:
  void enter_thread() {
    const uint64_t me = detail::this_thread_token();
    uint64_t expected = 0;
    if (!comm_.issuing_.compare_exchange_strong(expected, me, std::memory_order_acquire)) {
      DT_FAIL(
          "[%s] two threads issue collectives on %s at the same time: a communicator (and the "
          "DeviceMesh dim it serves) is used by one thread at a time, or the ranks would pair "
          "one thread's collective with another's",
          op_, detail::describe_communicator(comm_));
    }
    token_ = me;
    const uint64_t owner = comm_.owner_.load(std::memory_order_relaxed);
    const int64_t pending = comm_.in_flight_.load(std::memory_order_acquire);
    if (owner != me && owner != 0 && pending > 0) {
      comm_.issuing_.store(0, std::memory_order_release);
      token_ = 0;
      DT_FAIL(
          "[%s] another thread still has %d un-waited collective%s on %s: a communicator (and the "
          "DeviceMesh dim it serves) is used by one thread at a time; wait for that thread's Work "
          "before issuing from this one",
          op_, pending, pending == 1 ? "" : "s", detail::describe_communicator(comm_));
    }
    comm_.owner_.store(me, std::memory_order_relaxed);
  }

  Communicator& comm_;
  std::string_view op_;
  bool logged_ = false;
  CollectiveCheckMode mode_;
  uint64_t token_ = 0;
  uint64_t seq_ = 0;
};

// The Work of a checked collective: the slot exchange, then (unless the collective was finished
// inline) the backend's own Work, posted after the fingerprints agree. It also counts the
// communicator's in-flight Work for the thread rule.
class Communicator::CheckedWork final : public Work {
 public:
  CheckedWork(Communicator* comm, std::shared_ptr<Communicator> keep, std::string_view op,
              std::unique_ptr<char[]> slots, WorkPtr slot_work)
      : comm_(comm),
        keep_(std::move(keep)),
        op_(op),
        slots_(std::move(slots)),
        slot_work_(std::move(slot_work)) {
    comm_->in_flight_.fetch_add(1, std::memory_order_acq_rel);
  }

  ~CheckedWork() override {
    // Like the backends' Works: a dropped handle still completes (the buffers must outlive the
    // exchange); errors are reported by wait(), not here.
    try {
      wait();
    } catch (...) {
    }
    release();
  }

  void set_inline(std::function<void(const char*)> finish) { finish_ = std::move(finish); }
  void set_data(WorkPtr data) { data_ = std::move(data); }

  // Waits for the fingerprints and compares them; throws the mismatch (on every rank).
  void verify() {
    std::lock_guard<std::mutex> lock(mu_);
    verify_locked();
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return rethrow_or(true);
    if (!verified_ && !slot_work_->is_completed()) return false;
    verify_locked();
    if (data_ && !data_->is_completed()) return false;
    complete_locked();
    return true;
  }

  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) {
      rethrow_or(true);
      return;
    }
    verify_locked();
    if (data_) data_->wait();
    complete_locked();
  }

 private:
  bool rethrow_or(bool v) {
    if (error_) std::rethrow_exception(error_);
    return v;
  }

  void verify_locked() {
    if (error_) std::rethrow_exception(error_);
    if (verified_) return;
    try {
      slot_work_->wait();
      const char* all = slots_.get() + detail::kSlotBytes;
      // A peer that failed reported it in place of this collective (report_failure).
      if (const int failed = detail::first_failure(all, comm_->size()); failed >= 0) {
        const std::string text = comm_->failure_message(all, failed, {}, op_);
        throw_known(Error(absl::StrFormat("%s (raised on rank %d; reported to this rank by its "
                                          "%s on %s)",
                                          text, comm_->world_ranks()[static_cast<size_t>(failed)],
                                          op_, detail::describe_communicator(*comm_))),
                    comm_);
      }
      const std::string mismatch = detail::compare_slots(all, *comm_);
      if (!mismatch.empty()) throw_known(Error(absl::StrFormat("[%s] %s", op_, mismatch)), comm_);
      // The fingerprints agree, so every rank has the same flags: all or none compare the
      // pieces' sizes.
      const detail::SlotHeader& mine = detail::slot_header(slots_.get(), 0);
      if (mine.flags & detail::kFlagPeers) {
        const std::string pieces = detail::compare_peer_bytes(
            all, *comm_, detail::carries_peer_table(mine, comm_->size()));
        if (!pieces.empty()) throw_known(Error(absl::StrFormat("[%s] %s", op_, pieces)), comm_);
      }
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
      release();
      throw;
    }
    verified_ = true;
  }

  void complete_locked() {
    if (finish_) {
      auto f = std::move(finish_);
      finish_ = nullptr;
      f(slots_.get() + detail::kSlotBytes);
    }
    done_ = true;
    release();
  }

  void release() {
    if (!released_) {
      released_ = true;
      comm_->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::mutex mu_;
  Communicator* comm_;
  std::shared_ptr<Communicator> keep_;  // null for communicators not owned by a shared_ptr
  std::string_view op_;
  std::unique_ptr<char[]> slots_;  // [this rank's slot | every rank's slot]
  WorkPtr slot_work_;
  WorkPtr data_;
  std::function<void(const char*)> finish_;
  std::exception_ptr error_;
  bool verified_ = false;
  bool done_ = false;
  bool released_ = false;
};

namespace {

// [this rank's slot | every rank's slot]: this rank's holds `h` plus the thread's label, zeros
// after it (the payload, if any, is copied in by the caller).
std::unique_ptr<char[]> new_slots(detail::SlotHeader h, int size) {
  if (const char* label = detail::current_collective_label()) {
    std::strncpy(h.label, label, detail::kLabelBytes - 1);
  }
  std::unique_ptr<char[]> slots(new char[(static_cast<size_t>(size) + 1) * detail::kSlotBytes]);
  std::memset(slots.get(), 0, detail::kSlotBytes);
  std::memcpy(slots.get(), &h, sizeof(h));
  return slots;
}

}  // namespace

template <typename Finish, typename IssueData>
WorkPtr Communicator::run_checked(IssueScope& scope, uint8_t kind, const Tensor* shape_of,
                                  DType dtype, int op, int root, int64_t count,
                                  const Tensor& payload, Finish&& finish_inline,
                                  IssueData&& issue_data, const detail::PeerBytes* peers) {
  // Meta tensors (no data) only travel on the fake backend, whose collectives copy_ into their
  // outputs (a no-op into meta ones): a real backend would read and write null.
  DT_CHECK(shape_of == nullptr || !shape_of->device().is_meta() || fake_backend(),
           "[%s] [meta] tensors have no data, and this is a real collective (expected the fake "
           "backend for meta tensors: DTENSOR_BACKEND=fake or init_fake_backend)",
           scope.op());
  if (log_enabled(LogTopic::kCollectives) && scope.take_log()) {
    // count < 0: a region exchange, whose size differs per rank (log this rank's input).
    const int64_t bytes = shape_of == nullptr ? 0
                          : count >= 0        ? count * static_cast<int64_t>(dtype_size(dtype))
                                              : static_cast<int64_t>(shape_of->nbytes());
    return detail::log_collective(scope.op(), bytes, *this, [&] {
      return run_checked(scope, kind, shape_of, dtype, op, root, count, payload,
                         std::forward<Finish>(finish_inline), std::forward<IssueData>(issue_data),
                         peers);
    });
  }
  if (scope.mode() == CollectiveCheckMode::kOff || size_ == 1) return issue_data();
  detail::SlotHeader h;
  h.kind = kind;
  h.dtype = shape_of != nullptr ? static_cast<uint8_t>(dtype) : detail::kNoDType;
  h.op = op < 0 ? detail::kNoReduceOp : static_cast<uint8_t>(op);
  h.root = root;
  h.count = count;
  h.seq = scope.seq();
  const bool inl = supports_inline() && detail::inline_payload_bytes(h, size_) <=
                                            static_cast<int64_t>(detail::kInlineBytes);
  if (inl) h.flags |= detail::kFlagInline;
  if (peers != nullptr) detail::set_peer_sum(h, *peers, rank_);

  std::unique_ptr<char[]> slots = new_slots(h, size_);
  if (inl && payload.defined()) detail::read_bytes(payload, slots.get() + detail::kSlotHeaderBytes);
  // The peer table names the pairs that disagree, if any.
  if (peers != nullptr && detail::carries_peer_table(h, size_)) {
    detail::write_peer_table(slots.get(), *peers);
  }
  char* all = slots.get() + detail::kSlotBytes;
  WorkPtr slot_work = do_exchange_slots(slots.get(), all, scope.op(), shape_of);
  auto work = std::make_shared<CheckedWork>(this, weak_from_this().lock(), scope.op(),
                                            std::move(slots), std::move(slot_work));
  if (inl) {
    work->set_inline(std::forward<Finish>(finish_inline));
    return work;
  }
  // Not inline: the data collective is posted only once every rank is known to post the same
  // one (MPI leaves mismatched collectives undefined; they can write past a buffer).
  work->verify();
  work->set_data(issue_data());
  return work;
}

namespace {
constexpr int kNoOp = -1;
constexpr int kNoRoot = -1;
uint8_t kind_code(CollectiveKind k) {
  return static_cast<uint8_t>(k);
}
int op_code(ReduceOp op) {
  return static_cast<int>(op);
}
}  // namespace

WorkPtr Communicator::all_reduce(const Tensor& tensor, ReduceOp op) {
  return all_reduce(tensor, tensor, op);
}

WorkPtr Communicator::all_reduce(const Tensor& output, const Tensor& input, ReduceOp op) {
  IssueScope scope(*this, "all_reduce");
  const bool same = output.defined() && input.defined() && output.data_ptr() == input.data_ptr() &&
                    output.sizes() == input.sizes() && output.dtype() == input.dtype();
  if (same) {
    check_tensor(*this, "all_reduce", "tensor", input);
  } else {
    check_pair(*this, "all_reduce", output, input);
    DT_CHECK(output.sizes() == input.sizes(),
             "[all_reduce] output has shape %s but input has shape %s (expected the same shape)",
             shape_str(output.sizes()), shape_str(input.sizes()));
    const char* po = static_cast<const char*>(output.data_ptr());
    const char* pi = static_cast<const char*>(input.data_ptr());
    DT_CHECK(output.nbytes() == 0 || !(po < pi + input.nbytes() && pi < po + output.nbytes()),
             "[all_reduce] output and input partly overlap (expected distinct buffers, or the "
             "same tensor for an in-place reduction)");
  }
  check_reduce_op("all_reduce", input, op);
  CommDebugMode::record(CollectiveKind::kAllReduce, bytes_of(input), size());
  const int n = size_;
  return run_checked(
      scope, kind_code(CollectiveKind::kAllReduce), &input, input.dtype(), op_code(op), kNoRoot,
      input.numel(), input,
      [output, op, n](const char* slots) {
        std::unique_ptr<char[]> result(new char[output.nbytes() + 1]);
        detail::reduce_payloads(slots, n, output.dtype(), op, 0, output.numel(), result.get());
        detail::write_bytes(output, 0, result.get(), output.nbytes());
      },
      [&] { return same ? do_all_reduce(output, op) : do_all_reduce_out(output, input, op); });
}

WorkPtr Communicator::do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) {
  Tensor out = output;
  out.copy_(input);
  return do_all_reduce(output, op);
}

WorkPtr Communicator::all_gather(const Tensor& output, const Tensor& input) {
  IssueScope scope(*this, "all_gather");
  check_pair(*this, "all_gather", output, input);
  check_blocks(*this, "all_gather", "output", output, "input", input);
  CommDebugMode::record(CollectiveKind::kAllGather, bytes_of(input), size());
  const int n = size_;
  return run_checked(
      scope, kind_code(CollectiveKind::kAllGather), &input, input.dtype(), kNoOp, kNoRoot,
      input.numel(), input,
      [output, n](const char* slots) {
        const size_t block = output.nbytes() / static_cast<size_t>(n);
        for (int r = 0; r < n; ++r) {
          detail::write_bytes(output, block * r, detail::slot_payload(slots, r), block);
        }
      },
      [&] { return do_all_gather(output, input); });
}

WorkPtr Communicator::all_gather_into_dim(const Tensor& output, const Tensor& input, int64_t dim,
                                          const std::vector<int64_t>& sizes) {
  IssueScope scope(*this, "all_gather");
  check_pair(*this, "all_gather", output, input);
  DT_CHECK(dim >= 0 && dim < output.dim() && static_cast<int>(sizes.size()) == size(),
           "[all_gather] dim %d of a %d-d output with %d sizes, expected a dim in [0, %d) and "
           "one size per rank (%d)",
           dim, output.dim(), sizes.size(), output.dim(), size());
  int64_t sum = 0;
  for (int64_t s : sizes) {
    DT_CHECK(s >= 0, "[all_gather] negative size %d in sizes", s);
    sum += s;
  }
  Shape mine(output.sizes().begin(), output.sizes().end());
  mine[dim] = sizes[static_cast<size_t>(rank())];
  DT_CHECK(
      sum == output.size(dim) && input.sizes() == mine,
      "[all_gather] gathering dim %d: sizes sum to %d and input is %s, expected output.size(%d)"
      " = %d and input %s",
      dim, sum, shape_str(input.sizes()), dim, output.size(dim), shape_str(mine));
  // Rank r's piece is the slab of dim `dim` after the pieces of ranks 0..r-1.
  std::vector<Shape> offsets, shapes;
  int64_t off = 0;
  for (int64_t s : sizes) {
    Shape o(output.sizes().size(), 0);
    o[dim] = off;
    Shape sh(output.sizes().begin(), output.sizes().end());
    sh[dim] = s;
    offsets.push_back(std::move(o));
    shapes.push_back(std::move(sh));
    off += s;
  }
  return gather_into_regions(scope, output, input, offsets, shapes, static_cast<int>(dim));
}

WorkPtr Communicator::all_gather_into_regions(const Tensor& output, const Tensor& input,
                                              const std::vector<Shape>& offsets,
                                              const std::vector<Shape>& shapes) {
  IssueScope scope(*this, "all_gather");
  check_pair(*this, "all_gather", output, input);
  return gather_into_regions(scope, output, input, offsets, shapes, /*root_code=*/-2);
}

namespace {

// One region (offset, shape) of `t` per rank of `comm`, each inside `t`.
void check_regions(const Communicator& comm, const char* op, const char* name, const Tensor& t,
                   const std::vector<Shape>& offsets, const std::vector<Shape>& shapes) {
  DT_CHECK(static_cast<int>(offsets.size()) == comm.size() &&
               static_cast<int>(shapes.size()) == comm.size(),
           "[%s] %d offsets and %d shapes of %s regions for a communicator of %d ranks (expected "
           "one region per rank)",
           op, offsets.size(), shapes.size(), name, comm.size());
  const size_t nd = t.sizes().size();
  for (size_t r = 0; r < shapes.size(); ++r) {
    bool inside = offsets[r].size() == nd && shapes[r].size() == nd;
    for (size_t d = 0; d < nd && inside; ++d) {
      inside =
          offsets[r][d] >= 0 && shapes[r][d] >= 0 && offsets[r][d] <= t.sizes()[d] - shapes[r][d];
    }
    DT_CHECK(inside, "[%s] %s region of rank %d (offset %s, shape %s) is not inside the %s %s", op,
             name, r, shape_str(offsets[r]), shape_str(shapes[r]), name, shape_str(t.sizes()));
  }
}

}  // namespace

WorkPtr Communicator::gather_into_regions(IssueScope& scope, const Tensor& output,
                                          const Tensor& input, const std::vector<Shape>& offsets,
                                          const std::vector<Shape>& shapes, int root_code) {
  DT_CHECK(supports_regions(output.device()),
           "[all_gather] the %s backend cannot gather into place on %s (expected a device where "
           "supports_regions())",
           backend(), output.device().str());
  check_regions(*this, "all_gather", "output", output, offsets, shapes);
  DT_CHECK(input.sizes() == shapes[static_cast<size_t>(rank())],
           "[all_gather] input is %s, expected this rank's region shape %s",
           shape_str(input.sizes()), shape_str(shapes[static_cast<size_t>(rank())]));
  CommDebugMode::record(CollectiveKind::kAllGather, bytes_of(input), size());
  detail::PeerBytes peers;
  const int64_t item = static_cast<int64_t>(output.itemsize());
  for (const Shape& sh : shapes) {
    peers.send.push_back(static_cast<int64_t>(input.nbytes()));
    peers.recv.push_back(shape_numel(sh) * item);
  }
  // The payload travels inline only when the whole output fits (count is output.numel()).
  return run_checked(
      scope, kind_code(CollectiveKind::kAllGather), &output, input.dtype(), kNoOp, root_code,
      output.numel(), input,
      [output, offsets, shapes](const char* slots) {
        // Rank r's payload is its block, contiguous: copy it run by run (a run = the block's
        // last dim) to its place in the contiguous output.
        const size_t item = output.itemsize();
        const Shape& full = output.sizes();
        const size_t nd = full.size();
        for (size_t r = 0; r < shapes.size(); ++r) {
          const Shape& sh = shapes[r];
          if (nd == 0 || shape_numel(sh) == 0) continue;
          const size_t run = static_cast<size_t>(sh[nd - 1]) * item;
          const char* src = detail::slot_payload(slots, static_cast<int>(r));
          Shape idx(nd, 0);  // odometer over the block's dims but the last
          for (int64_t k = 0, runs = shape_numel(sh) / sh[nd - 1]; k < runs; ++k) {
            int64_t at = 0;
            for (size_t d = 0; d < nd; ++d) at = at * full[d] + offsets[r][d] + idx[d];
            detail::write_bytes(output, static_cast<size_t>(at) * item, src + k * run, run);
            for (size_t d = nd - 1; d-- > 0;) {
              if (++idx[d] < sh[d]) break;
              idx[d] = 0;
            }
          }
        }
      },
      [&] { return do_all_gather_into_regions(output, input, offsets, shapes); }, &peers);
}

WorkPtr Communicator::do_all_gather_into_regions(const Tensor& output, const Tensor&,
                                                 const std::vector<Shape>&,
                                                 const std::vector<Shape>&) {
  DT_FAIL("[all_gather] the %s backend cannot gather into place on %s", backend(),
          output.device().str());
}

WorkPtr Communicator::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  IssueScope scope(*this, "reduce_scatter");
  check_pair(*this, "reduce_scatter", output, input);
  check_reduce_op("reduce_scatter", input, op);
  check_blocks(*this, "reduce_scatter", "input", input, "output", output);
  CommDebugMode::record(CollectiveKind::kReduceScatter, bytes_of(input), size());
  const int n = size_, me = rank_;
  return run_checked(
      scope, kind_code(CollectiveKind::kReduceScatter), &input, input.dtype(), op_code(op), kNoRoot,
      input.numel(), input,
      [output, op, n, me](const char* slots) {
        std::unique_ptr<char[]> result(new char[output.nbytes() + 1]);
        detail::reduce_payloads(slots, n, output.dtype(), op, me * output.numel(), output.numel(),
                                result.get());
        detail::write_bytes(output, 0, result.get(), output.nbytes());
      },
      [&] { return do_reduce_scatter(output, input, op); });
}

WorkPtr Communicator::all_to_all(const Tensor& output, const Tensor& input) {
  IssueScope scope(*this, "all_to_all");
  check_pair(*this, "all_to_all", output, input);
  DT_CHECK(output.numel() == input.numel(),
           "[all_to_all] output has %d elements but input has %d (expected the same numel)",
           output.numel(), input.numel());
  DT_CHECK(input.numel() % size() == 0,
           "[all_to_all] input has %d elements, expected a multiple of the communicator size %d",
           input.numel(), size());
  CommDebugMode::record(CollectiveKind::kAllToAll, bytes_of(input), size());
  const int n = size_, me = rank_;
  return run_checked(
      scope, kind_code(CollectiveKind::kAllToAll), &input, input.dtype(), kNoOp, kNoRoot,
      input.numel(), input,
      [output, n, me](const char* slots) {
        const size_t block = output.nbytes() / static_cast<size_t>(n);
        for (int r = 0; r < n; ++r) {
          detail::write_bytes(output, block * r, detail::slot_payload(slots, r) + block * me,
                              block);
        }
      },
      [&] { return do_all_to_all(output, input); });
}

WorkPtr Communicator::all_to_all_regions(const Tensor& output, const Tensor& input,
                                         const std::vector<Shape>& send_offsets,
                                         const std::vector<Shape>& send_shapes,
                                         const std::vector<Shape>& recv_offsets,
                                         const std::vector<Shape>& recv_shapes) {
  IssueScope scope(*this, "all_to_all");
  check_pair(*this, "all_to_all", output, input);
  DT_CHECK(supports_regions(output.device()),
           "[all_to_all] the %s backend cannot exchange regions in place on %s (expected a "
           "device where supports_regions())",
           backend(), output.device().str());
  check_regions(*this, "all_to_all", "input", input, send_offsets, send_shapes);
  check_regions(*this, "all_to_all", "output", output, recv_offsets, recv_shapes);
  CommDebugMode::record(CollectiveKind::kAllToAll, bytes_of(input), size());
  detail::PeerBytes peers;
  const int64_t item = static_cast<int64_t>(input.itemsize());
  for (size_t k = 0; k < send_shapes.size(); ++k) {
    peers.send.push_back(shape_numel(send_shapes[k]) * item);
    peers.recv.push_back(shape_numel(recv_shapes[k]) * item);
  }
  // No element count in the fingerprint (each rank moves its own amount; the peer sizes are
  // checked to pair up instead); never inline.
  return run_checked(
      scope, kind_code(CollectiveKind::kAllToAll), &input, input.dtype(), kNoOp, kNoRoot,
      /*count=*/-1, Tensor(), [](const char*) {},
      [&] {
        return do_all_to_all_regions(output, input, send_offsets, send_shapes, recv_offsets,
                                     recv_shapes);
      },
      &peers);
}

WorkPtr Communicator::do_all_to_all_regions(const Tensor& output, const Tensor&,
                                            const std::vector<Shape>&, const std::vector<Shape>&,
                                            const std::vector<Shape>&, const std::vector<Shape>&) {
  DT_FAIL("[all_to_all] the %s backend cannot exchange regions in place on %s", backend(),
          output.device().str());
}

WorkPtr Communicator::broadcast(const Tensor& tensor, int root) {
  IssueScope scope(*this, "broadcast");
  check_tensor(*this, "broadcast", "tensor", tensor);
  check_peer(*this, "broadcast", "root", root);
  CommDebugMode::record(CollectiveKind::kBroadcast, bytes_of(tensor), size());
  const bool is_root = rank_ == root;
  return run_checked(
      scope, kind_code(CollectiveKind::kBroadcast), &tensor, tensor.dtype(), kNoOp, root,
      tensor.numel(), is_root ? tensor : Tensor(),
      [tensor, root, is_root](const char* slots) {
        if (!is_root)
          detail::write_bytes(tensor, 0, detail::slot_payload(slots, root), tensor.nbytes());
      },
      [&] { return do_broadcast(tensor, root); });
}

WorkPtr Communicator::scatter(const Tensor& output, const Tensor& input, int root) {
  IssueScope scope(*this, "scatter");
  check_tensor(*this, "scatter", "output", output);
  check_peer(*this, "scatter", "root", root);
  if (rank() == root) {
    check_pair(*this, "scatter", output, input);
    Shape expected{size()};
    expected.insert(expected.end(), output.sizes().begin(), output.sizes().end());
    DT_CHECK(input.sizes() == expected,
             "[scatter] input on the root has shape %s, expected [size(), output sizes...] = %s "
             "(communicator size %d, output shape %s)",
             shape_str(input.sizes()), shape_str(expected), size(), shape_str(output.sizes()));
  }
  CommDebugMode::record(CollectiveKind::kScatter, bytes_of(output), size());
  const int me = rank_;
  return run_checked(
      scope, kind_code(CollectiveKind::kScatter), &output, output.dtype(), kNoOp, root,
      output.numel(), rank_ == root ? input : Tensor(),
      [output, root, me](const char* slots) {
        detail::write_bytes(output, 0, detail::slot_payload(slots, root) + output.nbytes() * me,
                            output.nbytes());
      },
      [&] { return do_scatter(output, input, root); });
}

// Point-to-point messages are not collectives: they are matched by (peer, tag), not by order,
// so they carry no fingerprint; MPI reports a size mismatch as an error (MPI_ERR_TRUNCATE).
namespace {
// The checks, recording and logging shared by send and recv; `issue` posts the message.
template <typename Issue>
WorkPtr point_to_point(Communicator& comm, CollectiveKind kind, const char* peer_name,
                       const Tensor& tensor, int peer, int tag, Issue&& issue) {
  const std::string_view op = collective_name(kind);
  detail::check_mpi_running(op);
  // As a collective: async tasks submitted earlier on this communicator post first; others (a
  // data-parallel reduction behind which a ring hop would otherwise wait) go on meanwhile.
  drain_async_for(comm);
  check_tensor(comm, op, "tensor", tensor);
  check_peer(comm, op, peer_name, peer);
  DT_CHECK(tag >= 0, "[%s] tag %d is negative (expected tag >= 0)", op, tag);
  CommDebugMode::record(kind, bytes_of(tensor), comm.size());
  if (log_enabled(LogTopic::kCollectives)) {
    return detail::log_collective(op, bytes_of(tensor), comm, issue);
  }
  return issue();
}
}  // namespace

WorkPtr Communicator::send(const Tensor& tensor, int dst, int tag) {
  return point_to_point(*this, CollectiveKind::kSend, "dst", tensor, dst, tag,
                        [&] { return do_send(tensor, dst, tag); });
}

WorkPtr Communicator::recv(const Tensor& tensor, int src, int tag) {
  return point_to_point(*this, CollectiveKind::kRecv, "src", tensor, src, tag,
                        [&] { return do_recv(tensor, src, tag); });
}

WorkPtr Communicator::barrier() {
  IssueScope scope(*this, "barrier");
  CommDebugMode::record(CollectiveKind::kBarrier, 0, size());
  // With the check on, the slot exchange is itself the barrier.
  return run_checked(
      scope, kind_code(CollectiveKind::kBarrier), nullptr, DType::kFloat32, kNoOp, kNoRoot, 0,
      Tensor(), [](const char*) {}, [&] { return do_barrier(); });
}

// The fingerprint exchange of split() and meet(): always made, whatever the check mode, since
// what follows blocks with no deadline of its own; a missing member ends the job at the
// deadline instead of hanging there.
void Communicator::meet_as(IssueScope& scope, uint8_t kind, const char* what) {
  if (size_ <= 1) return;
  detail::SlotHeader h;
  h.kind = kind;
  h.seq = scope.seq();
  std::unique_ptr<char[]> slots = new_slots(h, size_);
  char* mine = slots.get();
  WorkPtr exchange = do_exchange_slots(mine, mine + detail::kSlotBytes, what, nullptr);
  CheckedWork(this, nullptr, what, std::move(slots), std::move(exchange)).wait();
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  IssueScope scope(*this, "split");
  meet_as(scope, detail::kKindSplit, "split");
  return do_split(color, key);
}

void Communicator::meet() {
  IssueScope scope(*this, "meet");
  meet_as(scope, detail::kKindMeet, "meet");
}

void Communicator::report_failure(std::string_view message) {
  if (size_ <= 1 || collective_check_mode() == CollectiveCheckMode::kOff) return;
  IssueScope scope(*this, "failure report");
  std::string text(message.substr(0, detail::kMaxFailureBytes));
  if (message.size() > detail::kMaxFailureBytes) text.replace(text.size() - 3, 3, "...");
  detail::SlotHeader h;
  h.kind = detail::kKindFailure;
  h.seq = scope.seq();
  h.count = static_cast<int64_t>(text.size());
  std::unique_ptr<char[]> slots = new_slots(h, size_);
  std::memcpy(slots.get() + detail::kSlotHeaderBytes, text.data(),
              std::min(text.size(), detail::kInlineBytes));
  char* all = slots.get() + detail::kSlotBytes;
  // Named so in a deadline message: a peer that never comes ends the job with the cause.
  const std::string what = "failure report: " + text;
  do_exchange_slots(slots.get(), all, what, nullptr)->wait();
  failure_message(all, detail::first_failure(all, size_), text, what);
}

std::string Communicator::failure_message(const char* all, int failed, std::string_view mine,
                                          std::string_view what) {
  // The reporter's collective took a sequence number, or did not (it failed outside any
  // collective); everyone continues from the largest.
  seq_ = std::max(seq_, detail::max_seq(all, size_));
  int64_t longest = 0;
  for (int r = 0; r < size_; ++r) {
    const detail::SlotHeader& h = detail::slot_header(all, r);
    if (h.magic == detail::kSlotMagic && h.kind == detail::kKindFailure) {
      longest = std::max(longest, std::min<int64_t>(h.count, detail::kMaxFailureBytes));
    }
  }
  const auto chunk = static_cast<int64_t>(detail::kInlineBytes);
  const int64_t length =
      std::clamp<int64_t>(detail::slot_header(all, failed).count, 0, detail::kMaxFailureBytes);
  std::string text(detail::slot_payload(all, failed), std::min(length, chunk));
  // The rest of the longest message, kInlineBytes per exchange (every rank read the same
  // lengths, so all make the same number of exchanges).
  std::unique_ptr<char[]> more;
  for (int64_t at = chunk; at < longest; at += chunk) {
    if (more == nullptr)
      more.reset(new char[(static_cast<size_t>(size_) + 1) * detail::kSlotBytes]);
    std::memset(more.get(), 0, detail::kSlotBytes);
    if (at < static_cast<int64_t>(mine.size())) {
      std::memcpy(more.get() + detail::kSlotHeaderBytes, mine.data() + at,
                  static_cast<size_t>(std::min<int64_t>(chunk, mine.size() - at)));
    }
    char* got = more.get() + detail::kSlotBytes;
    do_exchange_slots(more.get(), got, what, nullptr)->wait();
    if (at < length) text.append(detail::slot_payload(got, failed), std::min(chunk, length - at));
  }
  return text;
}

void report_failure_in_flight(absl::Span<Communicator* const> comms, std::string_view op) noexcept {
  const std::exception_ptr error = std::current_exception();
  if (!error) return;
  if (t_known.error != error) {
    t_known.error = error;
    t_known.comms.clear();
  }
  std::string message;
  for (Communicator* comm : comms) {
    if (comm == nullptr || comm->size() <= 1) continue;
    if (std::find(t_known.comms.begin(), t_known.comms.end(), comm) != t_known.comms.end())
      continue;
    t_known.comms.push_back(comm);
    try {
      if (message.empty()) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
          message = "unknown exception";
        }
        const std::string prefix = "[" + std::string(op) + "]";
        if (!op.empty() && message.rfind(prefix, 0) != 0) message = prefix + " " + message;
      }
      comm->report_failure(message);
    } catch (...) {
      // Not reported (MPI finalized, another thread's Work): the peers are not told here.
    }
  }
}

std::shared_ptr<Communicator> Communicator::create_group(const std::vector<int>& members) {
  detail::check_mpi_running("create_group");
  DT_CHECK(!members.empty(), "[create_group] no members given (expected at least one rank of %s)",
           detail::describe_communicator(*this));
  std::vector<bool> seen(static_cast<size_t>(size_), false);
  bool mine = false;
  for (int m : members) {
    DT_CHECK(m >= 0 && m < size_ && !seen[static_cast<size_t>(m)],
             "[create_group] member %d is out of range or repeated (expected distinct ranks in "
             "[0, %d) of %s)",
             m, size_, detail::describe_communicator(*this));
    seen[static_cast<size_t>(m)] = true;
    mine = mine || m == rank_;
  }
  DT_CHECK(mine, "[create_group] this rank (%d) is not among the members (only members call it)",
           rank_);
  return do_create_group(members);
}

std::shared_ptr<Communicator> Communicator::do_create_group(const std::vector<int>& /*members*/) {
  DT_FAIL("[create_group] the %s backend cannot create a group communicator", backend());
}

}  // namespace dtensor
