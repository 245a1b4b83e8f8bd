// Lifecycle misuse under mpirun: a nested Runtime, calls after the Runtime is gone (MPI
// finalized), a Work that outlives the Runtime, and a second Runtime. Each must raise
// dtensor::Error (or, for the Work, be safe) instead of aborting inside MPI. Its own main (the
// mpirun test main owns a Runtime); exits non-zero on any unexpected outcome, and prints
// "lifecycle_probe: rank R: N checks passed".
#include <cstdio>
#include <functional>
#include <string>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dt = dtensor;

namespace {

int g_rank = -1;
int g_failures = 0;
int g_checks = 0;

void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "lifecycle_probe: rank %d: FAILED: %s\n", g_rank, what.c_str());
  }
}

// `fn` must throw dtensor::Error whose message contains `needle`.
void expect_error(const std::function<void()>& fn, const std::string& needle,
                  const std::string& what) {
  try {
    fn();
    expect(false, what + ": no error");
  } catch (const dt::Error& e) {
    expect(std::string(e.what()).find(needle) != std::string::npos,
           what + ": message lacks '" + needle + "': " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  dt::CommunicatorPtr comm;
  dt::WorkPtr small_pending, large_pending;
  dt::Tensor small, large;
  int world = 0;
  {
    dt::Runtime rt(&argc, &argv);
    g_rank = dt::world_rank();
    world = dt::world_size();
    expect_error([] { dt::Runtime nested; }, "[Runtime] a dtensor::Runtime already exists",
                 "a nested Runtime");
    comm = dt::world_communicator();
    // Issued, never waited before the Runtime ends: one finished inline from the fingerprint
    // exchange, one with its own data exchange.
    small = dt::full({3}, 1.0f);
    large = dt::full({4096}, 1.0f);
    small_pending = comm->all_reduce(small, dt::ReduceOp::kSum);
    large_pending = comm->all_reduce(large, dt::ReduceOp::kSum);
  }  // ~Runtime: completes the pending Work, then MPI_Finalize

  // The Work is safe to wait on (and to drop) after MPI_Finalize, with the right result.
  small_pending->wait();
  large_pending->wait();
  expect(small.to_vector<float>()[2] == static_cast<float>(world), "small Work result");
  expect(large.to_vector<float>()[4095] == static_cast<float>(world), "large Work result");
  small_pending.reset();
  large_pending.reset();

  expect_error([&] { comm->all_reduce(small, dt::ReduceOp::kSum); },
               "[all_reduce] MPI is finalized", "a collective after the Runtime");
  expect_error([&] { comm->barrier(); }, "[barrier] MPI is finalized", "a barrier after");
  expect_error([&] { comm->send(small, 0); }, "[send] MPI is finalized", "a send after");
  expect_error([&] { comm->split(0, 0); }, "[split] MPI is finalized", "a split after");
  expect_error([] { dt::world_rank(); }, "[world_rank] MPI is finalized", "world_rank after");
  expect_error([] { dt::world_communicator(); }, "[world_communicator] MPI is finalized",
               "world_communicator after");
  expect_error([] { dt::self_communicator(dt::DeviceType::kCPU); },
               "[self_communicator] MPI is finalized", "self_communicator after");
  expect_error([] { dt::Runtime again; }, "[Runtime] MPI is finalized", "a second Runtime");
  comm.reset();  // frees nothing in MPI after finalize

  std::printf("lifecycle_probe: rank %d: %d checks, %d failed\n", g_rank, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
