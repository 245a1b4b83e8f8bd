#include "dtensor/collectives/runtime.h"

#include <mpi.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/cuda_support.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/mpi/mpi_check.h"
#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/collectives/nccl/nccl_backend.h"
#include "dtensor/collectives/p2p_progress.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

struct RuntimeState {
  std::mutex mu;
  int runtimes = 0;             // live Runtime objects (at most one)
  bool we_initialized = false;  // MPI_Init_thread was called by this library
  bool atexit_registered = false;
  int local_rank = -1;
  CommunicatorPtr world_cpu;
  CommunicatorPtr world_cuda;
};

RuntimeState& state() {
  static RuntimeState* s = new RuntimeState();  // never destroyed: used from atexit handlers
  return *s;
}

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// Completes the Work still in flight (so that waiting on it later, or dropping it, needs no
// MPI), drops the cached communicators (they free their MPI/NCCL handles) and finalises MPI.
void shutdown_locked(RuntimeState& s) {
  // Async tasks first: they may still issue collectives.
  if (mpi_active() || detail::fake_world() != nullptr) detail::stop_comm_thread();
  detail::stop_progress_thread();  // it tests point-to-point Works with MPI_Test
  if (s.we_initialized && mpi_active()) detail::complete_pending_mpi_work();
  s.world_cuda.reset();
  s.world_cpu.reset();
  if (s.we_initialized && mpi_active()) MPI_Finalize();
  s.we_initialized = false;
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

void finalize_at_exit() {
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  shutdown_locked(s);
}

// MPI_Initialized stays true after MPI_Finalize, so finalisation is tested first.
void init_locked(RuntimeState& s, int* argc, char*** argv, std::string_view op) {
  DT_CHECK(!mpi_finalized(),
           "[%s] MPI is finalized (the dtensor::Runtime was destroyed, or the application called "
           "MPI_Finalize) and cannot be initialised again: construct one Runtime at the top of "
           "main() and make every dtensor call while it is alive",
           op);
  configure_log_from_env();  // DTENSOR_LOG (dtensor/collectives/debug_log.h)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    report_pending_config();  // DTENSOR_LOG=config: now that the rank is known
    return;
  }
  int provided = 0;
  DT_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  s.we_initialized = true;
  // Errors come back as codes, raised as dtensor::Error. Open MPI reports some errors
  // (MPI_ERR_TRUNCATE of a nonblocking operation when ranks pass different sizes) through
  // MPI_COMM_WORLD's handler, whatever communicator they ran on, so the world's handler must
  // return too. (Only when dtensor initialised MPI: an application's handlers are its own.)
  DT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  DT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  DT_CHECK(provided >= MPI_THREAD_FUNNELED,
           "[Runtime] the MPI library provides thread level %d, expected at least "
           "MPI_THREAD_FUNNELED (%d)",
           provided, MPI_THREAD_FUNNELED);
  report_pending_config();
}

// MPI is initialised on first use when no Runtime was constructed (single-process tools and
// tests), and finalised at exit.
void ensure_mpi(std::string_view op) {
  RuntimeState& s = state();
  if (mpi_active()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (mpi_active()) return;
  init_locked(s, nullptr, nullptr, op);
  if (!s.atexit_registered) {
    s.atexit_registered = true;
    std::atexit(finalize_at_exit);
  }
}

// This rank's index in a communicator and the communicator's size.
struct CommRanks {
  int rank = 0;
  int size = 1;
};
CommRanks comm_ranks(MPI_Comm comm) {
  CommRanks n;
  MPI_Comm_rank(comm, &n.rank);
  MPI_Comm_size(comm, &n.size);
  return n;
}

// This rank's index and the number of ranks on its node (MPI_COMM_TYPE_SHARED split of the
// world; collective).
CommRanks node_ranks() {
  MPI_Comm node;
  DT_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const CommRanks n = comm_ranks(node);
  MPI_Comm_free(&node);
  return n;
}

int compute_local_rank() {
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) return std::atoi(env);
  return node_ranks().rank;
}

// Element-wise MIN of n ints over the ranks of `comm`, guarded by the collective deadline
// (`waiting_for` says what the ranks meet for, in the timeout error). Callers agree on a value
// x by sending the pair {x, -x}: it comes back as {min, -max}, equal exactly when every rank
// sent the same x.
void min_over_ranks(const int* mine, int* out, int n, MPI_Comm comm, const char* waiting_for) {
  MPI_Request req;
  DT_CHECK_MPI(MPI_Iallreduce(mine, out, n, MPI_INT, MPI_MIN, comm, &req));
  detail::wait_mpi_request(&req, [waiting_for] {
    return std::string("[world_communicator] collective deadline exceeded while ") + waiting_for +
           "; ending the job";
  });
}

constexpr const char* kBackendEnv = "DTENSOR_CUDA_BACKEND";

// DTENSOR_CUDA_BACKEND as a code every rank can compare: 0 unset/empty, 1 nccl, 2 mpi, 3 other.
int backend_request_code(const char* env) {
  if (env == nullptr || *env == '\0') return 0;
  const std::string_view v(env);
  if (v == "nccl") return 1;
  if (v == "mpi") return 2;
  return 3;
}

// The world CUDA backend, agreed by every rank: one deadline-guarded all-reduce (MIN) of
// {this rank can use NCCL, requested code, -requested code}.
std::string_view agreed_world_cuda_backend(MPI_Comm world) {
  const char* env = std::getenv(kBackendEnv);
  const int devices = cuda_device_count();
  const int on_node = node_ranks().size;  // collective: called on every rank, whatever it sees
  const int possible = detail::nccl_compiled() && devices > 0 && on_node <= devices;
  const int code = backend_request_code(env);
  const int mine[3] = {possible, code, -code};
  int all[3] = {0, 0, 0};
  min_over_ranks(mine, all, 3, world, "the ranks agree on the CUDA backend");
  DT_CHECK(all[1] == -all[2],
           "[world_communicator] %s='%s' on this rank but another rank has a different value "
           "(expected the same value on every rank: unset, nccl or mpi)",
           kBackendEnv, env == nullptr ? "" : env);
  return detail::choose_cuda_backend(env, all[0] != 0, "world_communicator");
}

int local_rank_locked(RuntimeState& s) {
  if (s.local_rank < 0) s.local_rank = compute_local_rank();
  return s.local_rank;
}

}  // namespace

Runtime::Runtime(int* argc, char*** argv) {
  RuntimeState& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    // A second Runtime would finalise MPI under the first one when it goes.
    DT_CHECK(s.runtimes == 0,
             "[Runtime] a dtensor::Runtime already exists in this process (expected exactly one, "
             "constructed at the top of main(); nested or concurrent Runtimes are not supported)");
    if (detail::fake_world() != nullptr) {  // no MPI (fake_communicator.h)
      configure_log_from_env();
      report_pending_config();
      ++s.runtimes;
      return;
    }
    init_locked(s, argc, argv, "Runtime");
    ++s.runtimes;
  }
  detail::select_cuda_device(local_rank());
}

Runtime::~Runtime() {
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.runtimes;
  shutdown_locked(s);
}

bool Runtime::initialized() {
  return mpi_active() || detail::fake_world() != nullptr;
}

int world_rank() {
  if (const detail::FakeWorld* f = detail::fake_world()) return f->rank;
  ensure_mpi("world_rank");
  return comm_ranks(MPI_COMM_WORLD).rank;
}

int world_size() {
  if (const detail::FakeWorld* f = detail::fake_world()) return f->world_size;
  ensure_mpi("world_size");
  return comm_ranks(MPI_COMM_WORLD).size;
}

int local_rank() {
  if (detail::fake_world() != nullptr) return 0;
  ensure_mpi("local_rank");
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return local_rank_locked(s);
}

CommunicatorPtr world_communicator() {
  return world_communicator(DeviceType::kCPU);
}

CommunicatorPtr world_communicator(DeviceType device_type) {
  RuntimeState& s = state();
  if (const detail::FakeWorld* f = detail::fake_world()) {  // one for every device type
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.world_cpu) {
      s.world_cpu = detail::make_fake_world_communicator(*f);
      s.world_cpu->set_description("world");
    }
    return s.world_cpu;
  }
  ensure_mpi("world_communicator");
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.world_cpu) {
    // MPI_Comm_dup blocks until every rank arrives: meet in a deadline-guarded exchange first,
    // which also makes sure every rank runs the same consistency-check mode (the check's
    // exchanges only pair up when all ranks make them).
    const int mode = static_cast<int>(collective_check_mode());
    const int mine[2] = {mode, -mode};
    int agreed[2] = {0, 0};
    min_over_ranks(mine, agreed, 2, MPI_COMM_WORLD,
                   "waiting for every rank to create the world communicator (MPI_COMM_WORLD)");
    DT_CHECK(agreed[0] == -agreed[1],
             "[world_communicator] the collective consistency check mode differs across ranks "
             "(this rank: %s; DTENSOR_CHECK_COLLECTIVES must have the same value on every rank)",
             mode == 0 ? "off (0)" : (mode == 2 ? "full (1)" : "default (unset)"));
    MPI_Comm dup;
    DT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    s.world_cpu = std::make_shared<MpiCommunicator>(dup, /*owned=*/true);
    s.world_cpu->set_description("world");
  }
  if (device_type == DeviceType::kCPU) return s.world_cpu;
  if (!s.world_cuda) {
    if (agreed_world_cuda_backend(MPI_COMM_WORLD) == "nccl") {
      detail::select_cuda_device(local_rank_locked(s));
      s.world_cuda = detail::make_nccl_communicator(s.world_cpu);
      s.world_cuda->set_description("world");
    } else {
      s.world_cuda = s.world_cpu;  // MPI, staging CUDA tensors through host memory
    }
  }
  return s.world_cuda;
}

CommunicatorPtr self_communicator(DeviceType device_type) {
  if (const detail::FakeWorld* f = detail::fake_world()) {
    CommunicatorPtr self = detail::make_fake_self_communicator(*f);
    self->set_description("self");
    return self;
  }
  ensure_mpi("self_communicator");
  std::string_view backend = "mpi";
  if (device_type == DeviceType::kCUDA) {
    const bool possible = detail::nccl_compiled() && cuda_device_count() > 0;
    backend = detail::choose_cuda_backend(std::getenv(kBackendEnv), possible, "self_communicator");
  }
  MPI_Comm dup;
  DT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_SELF, &dup));
  CommunicatorPtr self = std::make_shared<MpiCommunicator>(dup, /*owned=*/true);
  self->set_description("self");
  if (backend == "nccl") {
    detail::select_cuda_device(local_rank());
    return detail::make_nccl_communicator(self);
  }
  return self;
}

int local_cuda_device() {
  const int count = cuda_device_count();
  return count > 0 ? local_rank() % count : 0;
}

namespace detail {

void check_mpi_running(std::string_view op) {
  DT_CHECK(!mpi_finalized(),
           "[%s] MPI is finalized (the dtensor::Runtime was destroyed, or the application called "
           "MPI_Finalize): no collective can run after it; keep the Runtime alive until the last "
           "dtensor call",
           op);
}

std::string_view choose_cuda_backend(const char* env, bool nccl_possible, std::string_view op) {
  switch (backend_request_code(env)) {
    case 0:
      return nccl_possible ? "nccl" : "mpi";
    case 1:
      DT_CHECK(nccl_possible,
               "[%s] %s=nccl but NCCL cannot be used: it needs NCCL compiled in (%s), a visible "
               "CUDA device (%d here) and one device per rank on every node (expected %s unset "
               "or mpi on this machine)",
               op, kBackendEnv, nccl_compiled() ? "yes" : "no", cuda_device_count(), kBackendEnv);
      return "nccl";
    case 2:
      return "mpi";
    default:
      DT_FAIL("[%s] %s='%s' is not a CUDA backend (expected nccl, mpi, or unset for automatic)", op,
              kBackendEnv, env);
  }
}

}  // namespace detail

CommunicatorPtr split_world(DeviceType device_type, int color, int key) {
  return world_communicator(device_type)->split(color, key);
}

}  // namespace dtensor
