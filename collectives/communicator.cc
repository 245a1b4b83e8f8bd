#include "collectives/communicator.h"

#include <string>

#include "collectives/comm_debug.h"
#include "tensor/error.h"

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

int64_t bytes_of(const Tensor& t) {
  return static_cast<int64_t>(t.nbytes());
}

}  // namespace

WorkPtr Communicator::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(*this, "all_reduce", "tensor", tensor);
  check_reduce_op("all_reduce", tensor, op);
  CommDebugMode::record(CollectiveKind::kAllReduce, bytes_of(tensor), size());
  return do_all_reduce(tensor, op);
}

WorkPtr Communicator::all_reduce(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_pair(*this, "all_reduce", output, input);
  check_reduce_op("all_reduce", input, op);
  DT_CHECK(output.sizes() == input.sizes(),
           "[all_reduce] output has shape %s but input has shape %s (expected the same shape)",
           shape_str(output.sizes()), shape_str(input.sizes()));
  const bool same = output.data_ptr() == input.data_ptr();
  const char* po = static_cast<const char*>(output.data_ptr());
  const char* pi = static_cast<const char*>(input.data_ptr());
  DT_CHECK(same || output.nbytes() == 0 || !(po < pi + input.nbytes() && pi < po + output.nbytes()),
           "[all_reduce] output and input partly overlap (expected distinct buffers, or the same "
           "tensor for an in-place reduction)");
  CommDebugMode::record(CollectiveKind::kAllReduce, bytes_of(input), size());
  return same ? do_all_reduce(output, op) : do_all_reduce_out(output, input, op);
}

WorkPtr Communicator::do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) {
  Tensor out = output;
  out.copy_(input);
  return do_all_reduce(output, op);
}

WorkPtr Communicator::all_gather(const Tensor& output, const Tensor& input) {
  check_pair(*this, "all_gather", output, input);
  DT_CHECK(output.numel() == size() * input.numel(),
           "[all_gather] output has %d elements (sizes %s), expected size() * input.numel() = "
           "%d * %d = %d",
           output.numel(), shape_str(output.sizes()), size(), input.numel(),
           size() * input.numel());
  CommDebugMode::record(CollectiveKind::kAllGather, bytes_of(input), size());
  return do_all_gather(output, input);
}

WorkPtr Communicator::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_pair(*this, "reduce_scatter", output, input);
  check_reduce_op("reduce_scatter", input, op);
  DT_CHECK(input.numel() == size() * output.numel(),
           "[reduce_scatter] input has %d elements (sizes %s), expected size() * "
           "output.numel() = %d * %d = %d",
           input.numel(), shape_str(input.sizes()), size(), output.numel(),
           size() * output.numel());
  CommDebugMode::record(CollectiveKind::kReduceScatter, bytes_of(input), size());
  return do_reduce_scatter(output, input, op);
}

WorkPtr Communicator::all_to_all(const Tensor& output, const Tensor& input) {
  check_pair(*this, "all_to_all", output, input);
  DT_CHECK(output.numel() == input.numel(),
           "[all_to_all] output has %d elements but input has %d (expected the same numel)",
           output.numel(), input.numel());
  DT_CHECK(input.numel() % size() == 0,
           "[all_to_all] input has %d elements, expected a multiple of the communicator size %d",
           input.numel(), size());
  CommDebugMode::record(CollectiveKind::kAllToAll, bytes_of(input), size());
  return do_all_to_all(output, input);
}

WorkPtr Communicator::broadcast(const Tensor& tensor, int root) {
  check_tensor(*this, "broadcast", "tensor", tensor);
  check_peer(*this, "broadcast", "root", root);
  CommDebugMode::record(CollectiveKind::kBroadcast, bytes_of(tensor), size());
  return do_broadcast(tensor, root);
}

WorkPtr Communicator::scatter(const Tensor& output, const Tensor& input, int root) {
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
  return do_scatter(output, input, root);
}

WorkPtr Communicator::send(const Tensor& tensor, int dst, int tag) {
  check_tensor(*this, "send", "tensor", tensor);
  check_peer(*this, "send", "dst", dst);
  DT_CHECK(tag >= 0, "[send] tag %d is negative (expected tag >= 0)", tag);
  CommDebugMode::record(CollectiveKind::kSend, bytes_of(tensor), size());
  return do_send(tensor, dst, tag);
}

WorkPtr Communicator::recv(const Tensor& tensor, int src, int tag) {
  check_tensor(*this, "recv", "tensor", tensor);
  check_peer(*this, "recv", "src", src);
  DT_CHECK(tag >= 0, "[recv] tag %d is negative (expected tag >= 0)", tag);
  CommDebugMode::record(CollectiveKind::kRecv, bytes_of(tensor), size());
  return do_recv(tensor, src, tag);
}

WorkPtr Communicator::barrier() {
  CommDebugMode::record(CollectiveKind::kBarrier, 0, size());
  return do_barrier();
}

}  // namespace dtensor
