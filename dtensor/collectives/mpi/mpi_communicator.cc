#include "dtensor/collectives/mpi/mpi_communicator.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <exception>
#include <mutex>
#include <thread>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/cuda_support.h"
#include "dtensor/collectives/deadline.h"
#include "dtensor/collectives/mpi/mpi_check.h"
#include "dtensor/collectives/mpi/mpi_types.h"
#include "dtensor/collectives/mpi/rank_ordered_reduce.h"
#include "dtensor/config.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace detail {

void wait_mpi_request(MPI_Request* request, const std::function<std::string()>& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto timeout = std::chrono::duration<double>(collective_timeout());
  // Open MPI advances a nonblocking collective only inside MPI calls, so every pause between
  // two MPI_Test calls stalls the whole collective (a sleeping peer holds up each ring step).
  // Poll continuously, yielding the core between polls (cheap when nothing else is runnable;
  // it lets oversubscribed ranks, e.g. 8 on 2 cores, share them). Only a wait that is already
  // long (a slow or missing peer) backs off with short sleeps to stop burning a core.
  constexpr auto kSpinPhase = std::chrono::milliseconds(200);
  constexpr auto kMaxSleep = std::chrono::microseconds(100);
  auto sleep = std::chrono::microseconds(5);
  for (;;) {
    int flag = 0;
    DT_CHECK_MPI(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
    if (flag) return;
    const auto waited = Clock::now() - start;
    if (waited > timeout) end_job_on_deadline(what());
    if (waited < kSpinPhase) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

}  // namespace detail

namespace {

int comm_rank(MPI_Comm comm) {
  int r = 0;
  DT_CHECK_MPI(MPI_Comm_rank(comm, &r));
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  DT_CHECK_MPI(MPI_Comm_size(comm, &s));
  return s;
}

std::vector<int> comm_world_ranks(MPI_Comm comm) {
  const int n = comm_size(comm);
  MPI_Group group, world_group;
  DT_CHECK_MPI(MPI_Comm_group(comm, &group));
  DT_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  std::vector<int> ranks(static_cast<size_t>(n)), world(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
  DT_CHECK_MPI(MPI_Group_translate_ranks(group, n, ranks.data(), world_group, world.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  return world;
}

int checked_count(int64_t count, CollectiveKind kind) {
  DT_CHECK(count <= INT_MAX,
           "[%s] %d elements exceed the MPI count limit %d of the mpi backend (expected at most "
           "%d elements per message)",
           collective_name(kind), count, INT_MAX, INT_MAX);
  return static_cast<int>(count);
}

// CPU tensors are used directly; CUDA tensors get a pinned host copy.
Tensor stage_in(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  Tensor host = detail::pinned_empty_like(t);
  host.copy_(t);
  return host;
}

Tensor stage_out(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  return detail::pinned_empty_like(t);
}

// Copies a staged result back to the tensor it stands for: a CUDA tensor, or one whose values
// travelled in a wider dtype (nothing when the result was received in place).
void unstage(const Tensor& dst, const Tensor& staged) {
  if (dst.data_ptr() == staged.data_ptr() && dst.dtype() == staged.dtype()) return;
  Tensor d = dst;
  d.copy_(staged);
}

// float16/bfloat16 sums, averages and products travel as float32: MPI applies a user-defined
// 16-bit op pairwise, rounding (and overflowing to inf) after every step, where the
// single-device sum accumulates in float and rounds once. E.g. the fp16 average of 4 ranks
// holding 30000 is 30000, but the pairwise fp16 sum overflows. Costs twice the bytes.
bool widen_to_float(DType d, ReduceOp op) {
  return is_reduced_float(d) && op != ReduceOp::kMax && op != ReduceOp::kMin;
}

// Completes a reduction whose result sits in `staged` (dst itself for CPU tensors): kAvg turns
// the sum into the average, then the result is copied back to dst when it was staged.
void finish_reduction(const Tensor& dst, const Tensor& staged, ReduceOp op, int world) {
  if (op == ReduceOp::kAvg) {
    detail::divide_in_place(staged.data_ptr(), staged.dtype(), staged.numel(), world);
  }
  unstage(dst, staged);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// The send buffer of a collective whose output may overlap its input. A CPU input that overlaps
// the output is copied first (MPI forbids aliased send/receive buffers); a CUDA input is staged
// into fresh pinned memory anyway, which never overlaps.
Tensor send_buffer(const Tensor& input, const Tensor& output) {
  if (input.device().is_cpu() && overlaps(input, output)) return input.clone();
  return stage_in(input);
}

class MpiWork;

// Every MpiWork still in flight, so that the Runtime can complete them before MPI_Finalize
// (complete_pending_mpi_work). An intrusive list: O(1) to join and leave under one mutex.
struct PendingList {
  std::mutex mu;
  MpiWork* head = nullptr;
};
PendingList& pending_list() {
  static PendingList* p = new PendingList();  // never destroyed: Works may outlive statics
  return *p;
}

// Operations that failed with an MPI error: their requests and buffers are kept for the rest of
// the process, since MPI may not be done with the buffers.
struct Abandoned {
  MPI_Request request;
  std::function<void()> keep;
};

std::atomic<int64_t> g_blocking_collectives{0};  // detail::mpi_blocking_collectives()

class MpiWork final : public Work {
 public:
  MpiWork(const Communicator* comm, std::shared_ptr<const Communicator> keep_comm,
          std::string_view name, const Tensor* shape_of, MPI_Request request,
          std::function<void()> on_complete)
      : comm_(comm),
        keep_comm_(std::move(keep_comm)),
        name_(name),
        has_tensor_(shape_of != nullptr),
        request_(request),
        on_complete_(std::move(on_complete)) {
    if (shape_of != nullptr) {
      shape_ = shape_of->sizes();
      dtype_ = shape_of->dtype();
    }
    link();
  }

  ~MpiWork() override {
    // The buffers must outlive the request: a Work dropped without wait() still waits.
    try {
      wait();
    } catch (...) {
    }
    unlink();
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      int flag = 0;
      test_locked(&flag);
      if (flag) finish();
    }
    return done_;
  }

  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);  // it failed before: never a success
    if (done_) return;
    check_not_finalized();
    try {
      detail::wait_mpi_request(&request_, [this] { return deadline_message(); });
    } catch (...) {
      // An MPI error (e.g. MPI_ERR_TRUNCATE): never test the request again.
      give_up_locked(std::current_exception());
      throw;
    }
    finish();
  }

  MpiWork* next_ = nullptr;
  MpiWork* prev_ = nullptr;

 private:
  void test_locked(int* flag) {
    check_not_finalized();
    const int rc = MPI_Test(&request_, flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      try {
        detail::throw_mpi_error(rc, "MPI_Test", __FILE__, __LINE__);
      } catch (...) {
        give_up_locked(std::current_exception());
        throw;
      }
    }
  }

  // Done without completing: the request and the buffers it may still write are leaked. `error`
  // is rethrown by every later wait(), so a Work that failed where another thread tested it (a
  // progress thread, p2p_progress.h) is not waited as a success.
  void give_up_locked(std::exception_ptr error) {
    new Abandoned{request_, std::move(on_complete_)};  // deliberately leaked (see Abandoned)
    on_complete_ = nullptr;
    error_ = std::move(error);
    done_ = true;
    unlink();
  }

  // MPI_Finalize completed every pending Work (complete_pending_mpi_work), so a Work that is
  // still pending here was created after it, which the Communicator refuses: defensive.
  void check_not_finalized() const {
    int finalized = 0;
    MPI_Finalized(&finalized);
    DT_CHECK(!finalized,
             "[%s] the Work is still in flight but MPI is finalized (the dtensor::Runtime was "
             "destroyed); wait for Work before the Runtime ends",
             name_);
  }

  void finish() {
    done_ = true;
    unlink();
    if (on_complete_) {
      auto f = std::move(on_complete_);
      on_complete_ = nullptr;
      f();
    }
  }

  void link() {
    PendingList& l = pending_list();
    std::lock_guard<std::mutex> lock(l.mu);
    next_ = l.head;
    if (l.head != nullptr) l.head->prev_ = this;
    l.head = this;
    linked_ = true;
  }

  void unlink() {
    if (!linked_) return;
    PendingList& l = pending_list();
    std::lock_guard<std::mutex> lock(l.mu);
    if (prev_ != nullptr) prev_->next_ = next_;
    if (next_ != nullptr) next_->prev_ = prev_;
    if (l.head == this) l.head = next_;
    prev_ = next_ = nullptr;
    linked_ = false;
  }

  std::string deadline_message() const {
    std::string tensor = has_tensor_
                             ? absl::StrFormat("%s %s", shape_str(shape_), dtype_name(dtype_))
                             : std::string("(no tensor)");
    return detail::collective_deadline_message(name_, detail::describe_communicator(*comm_), tensor,
                                               "Ending the job.");
  }

  std::mutex mu_;
  const Communicator* comm_;
  std::shared_ptr<const Communicator> keep_comm_;
  std::string_view name_;  // a static string: the collective's name
  bool has_tensor_;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  MPI_Request request_;
  std::function<void()> on_complete_;
  std::exception_ptr error_;  // the MPI error that made it give up
  bool done_ = false;
  bool linked_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned)
    : Communicator(comm_rank(comm), comm_size(comm), comm_world_ranks(comm)),
      comm_(comm),
      owned_(owned) {
  // Errors come back as return codes (DT_CHECK_MPI turns them into dtensor::Error) instead of
  // aborting the job.
  if (owned_) DT_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

bool MpiCommunicator::supports(Device device) const {
  return device.is_cpu() || (device.is_cuda() && DTENSOR_HAVE_CUDA);
}

#define DT_MPI_WORK(kind, shape_of, request, on_complete)                                   \
  std::make_shared<MpiWork>(this, weak_from_this().lock(), collective_name(kind), shape_of, \
                            request, on_complete)
WorkPtr MpiCommunicator::run_blocking(std::string_view name, const Tensor* shape_of,
                                      const std::function<int()>& call,
                                      const std::function<void()>& on_complete) {
  int rc = MPI_SUCCESS;
  {
    // Called on the watchdog thread only if the deadline passes, while this thread is still
    // inside `call` (so `shape_of` is alive).
    detail::DeadlineWatch watch([this, name, shape_of] {
      const std::string tensor = shape_of != nullptr
                                     ? absl::StrFormat("%s %s", shape_str(shape_of->sizes()),
                                                       dtype_name(shape_of->dtype()))
                                     : std::string("(no tensor)");
      return detail::collective_deadline_message(name, detail::describe_communicator(*this), tensor,
                                                 "Ending the job.");
    });
    rc = call();
  }
  g_blocking_collectives.fetch_add(1, std::memory_order_relaxed);
  if (rc != MPI_SUCCESS) detail::throw_mpi_error(rc, std::string(name).c_str(), __FILE__, __LINE__);
  if (on_complete) on_complete();
  return completed_work();
}

// A collective run in its blocking form now (run_blocking): `call` returns the MPI error code.
#define DT_MPI_BLOCKING(kind, shape_of, call, on_complete) \
  run_blocking(collective_name(kind), shape_of, call, on_complete)

WorkPtr MpiCommunicator::do_all_reduce(const Tensor& tensor, ReduceOp op) {
  return do_all_reduce_out(tensor, tensor, op);
}

WorkPtr MpiCommunicator::do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) {
  if (input.numel() == 0) return completed_work();
  const int n = checked_count(input.numel(), CollectiveKind::kAllReduce);
  // Always reduced in place (MPI_IN_PLACE): Open MPI's in-place MPI_Allreduce is 10-25% faster
  // than its out-of-place form from 256 KB on (4 ranks on this project's 2-core machine),
  // more than the one copy of the input into the output costs.
  Tensor out;
  if (widen_to_float(input.dtype(), op)) {
    out = stage_in(input).to(DType::kFloat32);
  } else if (output.data_ptr() == input.data_ptr() || !output.device().is_cpu()) {
    out = stage_in(input);  // CUDA: a pinned copy of the input, copied back by finish_reduction
  } else {
    out = output;
    out.copy_(input);
  }
  void* data = out.data_ptr();
  const MPI_Datatype type = detail::mpi_datatype(out.dtype());
  const MPI_Op mop = detail::mpi_reduce_op(out.dtype(), op);
  const MPI_Comm c = comm_;
  const int world = size();
  // Floating sums over 3+ ranks: the same association at every message size
  // (rank_ordered_reduce.h), so a bucket reduces each gradient to the bits it gets alone.
  if (detail::rank_ordered(out.dtype(), op, world)) {
    const DType dtype = out.dtype();
    return DT_MPI_BLOCKING(
        CollectiveKind::kAllReduce, &input,
        ([=] { return detail::rank_ordered_all_reduce(data, n, dtype, op, c); }),
        ([output, out, op, world] { finish_reduction(output, out, op, world); }));
  }
  return DT_MPI_BLOCKING(CollectiveKind::kAllReduce, &input,
                         ([=] { return MPI_Allreduce(MPI_IN_PLACE, data, n, type, mop, c); }),
                         ([output, out, op, world] { finish_reduction(output, out, op, world); }));
}

WorkPtr MpiCommunicator::do_all_gather(const Tensor& output, const Tensor& input) {
  if (output.numel() == 0) return completed_work();
  const int n = checked_count(input.numel(), CollectiveKind::kAllGather);
  checked_count(output.numel(), CollectiveKind::kAllGather);
  const MPI_Datatype type = detail::mpi_datatype(input.dtype());
  Tensor out = stage_out(output);
  Tensor in;
  const void* send = nullptr;
  const char* own_block =
      static_cast<const char*>(output.data_ptr()) + static_cast<size_t>(rank()) * input.nbytes();
  if (output.device().is_cpu() && input.data_ptr() == own_block) {
    send = MPI_IN_PLACE;  // input already sits in this rank's block of the output
  } else {
    in = send_buffer(input, output);
    send = in.data_ptr();
  }
  // The one collective posted in its nonblocking form (and polled by wait()): Open MPI's
  // MPI_Iallgather beats its MPI_Allgather at every size measured, by up to 1.4x at 4-16 MB on
  // 4 ranks (docs/PERFORMANCE.md, Redistribute: S(0)->R's "raw MPI" and "raw nonblocking"
  // columns). The choice depends on the kind only, so every rank makes the same one.
  MPI_Request req;
  DT_CHECK_MPI(MPI_Iallgather(send, n, type, out.data_ptr(), n, type, comm_, &req));
  return DT_MPI_WORK(CollectiveKind::kAllGather, &input, req,
                     ([output, out, in] { unstage(output, out); }));
}

namespace {

// The MPI_Alltoallw arguments of a region exchange: per peer a count, a byte displacement and
// a type, on both sides. A region that is one contiguous run of its tensor (starting within
// 2 GiB) travels as `count` elements of the base type from its byte offset (MPI's contiguous
// fast path, no type to build); any other region is a committed subarray type, freed with
// this object once the (blocking) call is over.
class RegionArgs {
 public:
  RegionArgs(size_t n, MPI_Datatype base) : base_(base) {
    for (Side* s : {&send_, &recv_}) {
      s->counts.assign(n, 0);
      s->displs.assign(n, 0);
      s->types.assign(n, base);
    }
  }
  ~RegionArgs() {
    for (MPI_Datatype t : owned_) MPI_Type_free(&t);
  }
  RegionArgs(const RegionArgs&) = delete;
  RegionArgs& operator=(const RegionArgs&) = delete;

  // Peer r's region of `t` (contiguous, shape `full`) on the send or receive side.
  void set(bool send, size_t r, IntSpan full, IntSpan offset, IntSpan shape, size_t item,
           CollectiveKind kind) {
    Side& side = send ? send_ : recv_;
    const int64_t numel = shape_numel(shape);
    if (numel == 0) return;  // count 0
    const size_t nd = full.size();
    // Contiguous when every dim after the first one cut to more than one index is whole.
    size_t j = 0;
    while (j < nd && shape[j] == 1) ++j;
    bool contiguous = true;
    for (size_t d = j + 1; d < nd; ++d) contiguous = contiguous && shape[d] == full[d];
    int64_t at = 0;
    for (size_t d = 0; d < nd; ++d) at = at * full[d] + offset[d];
    const int64_t byte = at * static_cast<int64_t>(item);
    // MPI_Alltoallw's counts and byte displacements are ints: a region past them (a tensor of
    // more than 2 GiB) is described by a subarray type instead, whose extent MPI keeps as an
    // MPI_Aint. Every rank decides for its own regions; both forms match element by element.
    if (contiguous && numel <= INT_MAX && byte <= INT_MAX) {
      side.counts[r] = static_cast<int>(numel);
      side.displs[r] = static_cast<int>(byte);
      return;
    }
    std::vector<int> f(nd), sub(nd), start(nd);
    for (size_t d = 0; d < nd; ++d) {
      f[d] = checked_count(full[d], kind);
      sub[d] = checked_count(shape[d], kind);
      start[d] = checked_count(offset[d], kind);
    }
    MPI_Datatype t;
    DT_CHECK_MPI(MPI_Type_create_subarray(static_cast<int>(nd), f.data(), sub.data(), start.data(),
                                          MPI_ORDER_C, base_, &t));
    owned_.push_back(t);  // freed with this object, committed or not
    DT_CHECK_MPI(MPI_Type_commit(&t));
    side.types[r] = t;
    side.counts[r] = 1;
  }

  // Every rank sends its whole contiguous input (`numel` elements) to every peer.
  void send_whole(int64_t numel, CollectiveKind kind) {
    send_.counts.assign(send_.counts.size(), checked_count(numel, kind));
  }

  // The exchange from `in` into `out` (blocking, like the other collectives: run_blocking).
  int call(const void* in, void* out, MPI_Comm comm) const {
    return MPI_Alltoallw(in, send_.counts.data(), send_.displs.data(), send_.types.data(), out,
                         recv_.counts.data(), recv_.displs.data(), recv_.types.data(), comm);
  }

 private:
  struct Side {
    std::vector<int> counts, displs;
    std::vector<MPI_Datatype> types;
  };
  MPI_Datatype base_;
  Side send_, recv_;
  std::vector<MPI_Datatype> owned_;
};

}  // namespace

namespace {
std::atomic<bool> g_regions_enabled{true};
}  // namespace

void MpiCommunicator::set_regions_enabled(bool on) {
  g_regions_enabled.store(on, std::memory_order_relaxed);
}

bool MpiCommunicator::regions_enabled() {
  return g_regions_enabled.load(std::memory_order_relaxed);
}

int MpiCommunicator::tag_upper_bound() const {
  void* value = nullptr;
  int found = 0;
  // Read on MPI_COMM_WORLD: the standard attaches MPI_TAG_UB there (the value holds for every
  // communicator), and Open MPI reports it absent on communicators made by a split, as every
  // mesh dim's is (open-mpi/ompi#11970), which would fall back to the standard's minimum.
  DT_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found));
  return found != 0 && value != nullptr ? *static_cast<int*>(value) : 32767;
}

bool MpiCommunicator::supports_regions(Device device) const {
  return device.is_cpu() && regions_enabled();
}

WorkPtr MpiCommunicator::do_all_gather_into_regions(const Tensor& output, const Tensor& input,
                                                    const std::vector<Shape>& offsets,
                                                    const std::vector<Shape>& shapes) {
  if (output.numel() == 0) return completed_work();
  constexpr CollectiveKind kKind = CollectiveKind::kAllGather;
  Tensor in = send_buffer(input, output);
  // Each source rank's region is its own datatype, which MPI_Allgatherv cannot express (one
  // receive type); MPI_Alltoallw takes a type and a byte displacement per rank. It also sends
  // each piece once, straight from the contiguous input to its place on every peer, where an
  // allgather ring with a strided type would pack and unpack every piece at each of its n - 1
  // steps (measured no faster with even pieces: bench_gather_into_dim).
  RegionArgs a(shapes.size(), detail::mpi_datatype(output.dtype()));
  a.send_whole(input.numel(), kKind);
  for (size_t r = 0; r < shapes.size(); ++r) {
    a.set(/*send=*/false, r, output.sizes(), offsets[r], shapes[r], output.itemsize(), kKind);
  }
  return run_blocking(
      collective_name(kKind), &input,
      [&] { return a.call(in.data_ptr(), output.data_ptr(), comm_); }, nullptr);
}

WorkPtr MpiCommunicator::do_all_to_all_regions(const Tensor& output, const Tensor& input,
                                               const std::vector<Shape>& send_offsets,
                                               const std::vector<Shape>& send_shapes,
                                               const std::vector<Shape>& recv_offsets,
                                               const std::vector<Shape>& recv_shapes) {
  // Posted even when this rank moves nothing: the call is collective, and peers may not be
  // empty.
  constexpr CollectiveKind kKind = CollectiveKind::kAllToAll;
  Tensor in = send_buffer(input, output);
  RegionArgs a(send_shapes.size(), detail::mpi_datatype(output.dtype()));
  for (size_t r = 0; r < send_shapes.size(); ++r) {
    a.set(/*send=*/true, r, input.sizes(), send_offsets[r], send_shapes[r], input.itemsize(),
          kKind);
    a.set(/*send=*/false, r, output.sizes(), recv_offsets[r], recv_shapes[r], output.itemsize(),
          kKind);
  }
  return run_blocking(
      collective_name(kKind), &input,
      [&] { return a.call(in.data_ptr(), output.data_ptr(), comm_); }, nullptr);
}

WorkPtr MpiCommunicator::do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  if (input.numel() == 0) return completed_work();
  const int n = checked_count(output.numel(), CollectiveKind::kReduceScatter);
  checked_count(input.numel(), CollectiveKind::kReduceScatter);
  const bool wide = widen_to_float(input.dtype(), op);
  Tensor out = wide ? empty(output.sizes(), TensorOptions(DType::kFloat32)) : stage_out(output);
  Tensor in = wide ? stage_in(input).to(DType::kFloat32) : send_buffer(input, output);
  const void* send = in.data_ptr();
  void* recv = out.data_ptr();
  const MPI_Datatype type = detail::mpi_datatype(in.dtype());
  const MPI_Op mop = detail::mpi_reduce_op(in.dtype(), op);
  const MPI_Comm c = comm_;
  const int world = size();
  const DType dtype = in.dtype();
  const bool ordered = detail::rank_ordered(dtype, op, world);  // as all-reduce's
  return DT_MPI_BLOCKING(
      CollectiveKind::kReduceScatter, &input, ([=] {
        return ordered ? detail::rank_ordered_reduce_scatter(send, recv, n, dtype, op, c)
                       : MPI_Reduce_scatter_block(send, recv, n, type, mop, c);
      }),
      ([output, out, in, op, world] { finish_reduction(output, out, op, world); }));
}

WorkPtr MpiCommunicator::do_all_to_all(const Tensor& output, const Tensor& input) {
  if (input.numel() == 0) return completed_work();
  const int block = checked_count(input.numel() / size(), CollectiveKind::kAllToAll);
  const MPI_Datatype type = detail::mpi_datatype(input.dtype());
  Tensor out = stage_out(output);
  Tensor in = send_buffer(input, output);
  const void* send = in.data_ptr();
  void* recv = out.data_ptr();
  const MPI_Comm c = comm_;
  return DT_MPI_BLOCKING(CollectiveKind::kAllToAll, &input,
                         ([=] { return MPI_Alltoall(send, block, type, recv, block, type, c); }),
                         ([output, out, in] { unstage(output, out); }));
}

WorkPtr MpiCommunicator::do_broadcast(const Tensor& tensor, int root) {
  if (tensor.numel() == 0) return completed_work();
  const int n = checked_count(tensor.numel(), CollectiveKind::kBroadcast);
  Tensor buf = rank() == root ? stage_in(tensor) : stage_out(tensor);
  void* data = buf.data_ptr();
  const MPI_Datatype type = detail::mpi_datatype(tensor.dtype());
  const MPI_Comm c = comm_;
  const bool is_root = rank() == root;
  return DT_MPI_BLOCKING(CollectiveKind::kBroadcast, &tensor,
                         ([=] { return MPI_Bcast(data, n, type, root, c); }),
                         ([tensor, buf, is_root] {
                           if (!is_root) unstage(tensor, buf);
                         }));
}

WorkPtr MpiCommunicator::do_scatter(const Tensor& output, const Tensor& input, int root) {
  if (output.numel() == 0) return completed_work();
  const int n = checked_count(output.numel(), CollectiveKind::kScatter);
  const MPI_Datatype type = detail::mpi_datatype(output.dtype());
  const bool is_root = rank() == root;
  Tensor out = stage_out(output);
  Tensor in = is_root ? send_buffer(input, output) : Tensor();
  const void* send = is_root ? in.data_ptr() : nullptr;
  void* recv = out.data_ptr();
  const MPI_Comm c = comm_;
  return DT_MPI_BLOCKING(CollectiveKind::kScatter, &output,
                         ([=] { return MPI_Scatter(send, n, type, recv, n, type, root, c); }),
                         ([output, out, in] { unstage(output, out); }));
}

WorkPtr MpiCommunicator::do_send(const Tensor& tensor, int dst, int tag) {
  if (tensor.numel() == 0) return completed_work();
  const int n = checked_count(tensor.numel(), CollectiveKind::kSend);
  Tensor buf = stage_in(tensor);
  MPI_Request req;
  DT_CHECK_MPI(
      MPI_Isend(buf.data_ptr(), n, detail::mpi_datatype(tensor.dtype()), dst, tag, comm_, &req));
  return DT_MPI_WORK(CollectiveKind::kSend, &tensor, req, ([buf] {}));
}

WorkPtr MpiCommunicator::do_recv(const Tensor& tensor, int src, int tag) {
  if (tensor.numel() == 0) return completed_work();
  const int n = checked_count(tensor.numel(), CollectiveKind::kRecv);
  Tensor buf = stage_out(tensor);
  MPI_Request req;
  DT_CHECK_MPI(
      MPI_Irecv(buf.data_ptr(), n, detail::mpi_datatype(tensor.dtype()), src, tag, comm_, &req));
  return DT_MPI_WORK(CollectiveKind::kRecv, &tensor, req,
                     ([tensor, buf] { unstage(tensor, buf); }));
}

WorkPtr MpiCommunicator::do_barrier() {
  const MPI_Comm c = comm_;
  return DT_MPI_BLOCKING(CollectiveKind::kBarrier, nullptr, ([c] { return MPI_Barrier(c); }),
                         nullptr);
}

WorkPtr MpiCommunicator::do_exchange_slots(const void* mine, void* all, std::string_view what,
                                           const Tensor* shape_of) {
  // Blocking on every rank, whatever the fingerprint says (ranks that disagree, what the check
  // is for, must still pair up: every exchange has the same form and size). A collective that
  // travels inline is then complete at issue too.
  constexpr int kBytes = static_cast<int>(detail::kSlotBytes);
  const MPI_Comm c = comm_;
  return run_blocking(
      what, shape_of,
      [=] { return MPI_Allgather(mine, kBytes, MPI_BYTE, all, kBytes, MPI_BYTE, c); }, nullptr);
}

#undef DT_MPI_WORK
#undef DT_MPI_BLOCKING

std::shared_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  MPI_Comm child = MPI_COMM_NULL;
  DT_CHECK_MPI(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child));
  if (child == MPI_COMM_NULL) return nullptr;
  auto result = std::make_shared<MpiCommunicator>(child, /*owned=*/true);
  result->set_description(absl::StrFormat(
      "%s/color %d", description().empty() ? std::string("unnamed") : description(), color));
  return result;
}

std::shared_ptr<Communicator> MpiCommunicator::do_create_group(const std::vector<int>& members) {
  MPI_Group parent = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  DT_CHECK_MPI(MPI_Comm_group(comm_, &parent));
  const int err = MPI_Group_incl(parent, static_cast<int>(members.size()), members.data(), &group);
  MPI_Group_free(&parent);
  DT_CHECK_MPI(err);
  MPI_Comm child = MPI_COMM_NULL;
  // A fixed tag: groups are created one at a time per communicator (the thread rule).
  constexpr int kCreateGroupTag = 0x6474;
  const int err2 = MPI_Comm_create_group(comm_, group, kCreateGroupTag, &child);
  MPI_Group_free(&group);
  DT_CHECK_MPI(err2);
  DT_CHECK(child != MPI_COMM_NULL, "[create_group] MPI_Comm_create_group returned no communicator");
  auto result = std::make_shared<MpiCommunicator>(child, /*owned=*/true);
  result->set_description(absl::StrFormat(
      "%s/group of %d", description().empty() ? std::string("unnamed") : description(),
      members.size()));
  return result;
}

namespace detail {

int64_t mpi_blocking_collectives() {
  return g_blocking_collectives.load(std::memory_order_relaxed);
}

void complete_pending_mpi_work() {
  PendingList& l = pending_list();
  for (;;) {
    // Take a reference to one pending Work (it may be waited and destroyed concurrently only
    // by a program that races MPI_Finalize, which is not supported).
    MpiWork* w = nullptr;
    {
      std::lock_guard<std::mutex> lock(l.mu);
      w = l.head;
    }
    if (w == nullptr) return;
    try {
      w->wait();  // unlinks it, also when it fails with an MPI error
    } catch (...) {
    }
  }
}

}  // namespace detail

}  // namespace dtensor
