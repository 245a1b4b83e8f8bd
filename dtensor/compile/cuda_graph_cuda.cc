// CompileOptions::cuda_graph's capture and replay (detail/cuda_graph.h).
#include <absl/strings/str_cat.h>
#include <cuda_runtime.h>

#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <vector>

#include "dtensor/compile/detail/cuda_graph.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/optim/detail/device_scalars.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/cuda_check.h"
#include "dtensor/tensor/detail/deferred_free_cuda.h"
#include "dtensor/tensor/detail/storage_pool.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stream_cuda.h"

namespace dtensor::compiler {
namespace {

// cudaMalloc and cudaHostAlloc are refused while this thread captures in its default mode:
// allowed for the scope (the memory is made now, outside the graph).
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Guards every Block's refs and orphaned (storages may die on any thread).
std::mutex g_blocks_mu;

void free_device_memory(void* p, int device) {
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) return;
  if (prev != device) cudaSetDevice(device);
  cudaFree(p);  // synchronises: no launch of the graph is still using it
  if (prev != device) cudaSetDevice(prev);
}

// A block of the graph's memory: cudaMalloc'd once, handed out as whole storages (each holds a
// reference: Storage::from_blob with detail::pooled_free). Freed with the graph, or, when a
// storage still uses it then (a gradient bound to a parameter, an output), by its last one.
struct Block final : dtensor::detail::PooledMemory {
  void* ptr = nullptr;
  size_t nbytes = 0;
  int device = 0;
  int refs = 0;
  bool orphaned = false;

  void give_back(void*) override {
    bool last = false;
    {
      const std::lock_guard<std::mutex> lock(g_blocks_mu);
      last = --refs == 0 && orphaned;
    }
    if (last) {
      free_device_memory(ptr, device);
      delete this;
    }
  }
};

// The capture's allocations (Graph::run's RunHooks::pool): a block of exactly the size whose
// storages all died earlier in the capture, else a new one; nothing after the capture (close).
class GraphMemory final : public dtensor::detail::StoragePool {
 public:
  GraphMemory() = default;
  GraphMemory(const GraphMemory&) = delete;
  GraphMemory& operator=(const GraphMemory&) = delete;
  ~GraphMemory() override {
    std::vector<Block*> unused;
    {
      const std::lock_guard<std::mutex> lock(g_blocks_mu);
      for (const auto& [address, b] : blocks_) {
        if (b->refs == 0) {
          unused.push_back(b);
        } else {
          b->orphaned = true;
        }
      }
    }
    for (Block* b : unused) {
      free_device_memory(b->ptr, b->device);
      delete b;
    }
  }

  Storage take(size_t nbytes, Device device) override {
    if (!open_ || !device.is_cuda()) return Storage();
    return storage_of(block(nbytes, device.index));
  }

  // A new contiguous tensor of t's sizes and dtype in a block of its own.
  Tensor new_like(const Tensor& t) {
    Block* b = block(t.nbytes(), t.device().index);
    return Tensor(storage_of(b), t.dtype(), t.sizes(), contiguous_strides(t.sizes()));
  }

  // A handle on t's memory that shares no Storage with it (so that t's sole_owner() is unchanged
  // by the graph holding it): a second storage on its block; t itself when it is not the graph's.
  Tensor alias(const Tensor& t) {
    if (!t.defined()) return t;
    Block* b = find(t.storage().data());
    if (b == nullptr) return t;
    return Tensor(storage_of(b), t.dtype(), t.sizes(), t.strides(), t.storage_offset());
  }

  bool owns(const Tensor& t) { return t.defined() && find(t.storage().data()) != nullptr; }
  void close() { open_ = false; }
  size_t blocks() const { return blocks_.size(); }

 protected:
  void release_all() override {}  // empty_cpu_cache(): the graph needs every block

 private:
  Block* block(size_t nbytes, int device) {
    if (nbytes == 0) nbytes = 1;
    {
      const std::lock_guard<std::mutex> lock(g_blocks_mu);
      for (const auto& [address, b] : blocks_) {
        if (b->refs == 0 && b->nbytes == nbytes && b->device == device) return b;
      }
    }
    auto b = std::make_unique<Block>();
    b->nbytes = nbytes;
    b->device = device;
    {
      const cuda::DeviceGuard guard(device);
      const RelaxedCapture relaxed;
      DT_CHECK_CUDA(cudaMalloc(&b->ptr, nbytes));
    }
    Block* raw = b.release();
    blocks_.emplace(reinterpret_cast<uintptr_t>(raw->ptr), raw);
    return raw;
  }

  Storage storage_of(Block* b) {
    {
      const std::lock_guard<std::mutex> lock(g_blocks_mu);
      ++b->refs;
    }
    return Storage::from_blob(b->ptr, b->nbytes, Device(kCUDA, b->device),
                              &dtensor::detail::pooled_free, b);
  }

  Block* find(const void* p) {
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
    return it == blocks_.end() ? nullptr : it->second;
  }

  std::map<uintptr_t, Block*> blocks_;  // by address
  bool open_ = true;
};

// The optimizer updates' runtime scalars (dtensor/optim/detail/device_scalars.h): slot i is
// taken by the i-th update of the capture, and again of every host pass (rewind).
class ScalarSlots final : public optim::detail::DeviceScalarSink {
 public:
  static constexpr size_t kChunk = 256;
  explicit ScalarSlots(int device) : device_(device) {}
  ScalarSlots(const ScalarSlots&) = delete;
  ScalarSlots& operator=(const ScalarSlots&) = delete;
  ~ScalarSlots() override {
    for (const Chunk& c : chunks_) {
      cudaFreeHost(c.host);
      free_device_memory(c.device, device_);
    }
  }

  Slot next_slot() override {
    const size_t i = next_++;
    if (capturing_) {
      if (i / kChunk >= chunks_.size()) {
        const cuda::DeviceGuard guard(device_);
        const RelaxedCapture relaxed;
        Chunk c;
        DT_CHECK_CUDA(cudaHostAlloc(&c.host, kChunk * kSlotBytes, cudaHostAllocDefault));
        DT_CHECK_CUDA(cudaMalloc(&c.device, kChunk * kSlotBytes));
        chunks_.push_back(c);
      }
      used_ = next_;
    } else {
      DT_CHECK(i < used_,
               "[compile] CUDA-graph replay: the optimizer updates took more runtime-scalar slots "
               "than at the capture (%d): the step's updates changed since",
               used_);
    }
    const Chunk& c = chunks_[i / kChunk];
    const size_t offset = (i % kChunk) * kSlotBytes;
    return {static_cast<char*>(c.host) + offset, static_cast<char*>(c.device) + offset, capturing_};
  }

  void end_capture() { capturing_ = false; }
  void rewind() { next_ = 0; }
  size_t taken() const { return next_; }
  size_t used() const { return used_; }

 private:
  struct Chunk {
    void* host = nullptr;
    void* device = nullptr;
  };
  int device_;
  std::vector<Chunk> chunks_;
  size_t next_ = 0, used_ = 0;
  bool capturing_ = true;
};

// This thread's stream and scalar sink for the scope.
class OnStream {
 public:
  OnStream(cudaStream_t s, optim::detail::DeviceScalarSink* sink)
      : stream_(cuda::set_current_stream(s)), sink_(optim::detail::device_scalar_sink()) {
    optim::detail::device_scalar_sink() = sink;
  }
  ~OnStream() {
    optim::detail::device_scalar_sink() = sink_;
    cuda::set_current_stream(stream_);
  }
  OnStream(const OnStream&) = delete;
  OnStream& operator=(const OnStream&) = delete;

 private:
  cudaStream_t stream_;
  optim::detail::DeviceScalarSink* sink_;
};

bool host_kind(const Node& n) {
  return n.kind == "grad" || n.kind == "optim" || n.kind == "host";
}

// A failed capture's reason as the status shows it, naming the node: "node 7 (op mm): ...".
constexpr char kNodePrefix[] = "[compile] CUDA-graph capture: node ";

class CudaGraphReplayImpl final : public CudaGraphReplay {
 public:
  ~CudaGraphReplayImpl() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  CudaGraphOutcome::State capture(const Graph& g, const DTensorList& inputs,
                                  std::string& why) override {
    DTensorList& outputs = captured_outputs_;
    device_ = device_of(g, inputs);
    const cuda::DeviceGuard guard(device_);
    DT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DT_CHECK_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    DT_CHECK_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    scalars_ = std::make_unique<ScalarSlots>(device_);
    // The graph's input buffers, filled after the work queued so far on the default stream.
    DTensorList graph_inputs;
    std::vector<Tensor> contiguous;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor local = inputs[i].to_local();
      if (!local.is_contiguous()) local = local.contiguous();
      contiguous.push_back(local);
      static_in_.push_back(memory_.new_like(local));
      graph_inputs.emplace_back(static_in_.back(), inputs[i].spec_ptr());
    }
    copy_inputs(contiguous);
    {
      // cuBLAS may set up its workspace for a stream when first used on it, which a capture
      // would refuse: one small product on the capture's stream first.
      const OnStream on(stream_, nullptr);
      const TensorOptions opts(kFloat32, Device(kCUDA, device_));
      const int64_t square[] = {2, 2};
      (void)mm(ones(square, opts), ones(square, opts));
    }

    // The capture: each node observed before and after it runs.
    // A node that changed host state a plain replay would not set right has run
    // (cuda_graph_irreversible: the optimizer's, a gradient's accumulation).
    bool irreversible = false;
    Mark before;
    size_t slots_before = 0, current = g.nodes().size();
    std::string failure;
    RunHooks hooks;
    hooks.pool = &memory_;
    hooks.observe = [&](size_t k, absl::Span<const Tensor> in, bool after) {
      const Node& n = g.nodes()[k];
      if (!after) {
        current = k;
        for (const Tensor& t : in) {
          DT_CHECK(!t.defined() || t.numel() == 0 || t.device().is_cuda(),
                   "%s%d (%s %s) reads a tensor on %s", kNodePrefix, k, n.kind, n.name,
                   t.device().str());
        }
        before = mark();
        slots_before = scalars_->taken();
        if (cuda_graph_irreversible(n)) irreversible = true;
        return;
      }
      const bool work = added(before, mark());
      const bool scalars = scalars_->taken() > slots_before;
      if (!host_kind(n)) return;
      if (!work || scalars) {
        HostNode h;
        h.fn = &n.fn;
        for (const Tensor& t : in) h.in.push_back(memory_.alias(t));
        h.outputs = n.outputs.size();
        host_.push_back(std::move(h));
      } else {
        DT_CHECK(cuda_graph_device_only(n),
                 "%s%d (%s %s) runs host-side code and CUDA work in one, which a graph launch "
                 "cannot replay (a gradient accumulated into one left from an earlier step? call "
                 "zero_grad() inside the step)",
                 kNodePrefix, k, n.kind, n.name);
      }
    };
    cudaGraph_t graph = nullptr;
    {
      const OnStream on(stream_, scalars_.get());
      DT_CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        outputs = g.run(graph_inputs, nullptr, &hooks);
      } catch (const std::exception& e) {
        failure = e.what();
        if (failure.rfind(kNodePrefix, 0) == 0) {
          failure.erase(0, std::strlen(kNodePrefix) - std::strlen("node "));
        } else if (current < g.nodes().size()) {
          const Node& n = g.nodes()[current];
          failure = absl::StrCat("node ", current, " (", n.kind, " ", n.name, "): ", failure);
        }
      }
      const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
      if (failure.empty() && end != cudaSuccess) {
        failure = absl::StrCat("the capture ended with ", cudaGetErrorString(end));
      }
      cudaGetLastError();  // a capture error is not the next call's
    }
    // Memory released during the capture (the last step's gradients, dropped by zero_grad) is
    // freed now, on the default stream (it is not the graph's).
    dtensor::detail::flush_deferred_cuda_frees();
    memory_.close();
    scalars_->end_capture();
    if (failure.empty()) failure = check_and_instantiate(graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!failure.empty()) {
      outputs.clear();
      host_.clear();
      why = failure;
      return irreversible ? CudaGraphOutcome::kFailedAfterHostState : CudaGraphOutcome::kFellBack;
    }
    return CudaGraphOutcome::kCaptured;
  }

  DTensorList launch_captured() override {
    const cuda::DeviceGuard guard(device_);
    launch();
    for (const DTensor& o : captured_outputs_) static_out_.push_back(o.to_local());
    DTensorList outputs = copy_outputs(captured_outputs_);
    captured_outputs_.clear();
    return outputs;
  }

  DTensorList replay(const DTensorList& inputs) override {
    const cuda::DeviceGuard guard(device_);
    // The host pass rewrites the scalar slots the last launch's copies read.
    DT_CHECK_CUDA(cudaEventSynchronize(done_));
    std::vector<Tensor> contiguous;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor local = inputs[i].to_local();
      DT_CHECK(local.nbytes() == static_in_[i].nbytes(),
               "[compile] CUDA-graph replay: input %d has %d bytes, the graph's %d", i,
               local.nbytes(), static_in_[i].nbytes());
      contiguous.push_back(local.is_contiguous() ? local : local.contiguous());
    }
    copy_inputs(contiguous);
    host_pass();
    launch();
    DTensorList outputs;
    for (size_t o = 0; o < static_out_.size(); ++o) {
      outputs.emplace_back(static_out_[o], out_specs_[o]);
    }
    return copy_outputs(outputs);
  }

  std::string describe() const override {
    return absl::StrCat("captured: ", graph_nodes_, " CUDA graph nodes, ", host_.size(),
                        " host-side nodes rerun per replay, ", scalars_->used(),
                        " runtime-scalar slots, ", memory_.blocks(), " memory blocks");
  }

 private:
  struct HostNode {
    const ReplayFn* fn = nullptr;
    std::vector<Tensor> in;
    size_t outputs = 0;
  };

  static int device_of(const Graph& g, const DTensorList& inputs) {
    for (const DTensor& t : inputs) {
      if (t.to_local().device().is_cuda()) return t.to_local().device().index;
    }
    for (const Value& v : g.values()) {
      if (v.kind == Value::Kind::kExternal && v.external.device().is_cuda()) {
        return v.external.device().index;
      }
    }
    DT_FAIL("[compile] CUDA-graph capture: the step has no CUDA tensor");
  }

  // Where the capture is: its node count, and the stream's current dependencies (compared
  // instead when the nodes cannot be counted during a capture).
  struct Mark {
    bool counted = false;
    size_t nodes = 0;
    std::vector<cudaGraphNode_t> deps;
  };
  Mark mark() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    const cudaGraphNode_t* deps = nullptr;
    size_t ndeps = 0;
#if CUDART_VERSION >= 13000
    DT_CHECK_CUDA(
        cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph, &deps, nullptr, &ndeps));
#else
    DT_CHECK_CUDA(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph, &deps, &ndeps));
#endif
    DT_CHECK(status == cudaStreamCaptureStatusActive,
             "[compile] CUDA-graph capture: the stream capture was invalidated (%s)",
             cudaGetErrorString(cudaGetLastError()));
    Mark m;
    m.deps.assign(deps, deps + ndeps);
    if (cudaGraphGetNodes(graph, nullptr, &m.nodes) == cudaSuccess) {
      m.counted = true;
    } else {
      cudaGetLastError();
    }
    return m;
  }
  // Whether CUDA work was captured between two marks.
  static bool added(const Mark& before, const Mark& after) {
    if (before.counted && after.counted) return after.nodes > before.nodes;
    return after.deps != before.deps;
  }

  // Empty, or why the captured graph cannot be used.
  std::string check_and_instantiate(cudaGraph_t graph) {
    if (graph == nullptr) return "the capture made no graph";
    size_t n = 0;
    if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) return "cudaGraphGetNodes failed";
    std::vector<cudaGraphNode_t> nodes(n);
    if (n > 0 && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) {
      return "cudaGraphGetNodes failed";
    }
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
      if (cudaGraphNodeGetType(node, &type) != cudaSuccess) return "cudaGraphNodeGetType failed";
      if (type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree) {
        return "the captured work allocates or frees memory in the graph (an allocation outside "
               "the graph's memory)";
      }
    }
    graph_nodes_ = n;
    if (cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0); e != cudaSuccess) {
      cudaGetLastError();
      exec_ = nullptr;
      return absl::StrCat("cudaGraphInstantiate failed: ", cudaGetErrorString(e));
    }
    return "";
  }

  // The inputs into the graph's buffers, on its stream after the caller's stream's work so far.
  void copy_inputs(const std::vector<Tensor>& inputs) {
    DT_CHECK_CUDA(cudaEventRecord(ready_, cuda::current_stream()));
    DT_CHECK_CUDA(cudaStreamWaitEvent(stream_, ready_, 0));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].nbytes() == 0) continue;
      DT_CHECK_CUDA(cudaMemcpyAsync(static_in_[i].data_ptr(), inputs[i].data_ptr(),
                                    inputs[i].nbytes(), cudaMemcpyDeviceToDevice, stream_));
    }
  }

  // The host-side nodes again, on the captured tensors, with the scalar slots refreshed; under a
  // throwaway capture that must stay empty (no CUDA work may run outside the graph).
  void host_pass() {
    scalars_->rewind();
    std::exception_ptr failure;
    cudaGraph_t stray = nullptr;
    cudaError_t end = cudaSuccess;
    {
      const OnStream on(stream_, scalars_.get());
      DT_CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        for (HostNode& h : host_) {
          scratch_.assign(h.outputs, Tensor());
          (*h.fn)(absl::MakeConstSpan(h.in), absl::MakeSpan(scratch_));
        }
        scratch_.clear();
      } catch (...) {
        failure = std::current_exception();
      }
      end = cudaStreamEndCapture(stream_, &stray);
      cudaGetLastError();
    }
    dtensor::detail::flush_deferred_cuda_frees();
    size_t strays = 0;
    if (stray != nullptr) {
      cudaGraphGetNodes(stray, nullptr, &strays);
      cudaGraphDestroy(stray);
    }
    if (failure != nullptr) std::rethrow_exception(failure);
    DT_CHECK(end == cudaSuccess && strays == 0,
             "[compile] CUDA-graph replay: the host-side nodes ran CUDA work (%d operations, %s) "
             "outside the graph; the step's state is no longer consistent. Turn "
             "CompileOptions::cuda_graph off for this step",
             strays, cudaGetErrorString(end));
    DT_CHECK(scalars_->taken() == scalars_->used(),
             "[compile] CUDA-graph replay: the optimizer updates took %d runtime-scalar slots, "
             "%d at the capture",
             scalars_->taken(), scalars_->used());
  }

  // One launch; the caller's stream's later work waits for it.
  void launch() {
    DT_CHECK_CUDA(cudaGraphLaunch(exec_, stream_));
    DT_CHECK_CUDA(cudaEventRecord(done_, stream_));
    DT_CHECK_CUDA(cudaStreamWaitEvent(cuda::current_stream(), done_, 0));
  }

  // The step's outputs that are the graph's memory, copied (the next launch overwrites them).
  DTensorList copy_outputs(const DTensorList& outputs) {
    if (out_specs_.empty()) {
      for (const DTensor& o : outputs) out_specs_.push_back(o.spec_ptr());
    }
    DTensorList result;
    for (const DTensor& o : outputs) {
      result.push_back(memory_.owns(o.to_local()) ? DTensor(o.to_local().clone(), o.spec_ptr())
                                                  : o);
    }
    return result;
  }

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t graph_nodes_ = 0;
  // Declared before the tensors on it, so destroyed after them.
  GraphMemory memory_;
  std::unique_ptr<ScalarSlots> scalars_;
  std::vector<Tensor> static_in_, static_out_;
  DTensorList captured_outputs_;  // between capture and launch_captured
  std::vector<std::shared_ptr<const DTensorSpec>> out_specs_;
  std::vector<HostNode> host_;
  std::vector<Tensor> scratch_;
};

}  // namespace

std::shared_ptr<CudaGraphReplay> make_cuda_graph_replay() {
  return std::make_shared<CudaGraphReplayImpl>();
}

}  // namespace dtensor::compiler
