// Progress for a pipeline step's sends while this rank computes (internal to the pipeline's
// Channel, transfer.h).
//
// Open MPI moves a message above its eager size (a few KiB in shared memory) only inside MPI
// calls on both sides: the sender's Isend posts a rendezvous request, and the data goes out in
// fragments when the sender next enters MPI after the receiver has matched it. A stage that
// sends its activation and goes on with its next forward therefore holds the receiver waiting
// for a whole compute item (the pipeline bubble measured 0.3-0.5 at pp 2 where the schedule's
// theory is 0.11-0.20). SendProgress tests the step's pending sends from a second thread while
// the caller computes, so the transfer runs as soon as the receiver asks for it, as PyTorch's
// backends progress their P2P ops off the compute thread.
//
// It polls every 50 us, backing off to 400 us while nothing completes (a receiver busy with its
// own compute), and sleeps on a condition variable when nothing is pending. It needs
// MPI_THREAD_MULTIPLE (comm_worker.h async_threaded()); without it, or on the fake backend,
// add() is a no-op and the sends progress at this rank's next MPI call, as before. The thread
// only tests Works that the caller does not touch until stop(): the caller waits for them after.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "dtensor/collectives/communicator.h"

namespace dtensor::pipelining::detail {

class SendProgress {
 public:
  SendProgress() = default;
  ~SendProgress() { stop(); }
  SendProgress(const SendProgress&) = delete;
  SendProgress& operator=(const SendProgress&) = delete;

  // Tests `work` from the progress thread until it completes or stop() is called (started on
  // the first add when threads may call MPI at once).
  void add(WorkPtr work);
  // Stops testing (joins the thread); the caller then waits for its Works itself.
  void stop();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WorkPtr> works_;
  bool stopping_ = false;
  bool added_ = false;  // a Work was added since the last poll
  std::thread thread_;
};

}  // namespace dtensor::pipelining::detail
