// CompileOptions::cuda_graph (dtensor/compile/compile.h): a graph's replays as one CUDA graph.
//
// The first replay of a graph runs its walk (Graph::run) under stream capture on a stream of its
// own (dtensor::cuda::set_current_stream): every kernel, copy and NCCL call of the replay becomes
// a node of a CUDA graph instead of running, and the graph, instantiated, is launched once to do
// that step. Memory: the capture's allocations come from the graph's own blocks (cudaMalloc'd
// outside the capture, never given to anything else), so every address the graph bakes in stays
// valid and unshared from launch to launch; the step's inputs are copied into input buffers of
// the graph first (the caller's tensors have other addresses each step); its outputs are copied
// out after each launch (an output the caller keeps is never overwritten by the next step).
// Gradients the graph binds to parameters are its memory, written again by each launch.
//
// Host-side state: a CUDA graph replays device work only. The graph's nodes that do host-side
// bookkeeping and launched nothing at the capture (zero_grad's clearing, a gradient's binding,
// the optimizer's step counts) are rerun before each launch, on the captured tensors; the
// optimizer updates are rerun too, in a mode where they write their runtime scalars (learning
// rate, bias corrections) to the pinned memory a captured copy feeds to their kernels
// (dtensor/optim/detail/device_scalars.h), launching nothing. That host pass itself runs under a
// throwaway capture, so that any CUDA work it would do is seen (and raises) instead of running
// outside the graph.
//
// What cannot be captured falls back to plain replays, the reason kept (cuda_graph_status):
// refused before any capture (cuda_graph_refusal) when seen on the host; else the capture fails
// (a node that reads the host — a device-to-host copy, a stream synchronisation — makes the
// capture invalid) and, when no node that changes host state had run yet (the optimizer's, a
// gradient's accumulation: cuda_graph_irreversible), the step is done by a plain replay instead. A
// failure after that raises "[compile] ..." (the step's host state would be inconsistent). The
// ranks agree on the outcome first (agree_cuda_graph_outcome): any rank's late failure raises on
// every rank; any rank's fallback makes every rank fall back for later steps (a rank whose
// capture succeeded launches its graph for this one step: its host side already ran).
#pragma once

#include <memory>
#include <string>

#include "dtensor/compile/graph.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::compiler {

// A rank's outcome of the first CUDA-graph replay of a layout, worst last.
struct CudaGraphOutcome {
  enum State : int64_t {
    kCaptured = 0,              // captured and instantiated, not launched yet
    kFellBack = 1,              // refused, or the capture failed before any host state changed
    kFailedAfterHostState = 2,  // the capture failed after a cuda_graph_irreversible node ran
  };
  State state = kCaptured;
  int rank = 0;  // the world rank it is from
};

// The ranks' outcomes compared over the meshes of the step's inputs (compile/agree.cc: one
// all-gather of two words per mesh, smaller meshes first): the worst, and the first rank that
// had it; the same on every rank. A capture's outcome depends on each rank's data (an empty
// shard launches no kernel), and a rank that launches its graph while another raises would leave
// the others waiting in their collectives.
CudaGraphOutcome agree_cuda_graph_outcome(const DTensorList& inputs, CudaGraphOutcome mine);

class CudaGraphReplay {
 public:
  virtual ~CudaGraphReplay() = default;
  // Captures a replay of `g` on `inputs` and instantiates it, launching nothing: kCaptured, or
  // with `why` kFellBack (the caller is to replay plainly) or kFailedAfterHostState (the step's
  // host state is inconsistent: the caller raises). A failed capture raises nothing itself, so
  // that the ranks can agree first (agree_cuda_graph_outcome).
  virtual CudaGraphOutcome::State capture(const Graph& g, const DTensorList& inputs,
                                          std::string& why) = 0;
  // After kCaptured: the first launch, which does the captured step; the step's outputs.
  virtual DTensorList launch_captured() = 0;
  // A later replay: inputs copied in, the host pass, one launch, outputs copied out.
  virtual DTensorList replay(const DTensorList& inputs) = 0;
  // "captured: 412 CUDA nodes, 37 host-side nodes rerun, 6 runtime-scalar slots"
  virtual std::string describe() const = 0;
};

// Why `g`'s replays on `inputs` cannot be a CUDA graph, seen on the host before any capture
// (tensors not on one CUDA device, asynchronous moves, an Override kept eager, clip_grad_norm_'s
// host read, a collective not on NCCL, profiling); empty when a capture may be tried.
std::string cuda_graph_refusal(const Graph& g, const DTensorList& inputs, bool profile);

// Host-side nodes ("grad", "optim", "host") whose CUDA work at the capture is all they do, which
// the graph replays (zero_grad, the backward seed, clip_grad_value_); the others are rerun on the
// host before each launch.
bool cuda_graph_device_only(const Node& n);

// Whether running `n` in a capture changes host state that a plain replay after a failed capture
// would not set right again: the optimizer's nodes (step counts, updates), "host" nodes, and
// every gradient node but zero_grad and the backward seed (an accumulation binds .grad to a
// tensor of the graph's memory whose kernel was only recorded, never run). A capture that fails
// after such a node raises instead of falling back.
bool cuda_graph_irreversible(const Node& n);

// A new capture (cuda_graph_cuda.cc); nullptr when dtensor was built without CUDA
// (cuda_graph_no_cuda.cc).
std::shared_ptr<CudaGraphReplay> make_cuda_graph_replay();

}  // namespace dtensor::compiler
