// The runtime scalars of the CUDA optimizer updates (optim_cuda.cu) under a compiled step's
// CUDA-graph replay (dtensor/compile/cuda_graph_cuda.cc). A CUDA graph bakes kernel arguments
// in at its capture, but a learning rate, a step count's bias corrections or SGD's first-step
// flag change from step to step. While a sink is set on the thread, each update takes the next
// slot of it: the update's scalars are written to the slot's pinned host memory; when capturing
// (Slot::launch), the update copies them to the slot's device memory on its stream (a memcpy
// node of the captured graph, which reads the host memory at every launch) and its kernel reads
// them from there; when refreshing (a later replay's host pass), it writes the host memory only
// and launches nothing. Without a sink (every eager step and plain replay) the scalars are kernel
// arguments, as before. Include only from files built with CUDA.
#pragma once

#include <cstddef>

namespace dtensor::optim::detail {

class DeviceScalarSink {
 public:
  static constexpr size_t kSlotBytes = 64;  // the largest update's scalars fit
  struct Slot {
    void* host;    // pinned, kSlotBytes
    void* device;  // kSlotBytes
    bool launch;   // capturing: copy and launch; refreshing: write `host` only
  };
  virtual ~DeviceScalarSink() = default;
  virtual Slot next_slot() = 0;
};

// This thread's sink (nullptr: none), set for the scope of a capture or of a host pass.
DeviceScalarSink*& device_scalar_sink();

}  // namespace dtensor::optim::detail
