// Intra-op threads: how many CPU threads one op may use on a large tensor. Off by default (one
// thread), because the usual deployment runs one rank per core and ranks that share cores lose
// more to contention than they gain; with one rank per node (or per socket), set it to the cores
// each rank owns. Like torch.set_num_threads, it also sets OpenBLAS's threads (the GEMMs).
//
// What runs on several threads (dtensor/ops/common/detail/parallel_for.h), from 64K elements (two
// of PyTorch's grains of 32768): elementwise ops and activations (ElementwiseIter), softmax /
// log_softmax and their backward (cross_entropy through its log_softmax), layer_norm / rms_norm and
// their backward; the CPU random generator follows the same count unless set_rng_num_threads says
// otherwise. Every element is computed by the same code in the same order on any number of
// threads, so results are bit-identical to one thread's; the norm backward's weight and bias
// gradients sum fixed blocks of rows (chosen by the shape, not the thread count) in block order
// for the same reason.
//
// The environment variable DTENSOR_NUM_THREADS (a positive integer) sets the count when the
// library loads, OpenBLAS's included; an invalid value makes get_num_threads() (so any large op)
// raise a dtensor::Error until set_num_threads is called. With neither set, OpenBLAS keeps its
// own default (OPENBLAS_NUM_THREADS, else every core) while get_num_threads() says 1. The
// threads are a small pool of our own (threads.cc says why not OpenMP's); idle ones poll for
// 0.2 ms, yielding the core, then sleep.
#pragma once

#include <optional>

namespace dtensor {

// Sets the intra-op thread count for the whole process (all calling threads), n >= 1, and
// OpenBLAS's; raises "[set_num_threads] ..." otherwise. Call it between ops, not while another
// thread runs one (as torch.set_num_threads).
void set_num_threads(int n);

// The current count (1 unless set_num_threads or DTENSOR_NUM_THREADS said otherwise).
int get_num_threads();

namespace detail {
// Parses DTENSOR_NUM_THREADS: nullopt for unset or empty; raises "[DTENSOR_NUM_THREADS] ..." for
// anything but a positive integer (exposed for tests).
std::optional<int> parse_num_threads(const char* value);
}  // namespace detail

}  // namespace dtensor
