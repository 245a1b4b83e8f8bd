// CUDA memory released while this thread's stream is captured into a CUDA graph (a compiled
// step's CompileOptions::cuda_graph, dtensor/compile/cuda_graph_cuda.cc): a stream-ordered free
// there would become a node of the graph (freeing the memory again at every launch), so
// cuda_free (cuda_allocator.cc) keeps it instead, and the capture frees it on the default stream
// once the capture has ended (flush_deferred_cuda_frees). Include only from files built with
// CUDA.
#pragma once

namespace dtensor::detail {

// Frees, on the default stream, the memory this thread released during a capture. Returns how
// many blocks it freed.
int flush_deferred_cuda_frees();

}  // namespace dtensor::detail
