#include "dtensor/collectives/nccl/nccl_communicator.h"

#include <absl/strings/str_format.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "dtensor/collectives/deadline.h"
#include "dtensor/collectives/mpi/mpi_check.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/collectives/nccl/nan_minmax.h"
#include "dtensor/collectives/nccl/nccl_backend.h"
#include "dtensor/collectives/nccl/nccl_check.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stream_cuda.h"

// ncclBfloat16 and ncclAvg need 2.10, nonblocking communicators (config.blocking) 2.14 and
// ncclCommSplit 2.18.
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "dtensor's NCCL backend needs NCCL >= 2.18 (ncclCommSplit, nonblocking communicators)"
#endif

namespace dtensor {

namespace detail {

[[noreturn]] void throw_nccl_error(ncclResult_t rc, const char* call, const char* file, int line) {
  throw_error(absl::StrFormat("[nccl] %s failed: %s (%s) at %s:%d", call, ncclGetErrorString(rc),
                              ncclGetLastError(nullptr), file, line));
}

bool nccl_compiled() {
  return true;
}

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

// Backoff shared by the polling loops: yield first, then sleep up to ~1 ms.
class Backoff {
 public:
  void pause() {
    if (polls_++ < 64) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
    }
  }

 private:
  int polls_ = 0;
  std::chrono::microseconds sleep_{10};
};

// Polls a nonblocking communicator until its pending operation (init, split, enqueue) is
// done. An error throws; an expired deadline aborts the communicator and ends the job.
void wait_nccl_ready(ncclComm_t comm, const std::function<std::string()>& what) {
  const auto start = Clock::now();
  const auto timeout = std::chrono::duration<double>(collective_timeout());
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    DT_CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    DT_CHECK(state == ncclInProgress, "[nccl] %s: communicator error %s (%s)", what(),
             ncclGetErrorString(state), ncclGetLastError(comm));
    if (Clock::now() - start > timeout) {
      ncclCommAbort(comm);
      detail::end_job_on_deadline(absl::StrFormat(
          "%s: collective deadline exceeded after %g s (DTENSOR_COLLECTIVE_TIMEOUT); aborted the "
          "NCCL communicator, ending the job",
          what(), collective_timeout()));
    }
    backoff.pause();
  }
}

ncclDataType_t nccl_datatype(DType d) {
  switch (d) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kBool:
      return ncclUint8;
  }
  DT_FAIL("[nccl] unknown dtype %d", static_cast<int>(d));
}

// bool travels as uint8 holding 0/1: max is logical or, min is logical and. ncclAvg is valid for
// every NCCL type: integers sum (wrapping) then divide truncating toward zero, as the MPI
// backend's divide_in_place; floating types scale each input by 1/size() before summing, which
// can differ from sum / size() in the last bit when size() is not a power of two.
ncclRedOp_t nccl_op(DType d, ReduceOp op) {
  if (d == DType::kBool) {
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? ncclMin : ncclMax;
  }
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProduct:
      return ncclProd;
  }
  return ncclSum;
}

bool takes_keys(DType d, ReduceOp op) {
  return detail::minmax_needs_keys(d, op == ReduceOp::kMax || op == ReduceOp::kMin);
}

TensorOptions keys_options(const Tensor& like) {
  return TensorOptions(detail::minmax_key_dtype(like.dtype()), like.device());
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// The send buffer of all_gather / reduce_scatter: `input`, or a copy of it where it overlaps
// `output` other than in place, i.e. other than with `block` (the per-rank side) sitting
// exactly at rank's block of `whole` (the other side).
Tensor unaliased_input(const Tensor& input, const Tensor& output, const Tensor& block,
                       const Tensor& whole, int rank) {
  const char* own_block =
      static_cast<const char*>(whole.data_ptr()) + static_cast<size_t>(rank) * block.nbytes();
  return (block.data_ptr() != own_block && overlaps(input, output)) ? input.clone() : input;
}

class NcclWork final : public Work {
 public:
  // `captured`: issued while the compute stream was captured into a CUDA graph (a compiled
  // step's CompileOptions::cuda_graph): nothing ran, and the graph orders the later work after
  // it (the compute stream's wait on `done` is a dependency of the graph), so there is nothing
  // to wait for on the host (querying a captured event is not allowed).
  NcclWork(std::shared_ptr<const Communicator> comm, ncclComm_t nccl, cudaEvent_t done,
           CollectiveKind kind, const Tensor* shape_of, std::vector<Tensor> keep_alive,
           bool captured)
      : done_(captured),
        comm_(std::move(comm)),
        nccl_(nccl),
        done_event_(done),
        kind_(kind),
        keep_alive_(std::move(keep_alive)) {
    if (shape_of != nullptr) {
      has_tensor_ = true;
      shape_ = shape_of->sizes();
      dtype_ = shape_of->dtype();
    }
  }

  ~NcclWork() override {
    try {
      wait();
    } catch (...) {
    }
    cudaEventDestroy(done_event_);
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return poll_locked();
  }

  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto start = Clock::now();
    const auto timeout = std::chrono::duration<double>(collective_timeout());
    Backoff backoff;
    while (!poll_locked()) {
      if (Clock::now() - start > timeout) {
        ncclCommAbort(nccl_);
        detail::end_job_on_deadline(deadline_message());
      }
      backoff.pause();
    }
  }

 private:
  bool poll_locked() {
    if (done_) return true;
    ncclResult_t state = ncclSuccess;
    DT_CHECK_NCCL(ncclCommGetAsyncError(nccl_, &state));
    DT_CHECK(state == ncclSuccess || state == ncclInProgress,
             "[%s] NCCL reported an asynchronous error on %s: %s (%s)", collective_name(kind_),
             detail::describe_communicator(*comm_), ncclGetErrorString(state),
             ncclGetLastError(nccl_));
    cudaError_t q = cudaEventQuery(done_event_);
    if (q == cudaErrorNotReady) return false;
    DT_CHECK_CUDA(q);
    done_ = true;
    keep_alive_.clear();
    return true;
  }

  std::string deadline_message() const {
    std::string tensor = has_tensor_
                             ? absl::StrFormat("%s %s", shape_str(shape_), dtype_name(dtype_))
                             : std::string("(no tensor)");
    return detail::collective_deadline_message(
        collective_name(kind_), detail::describe_communicator(*comm_), tensor,
        "Aborting the NCCL communicator and ending the job.");
  }

  bool done_ = false;
  std::mutex mu_;
  std::shared_ptr<const Communicator> comm_;
  ncclComm_t nccl_;
  cudaEvent_t done_event_;
  CollectiveKind kind_;
  bool has_tensor_ = false;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  std::vector<Tensor> keep_alive_;
};

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

NcclCommunicator::NcclCommunicator(ncclComm_t comm, CommunicatorPtr mpi, int device)
    : Communicator(mpi->rank(), mpi->size(), mpi->world_ranks()),
      comm_(comm),
      mpi_(std::move(mpi)),
      device_(device) {
  set_description(mpi_->description());
  cuda::DeviceGuard guard(device_);
  DT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DT_CHECK_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

NcclCommunicator::~NcclCommunicator() {
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (comm_ != nullptr) {
    // Nonblocking communicators may need polling after finalize; the result is not checked
    // because destructors must not throw. Finalize waits for the peers, so a dead peer would
    // hang it: past the collective deadline the communicator is aborted instead.
    bool quiescent = true;
    if (ncclCommFinalize(comm_) == ncclInProgress) {
      const auto start = Clock::now();
      const auto timeout = std::chrono::duration<double>(collective_timeout());
      Backoff backoff;
      ncclResult_t state = ncclInProgress;
      while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress) {
        if (Clock::now() - start > timeout) {
          quiescent = false;
          break;
        }
        backoff.pause();
      }
      quiescent = quiescent && state == ncclSuccess;
    }
    if (quiescent) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
}

bool NcclCommunicator::supports(Device device) const {
  return device.is_cuda() && device.index == device_;
}

template <typename Enqueue>
WorkPtr NcclCommunicator::launch(CollectiveKind kind, const Tensor* shape_of,
                                 std::vector<Tensor> keep_alive, Enqueue&& enqueue) {
  cuda::DeviceGuard guard(device_);
  const cudaStream_t compute = cuda::current_stream();
  // compute stream -> NCCL stream: the collective starts after the kernels that produce its
  // inputs. (cudaStreamWaitEvent captures the event's state now, so one event is reused.)
  DT_CHECK_CUDA(cudaEventRecord(ready_, compute));
  DT_CHECK_CUDA(cudaStreamWaitEvent(stream_, ready_, 0));
  enqueue();
  wait_nccl_ready(comm_, [&] {
    return absl::StrFormat("[%s] enqueue on %s", collective_name(kind),
                           detail::describe_communicator(*this));
  });
  // NCCL stream -> compute stream: later kernels see the results, and memory freed on the
  // compute stream (cudaFreeAsync) is reused only after the collective has finished with it.
  cudaEvent_t done = nullptr;
  DT_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  if (cudaError_t e = cudaEventRecord(done, stream_); e != cudaSuccess) {
    cudaEventDestroy(done);
    DT_CHECK_CUDA(e);
  }
  if (cudaError_t e = cudaStreamWaitEvent(compute, done, 0); e != cudaSuccess) {
    cudaEventDestroy(done);
    DT_CHECK_CUDA(e);
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(compute, &capture); e != cudaSuccess) {
    cudaEventDestroy(done);
    DT_CHECK_CUDA(e);
  }
  return std::make_shared<NcclWork>(shared_from_this(), comm_, done, kind, shape_of,
                                    std::move(keep_alive),
                                    capture == cudaStreamCaptureStatusActive);
}

// Floating max / min travel as integer keys so that a NaN on any rank survives (NCCL's fmax
// drops it; nan_minmax.h). All on the NCCL stream: keys, the integer reduction, values back.
WorkPtr NcclCommunicator::keyed_all_reduce(const Tensor& output, const Tensor& input, ReduceOp op) {
  const Tensor keys = empty(input.sizes(), keys_options(input));
  return launch(CollectiveKind::kAllReduce, &input, {output, input, keys}, [&] {
    detail::minmax_to_keys(input.data_ptr(), keys.data_ptr(), input.numel(), input.dtype(),
                           op == ReduceOp::kMax, stream_);
    DT_CHECK_NCCL(ncclAllReduce(keys.data_ptr(), keys.data_ptr(), static_cast<size_t>(keys.numel()),
                                nccl_datatype(keys.dtype()), nccl_op(keys.dtype(), op), comm_,
                                stream_));
    detail::minmax_from_keys(keys.data_ptr(), output.data_ptr(), output.numel(), output.dtype(),
                             stream_);
  });
}

WorkPtr NcclCommunicator::do_all_reduce(const Tensor& tensor, ReduceOp op) {
  if (tensor.numel() == 0) return completed_work();
  if (takes_keys(tensor.dtype(), op)) return keyed_all_reduce(tensor, tensor, op);
  return launch(CollectiveKind::kAllReduce, &tensor, {tensor}, [&] {
    DT_CHECK_NCCL(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(),
                                static_cast<size_t>(tensor.numel()), nccl_datatype(tensor.dtype()),
                                nccl_op(tensor.dtype(), op), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_all_reduce_out(const Tensor& output, const Tensor& input,
                                            ReduceOp op) {
  if (input.numel() == 0) return completed_work();
  if (takes_keys(input.dtype(), op)) return keyed_all_reduce(output, input, op);
  return launch(CollectiveKind::kAllReduce, &input, {output, input}, [&] {
    DT_CHECK_NCCL(ncclAllReduce(input.data_ptr(), output.data_ptr(),
                                static_cast<size_t>(input.numel()), nccl_datatype(input.dtype()),
                                nccl_op(input.dtype(), op), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_all_gather(const Tensor& output, const Tensor& input) {
  if (output.numel() == 0) return completed_work();
  const Tensor in = unaliased_input(input, output, /*block=*/input, /*whole=*/output, rank());
  return launch(CollectiveKind::kAllGather, &input, {output, in}, [&] {
    DT_CHECK_NCCL(ncclAllGather(in.data_ptr(), output.data_ptr(), static_cast<size_t>(in.numel()),
                                nccl_datatype(in.dtype()), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_reduce_scatter(const Tensor& output, const Tensor& input,
                                            ReduceOp op) {
  if (input.numel() == 0) return completed_work();
  const Tensor in = unaliased_input(input, output, /*block=*/output, /*whole=*/input, rank());
  if (takes_keys(in.dtype(), op)) {
    // Keys in, keys out (nan_minmax.h); the input's keys are a new buffer, so no overlap.
    const Tensor in_keys = empty(in.sizes(), keys_options(in));
    const Tensor out_keys = empty(output.sizes(), keys_options(in));
    return launch(CollectiveKind::kReduceScatter, &input, {output, in, in_keys, out_keys}, [&] {
      detail::minmax_to_keys(in.data_ptr(), in_keys.data_ptr(), in.numel(), in.dtype(),
                             op == ReduceOp::kMax, stream_);
      DT_CHECK_NCCL(ncclReduceScatter(
          in_keys.data_ptr(), out_keys.data_ptr(), static_cast<size_t>(output.numel()),
          nccl_datatype(out_keys.dtype()), nccl_op(out_keys.dtype(), op), comm_, stream_));
      detail::minmax_from_keys(out_keys.data_ptr(), output.data_ptr(), output.numel(),
                               output.dtype(), stream_);
    });
  }
  return launch(CollectiveKind::kReduceScatter, &input, {output, in}, [&] {
    DT_CHECK_NCCL(ncclReduceScatter(in.data_ptr(), output.data_ptr(),
                                    static_cast<size_t>(output.numel()), nccl_datatype(in.dtype()),
                                    nccl_op(in.dtype(), op), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_all_to_all(const Tensor& output, const Tensor& input) {
  if (input.numel() == 0) return completed_work();
  Tensor in = overlaps(input, output) ? input.clone() : input;
  const size_t block = static_cast<size_t>(in.numel() / size());
  const size_t block_bytes = block * in.itemsize();
  return launch(CollectiveKind::kAllToAll, &input, {output, in}, [&] {
    const ncclDataType_t type = nccl_datatype(in.dtype());
    char* src = static_cast<char*>(in.data_ptr());
    char* dst = static_cast<char*>(output.data_ptr());
    DT_CHECK_NCCL(ncclGroupStart());
    for (int peer = 0; peer < size(); ++peer) {
      DT_CHECK_NCCL(ncclSend(src + peer * block_bytes, block, type, peer, comm_, stream_));
      DT_CHECK_NCCL(ncclRecv(dst + peer * block_bytes, block, type, peer, comm_, stream_));
    }
    DT_CHECK_NCCL(ncclGroupEnd());
  });
}

WorkPtr NcclCommunicator::do_broadcast(const Tensor& tensor, int root) {
  if (tensor.numel() == 0) return completed_work();
  return launch(CollectiveKind::kBroadcast, &tensor, {tensor}, [&] {
    DT_CHECK_NCCL(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(),
                                static_cast<size_t>(tensor.numel()), nccl_datatype(tensor.dtype()),
                                root, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_scatter(const Tensor& output, const Tensor& input, int root) {
  if (output.numel() == 0) return completed_work();
  const bool is_root = rank() == root;
  Tensor in = is_root && overlaps(input, output) ? input.clone() : input;
  std::vector<Tensor> keep_alive = {output};
  if (is_root) keep_alive.push_back(in);
  const size_t count = static_cast<size_t>(output.numel());
  const size_t block_bytes = output.nbytes();
  return launch(CollectiveKind::kScatter, &output, std::move(keep_alive), [&] {
    const ncclDataType_t type = nccl_datatype(output.dtype());
    const char* src = is_root ? static_cast<const char*>(in.data_ptr()) : nullptr;
    if (is_root) {
      DT_CHECK_CUDA(cudaMemcpyAsync(output.data_ptr(), src + root * block_bytes, block_bytes,
                                    cudaMemcpyDeviceToDevice, stream_));
    }
    DT_CHECK_NCCL(ncclGroupStart());
    if (is_root) {
      for (int peer = 0; peer < size(); ++peer) {
        if (peer == root) continue;
        DT_CHECK_NCCL(ncclSend(src + peer * block_bytes, count, type, peer, comm_, stream_));
      }
    } else {
      DT_CHECK_NCCL(ncclRecv(output.data_ptr(), count, type, root, comm_, stream_));
    }
    DT_CHECK_NCCL(ncclGroupEnd());
  });
}

class NcclCommunicator::SelfWork final : public Work {
 public:
  explicit SelfWork(std::string what) : what_(std::move(what)) {}
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
    return copy_ != nullptr && copy_->is_completed();
  }
  void wait() override {
    WorkPtr copy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_) std::rethrow_exception(error_);
      DT_CHECK(copy_ != nullptr,
               "%s: waited on before the matching self %s was posted (it could never complete)",
               what_, what_.find("[send]") == 0 ? "recv" : "send");
      copy = copy_;
    }
    copy->wait();
  }
  // The matching side was posted: `copy` (its device-to-device copy), or the error that the
  // pairing raised on that side, which this side's wait() raises too.
  void complete_with(WorkPtr copy) {
    std::lock_guard<std::mutex> lock(mu_);
    copy_ = std::move(copy);
  }
  void fail_with(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
  }

 private:
  std::mutex mu_;
  std::string what_;
  WorkPtr copy_;
  std::exception_ptr error_;
};

WorkPtr NcclCommunicator::self_p2p(const Tensor& tensor, int tag, bool is_send) {
  std::lock_guard<std::mutex> lock(self_mu_);
  const char* kind = is_send ? "send" : "recv";
  // Self messages are local, so they pair as MPI's do: the oldest pending one of the other kind
  // with the same tag.
  std::deque<PendingSelf>& others = is_send ? self_recvs_ : self_sends_;
  auto it = std::find_if(others.begin(), others.end(),
                         [tag](const PendingSelf& p) { return p.tag == tag; });
  if (it == others.end()) {
    auto work = std::make_shared<SelfWork>(absl::StrFormat(
        "[%s] to/from self (tag %d) on %s", kind, tag, detail::describe_communicator(*this)));
    (is_send ? self_sends_ : self_recvs_).push_back({tensor, tag, work});
    return work;
  }
  PendingSelf match = std::move(*it);
  others.erase(it);
  const Tensor& src = is_send ? tensor : match.tensor;
  const Tensor& dst = is_send ? match.tensor : tensor;
  try {
    DT_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(),
             "[%s] to/from self (tag %d) on %s: the send holds %d %s elements, the recv expects "
             "%d %s",
             kind, tag, detail::describe_communicator(*this), src.numel(), dtype_name(src.dtype()),
             dst.numel(), dtype_name(dst.dtype()));
    WorkPtr copy =
        launch(is_send ? CollectiveKind::kSend : CollectiveKind::kRecv, &tensor, {src, dst}, [&] {
          DT_CHECK_CUDA(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(),
                                        cudaMemcpyDeviceToDevice, stream_));
        });
    match.work->complete_with(copy);
    return copy;
  } catch (...) {
    match.work->fail_with(std::current_exception());
    throw;
  }
}

WorkPtr NcclCommunicator::do_send(const Tensor& tensor, int dst, int tag) {
  if (dst == rank()) return self_p2p(tensor, tag, /*is_send=*/true);
  if (tensor.numel() == 0) return completed_work();
  return launch(CollectiveKind::kSend, &tensor, {tensor}, [&] {
    DT_CHECK_NCCL(ncclSend(tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                           nccl_datatype(tensor.dtype()), dst, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_recv(const Tensor& tensor, int src, int tag) {
  if (src == rank()) return self_p2p(tensor, tag, /*is_send=*/false);
  if (tensor.numel() == 0) return completed_work();
  return launch(CollectiveKind::kRecv, &tensor, {tensor}, [&] {
    DT_CHECK_NCCL(ncclRecv(tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                           nccl_datatype(tensor.dtype()), src, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_barrier() {
  Tensor one = zeros({1}, TensorOptions(DType::kFloat32, Device(DeviceType::kCUDA, device_)));
  return launch(CollectiveKind::kBarrier, nullptr, {one}, [&] {
    DT_CHECK_NCCL(
        ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclFloat32, ncclSum, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_exchange_slots(const void* mine, void* all, std::string_view what,
                                            const Tensor* shape_of) {
  return mpi_->exchange_slots(mine, all, what, shape_of);
}

std::shared_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  // The MPI twin's split is deadline-guarded and gives the members' world ranks.
  CommunicatorPtr mpi_child = mpi_->split(color, key);
  cuda::DeviceGuard guard(device_);
  ncclConfig_t config = nonblocking_config();
  ncclComm_t child = nullptr;
  DT_CHECK_NCCL(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config));
  wait_nccl_ready(comm_, [&] {
    return absl::StrFormat("[split] ncclCommSplit(color %d, key %d) on %s", color, key,
                           detail::describe_communicator(*this));
  });
  if (color < 0 || child == nullptr) return nullptr;
  wait_nccl_ready(child, [&] {
    return absl::StrFormat("[split] initialising the child of %s (color %d)",
                           detail::describe_communicator(*this), color);
  });
  return std::make_shared<NcclCommunicator>(child, std::move(mpi_child), device_);
}

std::shared_ptr<Communicator> NcclCommunicator::do_create_group(const std::vector<int>& members) {
  cuda::DeviceGuard guard(device_);
  return detail::make_nccl_communicator(mpi_->create_group(members));
}

namespace detail {

CommunicatorPtr make_nccl_communicator(const CommunicatorPtr& mpi) {
  auto* mpi_comm = dynamic_cast<MpiCommunicator*>(mpi.get());
  DT_CHECK(mpi_comm != nullptr,
           "[nccl] make_nccl_communicator needs an mpi-backend communicator, got backend %s",
           mpi->backend());
  // The unique id goes through the MPI communicator's checked broadcast (as int32 words), so a
  // rank that is not creating the communicator at this point is reported, not paired.
  static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0);
  ncclUniqueId id;
  if (mpi->rank() == 0) DT_CHECK_NCCL(ncclGetUniqueId(&id));
  const int64_t words = static_cast<int64_t>(sizeof(id) / sizeof(int32_t));
  {
    CollectiveLabel label("NCCL bootstrap");
    mpi->broadcast(from_blob(&id, {&words, 1}, DType::kInt32), 0)->wait();
  }
  int device = 0;
  DT_CHECK_CUDA(cudaGetDevice(&device));
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  DT_CHECK_NCCL(ncclCommInitRankConfig(&comm, mpi->size(), id, mpi->rank(), &config));
  wait_nccl_ready(comm, [&] {
    return absl::StrFormat("[nccl] ncclCommInitRankConfig on %s", describe_communicator(*mpi));
  });
  return std::make_shared<NcclCommunicator>(comm, mpi, device);
}

}  // namespace detail

}  // namespace dtensor
