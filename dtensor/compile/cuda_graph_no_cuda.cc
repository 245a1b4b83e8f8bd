// CompileOptions::cuda_graph when dtensor is built without CUDA: no capture (replays run plainly,
// cuda_graph_status() says why).
#include "dtensor/compile/detail/cuda_graph.h"

namespace dtensor::compiler {

std::shared_ptr<CudaGraphReplay> make_cuda_graph_replay() {
  return nullptr;
}

}  // namespace dtensor::compiler
