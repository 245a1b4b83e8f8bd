// The communication thread: where async collectives run while the caller computes.
//
// Open MPI progresses a nonblocking collective only inside MPI calls, so a collective posted
// with MPI_I* and left alone while the caller runs a GEMM does not move; its whole cost is paid
// at the wait. Async operations (DTensor::redistribute(..., async_op=true), the data-parallel
// gradient reductions and parameter gathers) are therefore handed as tasks to one thread per
// process that issues their collectives and waits on them (the MPI backend's blocking calls), so
// they progress while the caller computes, as PyTorch's gloo backend does with its worker threads.
// One thread, not one per communicator: tasks run in submission order, which is the same program
// order on every rank, so collectives on different communicators can never be paired out of order
// across ranks.
//
// Ordering with the caller's own operations: a collective or point-to-point message issued by
// any other thread (every public Communicator call) first waits until the tasks submitted before
// it that may use the same communicator have run, so the per-communicator order is program order
// on every rank (and the communicator thread rule of communicator.h holds: the two threads never
// use a communicator at once). A task submitted with the communicator it uses is waited for only
// by operations on that communicator: a ring-attention hop on the context-parallel communicator
// does not wait for the data-parallel gathers and reductions queued before it (MPI matches each
// communicator's messages and collectives on their own, and MPI_THREAD_MULTIPLE lets two threads
// use two communicators at once). A task submitted without one may use any, and every operation
// waits for it. A backend that needs one issue order across all its communicators
// (Communicator::orders_across_communicators: NCCL) waits for every earlier task.
// Blocking waits keep their deadline: a task's collectives wait with the collective deadline,
// which ends the job if a peer never comes. An error raised by a task is rethrown by the wait on
// its Work (and by every later wait on it). A task whose Work is dropped unwaited still runs to
// completion. Needs MPI_THREAD_MULTIPLE; when the MPI library provides less, tasks run inline
// at submission (the result is the same, without overlap). The Runtime finishes every task
// before MPI_Finalize.
//
// CommDebugMode: a task runs under the labels (module, op, phase) current on the submitting
// thread when it was submitted; what it issues is added to the CommDebugModes alive on the
// thread that first waits for its Work.
#pragma once

#include <functional>

#include "dtensor/collectives/communicator.h"

namespace dtensor {

// Queues `task` on the communication thread and returns at once; wait() on the result blocks
// until the task has run (rethrowing its error). is_completed() never blocks. With
// `capture_debug` false, what the task issues is not shown to CommDebugMode at all (for a
// caller that records its collectives itself when it submits them).
WorkPtr submit_async(std::function<void()> task, bool capture_debug = true);
// The same for a task that issues on `uses` only (and keeps it alive): operations on other
// communicators do not wait for it.
WorkPtr submit_async(const Communicator& uses, std::function<void()> task,
                     bool capture_debug = true);
// Waits until every task submitted so far has run (a no-op on the communication thread).
void drain_async();
// Waits until every task submitted so far that may issue on `comm` has run (all of them when
// comm.orders_across_communicators()); a no-op on the communication thread. Called by every
// public Communicator call before it issues.
void drain_async_for(const Communicator& comm);
// Whether tasks are submitted and not yet run (one relaxed load): the fast path of
// Communicator's ordering rule.
bool async_outstanding();
// Whether this is the communication thread.
bool on_comm_thread();
// Whether submitted tasks run on the communication thread (MPI_THREAD_MULTIPLE available and
// DTENSOR_ASYNC not "0"); false: they run inline at submission.
bool async_threaded();
// Overrides DTENSOR_ASYNC for the rest of the process (after running the tasks already
// submitted); every rank must do the same. For benchmarks comparing the two.
void set_async_threaded(bool threaded);

namespace detail {
// Drains and joins the thread (the Runtime, before MPI_Finalize); a later submit starts it
// again.
void stop_comm_thread();
}  // namespace detail

}  // namespace dtensor
