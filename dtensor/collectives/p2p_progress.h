// Host progress for point-to-point transfers while their owner computes (internal: the
// pipeline's stage-to-stage Channel and ring attention's k/v ring use it).
//
// Open MPI moves a message above its eager size (a few KiB in shared memory) only inside MPI
// calls on both sides: the sender's Isend posts a rendezvous request, and the data moves when
// the receiver has matched it and both sides next enter MPI. A rank that posts its transfers
// and goes on computing therefore holds its peer waiting for a whole compute item (a pipeline
// stage's activation; a ring attention k/v block), unless something else calls MPI meanwhile.
// P2PProgress registers a rank's pending sends and receives with one progress thread per
// process, which tests them (MPI_Test) while the owner computes, as PyTorch's backends progress
// P2P ops off the compute thread.
//
// The thread tests a new Work 50 us after it comes (an owner that waits at once then tests it
// alone), then every 50 us, backing off to 400 us while nothing completes, and sleeps on a
// condition variable while nothing is registered. It sleeps between polls rather than spinning:
// when every core computes (one rank per core), a thread waking from a sleep gets a core at once
// (the scheduler favours a waking thread), while a thread spinning with sched_yield, as the
// communication thread's waits do (comm_worker.h), takes a core share from the compute it should
// hide behind. One thread for every owner: a pipeline whose stages run ring attention polls its
// sends and the ring's transfers together.
//
// Only the MPI backend on CPU tensors needs it (needs_host_progress): NCCL progresses on its own
// streams, and MPI's CUDA staging copies a received buffer back to the device on the thread that
// sees the receive complete, which must be the owner's. add() is a no-op there, on the fake
// backend, and without MPI_THREAD_MULTIPLE or with DTENSOR_ASYNC=0 (async_threaded()): the
// transfers then move at the owner's next MPI call, as before.
//
// Errors. A test that throws (MPI_Test failed: MPI_ERR_TRUNCATE, ...) ends the polling of that
// Work on the thread, which keeps the first such error for its owner: stop() returns it on the
// owner's thread (and the MPI backend's Work rethrows its own error at every later wait, so a
// failed transfer never waits as a success). Works are tested only: completing them is the
// owner's wait (after stop()).
#pragma once

#include <exception>

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

// Whether transfers of `comm` on `device` move only inside MPI calls (and so want the progress
// thread): the MPI backend on CPU tensors, with threads allowed to call MPI at once
// (async_threaded()).
bool needs_host_progress(const Communicator& comm, Device device);

// One owner's pending point-to-point Works, tested by the process's progress thread until they
// complete or the owner stops it. Used by one thread (the owner).
class P2PProgress {
 public:
  P2PProgress() = default;
  // stop(), the error (if any) dropped: the owner's waits on the Works report it.
  ~P2PProgress();
  P2PProgress(const P2PProgress&) = delete;
  P2PProgress& operator=(const P2PProgress&) = delete;

  // Has the progress thread test `work`, a send or receive issued on `comm` for a tensor on
  // `device`, until it completes or stop() is called. A no-op unless
  // needs_host_progress(comm, device). The owner keeps its own handle and must not drop it before
  // stop() (the thread never completes a Work on the owner's behalf).
  void add(WorkPtr work, const Communicator& comm, Device device);
  // Stops testing this owner's Works: returns once the thread no longer touches them, with the
  // first error a test of them raised on the thread (null: none), which is then forgotten. The
  // owner then waits for its Works itself.
  [[nodiscard]] std::exception_ptr stop();

 private:
  friend struct ProgressThread;
  std::exception_ptr error_;  // guarded by the progress thread's mutex
  bool registered_ = false;   // add() registered a Work since the last stop()
};

// Stops the progress thread (the Runtime, before MPI_Finalize): Works still registered are no
// longer tested (their owners' waits complete them); a later add() starts it again.
void stop_progress_thread();

}  // namespace dtensor::detail
