#include "dtensor/collectives/fake_communicator.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_format.h>
#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "dtensor/collectives/collective_check.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

struct FakeState {
  std::mutex mu;
  bool decided = false;  // the environment was read, or init_fake_backend called
  bool frozen = false;   // the runtime asked: the backend can no longer change
  bool on = false;
  detail::FakeWorld world;
};

FakeState& state() {
  static FakeState* s = new FakeState();  // never destroyed: read from atexit handlers
  return *s;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int out = 0;
  DT_CHECK(absl::SimpleAtoi(v, &out), "[fake backend] %s='%s' is not an integer", name, v);
  return out;
}

void check_world(int world_size, int rank, const char* from) {
  DT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
           "[fake backend] %s: world size %d and rank %d (expected world size >= 1 and "
           "0 <= rank < world size)",
           from, world_size, rank);
}

// Reads DTENSOR_BACKEND once (under s.mu) unless init_fake_backend decided first.
void decide_locked(FakeState& s) {
  if (s.decided) return;
  const char* backend = std::getenv("DTENSOR_BACKEND");
  const std::string_view b = backend == nullptr ? "" : backend;
  DT_CHECK(b.empty() || b == "fake" || b == "mpi",
           "[fake backend] DTENSOR_BACKEND='%s' is not a backend (expected fake, mpi, or unset)",
           b);
  if (b == "fake") {
    s.world.world_size = env_int("DTENSOR_FAKE_WORLD_SIZE", 1);
    s.world.rank = env_int("DTENSOR_FAKE_RANK", 0);
    check_world(s.world.world_size, s.world.rank, "DTENSOR_FAKE_WORLD_SIZE / DTENSOR_FAKE_RANK");
    s.on = true;
  }
  s.decided = true;
}

// The "config" line (DTENSOR_LOG=config) that says what the fake backend does.
void register_note(const detail::FakeWorld& w) {
  add_config_reporter([w] {
    return absl::StrFormat(
        "fake backend: this process plays rank %d of %d; collectives move no data (outputs hold "
        "a meaningless filler) and the collective consistency check is skipped",
        w.rank, w.world_size);
  });
}

}  // namespace

void init_fake_backend(int world_size, int rank) {
  check_world(world_size, rank, "init_fake_backend");
  FakeState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.frozen) {
    DT_CHECK(
        s.on && s.world.world_size == world_size && s.world.rank == rank,
        "[init_fake_backend] the runtime has already started (%s): call init_fake_backend "
        "before the Runtime and before any collective or DeviceMesh",
        s.on ? absl::StrFormat("as rank %d of a fake world of %d", s.world.rank, s.world.world_size)
             : std::string("on MPI"));
    return;
  }
  int mpi_initialized = 0;
  MPI_Initialized(&mpi_initialized);
  DT_CHECK(!mpi_initialized,
           "[init_fake_backend] MPI is already initialised: call init_fake_backend before the "
           "Runtime and before any collective or DeviceMesh");
  s.world = {world_size, rank};
  s.on = true;
  s.decided = true;
}

bool fake_backend() {
  return detail::fake_world() != nullptr;
}

void check_real_data(std::string_view op) {
  if (const detail::FakeWorld* w = detail::fake_world()) {
    DT_FAIL(
        "[%s] needs the data of a collective, but this process runs on the fake backend (rank %d "
        "of a fake world of %d, DTENSOR_BACKEND=fake or init_fake_backend): collectives move no "
        "data there and their outputs are filler (expected a dry run to read shapes, memory and "
        "CommDebugMode counts only)",
        op, w->rank, w->world_size);
  }
}

namespace detail {

const FakeWorld* fake_world() {
  FakeState& s = state();
  // After the first call the answer never changes: one acquire load (world_rank() is frequent).
  static std::atomic<int> known{-1};  // -1 undecided, 0 off, 1 fake
  const int k = known.load(std::memory_order_acquire);
  if (k >= 0) return k == 1 ? &s.world : nullptr;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    decide_locked(s);
    first = !s.frozen;
    s.frozen = true;
    known.store(s.on ? 1 : 0, std::memory_order_release);
  }
  if (first && s.on) {
    // Once per process, outside the lock (the log asks for the rank, i.e. calls back here): no
    // peers to compare fingerprints with (communicator.h), so the check is off; the config
    // line says so.
    set_collective_check_mode(CollectiveCheckMode::kOff);
    register_note(s.world);
  }
  return s.on ? &s.world : nullptr;
}

}  // namespace detail

// ---- FakeCommunicator -------------------------------------------------------------------------

namespace {
std::vector<int> iota_ranks(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}
}  // namespace

namespace {
// A send's Work: complete at once, but holding the sent tensor until it is waited on (or
// dropped), as the MPI backend's Work holds its buffer until the request completes, so that a
// dry run's memory (a pipeline's posted sends, waited at the end of its step) is the real run's.
class HeldSendWork final : public Work {
 public:
  explicit HeldSendWork(Tensor tensor) : held_(std::move(tensor)) {}
  bool is_completed() override {
    held_.reset();
    return true;
  }
  void wait() override { held_.reset(); }

 private:
  std::optional<Tensor> held_;
};
}  // namespace

FakeCommunicator::FakeCommunicator(int rank, const std::vector<int>& world_ranks)
    : Communicator(rank, static_cast<int>(world_ranks.size()), world_ranks) {}

WorkPtr FakeCommunicator::do_all_reduce(const Tensor& /*tensor*/, ReduceOp /*op*/) {
  return completed_work();
}

WorkPtr FakeCommunicator::do_all_reduce_out(const Tensor& output, const Tensor& input,
                                            ReduceOp /*op*/) {
  if (output.data_ptr() != input.data_ptr()) const_cast<Tensor&>(output).copy_(input);
  return completed_work();
}

WorkPtr FakeCommunicator::do_all_gather(const Tensor& output, const Tensor& input) {
  const int64_t n = input.numel();
  Tensor flat = output.view({output.numel()});
  const Tensor src = input.reshape({n});
  for (int r = 0; r < size(); ++r) flat.narrow(0, r * n, n).copy_(src);
  return completed_work();
}

WorkPtr FakeCommunicator::do_all_gather_into_regions(const Tensor& output, const Tensor& /*input*/,
                                                     const std::vector<Shape>& /*offsets*/,
                                                     const std::vector<Shape>& /*shapes*/) {
  const_cast<Tensor&>(output).zero_();
  return completed_work();
}

WorkPtr FakeCommunicator::do_all_to_all_regions(const Tensor& output, const Tensor& /*input*/,
                                                const std::vector<Shape>& /*send_offsets*/,
                                                const std::vector<Shape>& /*send_shapes*/,
                                                const std::vector<Shape>& /*recv_offsets*/,
                                                const std::vector<Shape>& /*recv_shapes*/) {
  const_cast<Tensor&>(output).zero_();
  return completed_work();
}

WorkPtr FakeCommunicator::do_reduce_scatter(const Tensor& output, const Tensor& input,
                                            ReduceOp /*op*/) {
  const int64_t n = output.numel();
  const_cast<Tensor&>(output).copy_(
      input.reshape({input.numel()}).narrow(0, rank() * n, n).view(output.sizes()));
  return completed_work();
}

WorkPtr FakeCommunicator::do_all_to_all(const Tensor& output, const Tensor& input) {
  const_cast<Tensor&>(output).copy_(input.reshape(output.sizes()));
  return completed_work();
}

WorkPtr FakeCommunicator::do_broadcast(const Tensor& /*tensor*/, int /*root*/) {
  return completed_work();
}

WorkPtr FakeCommunicator::do_scatter(const Tensor& output, const Tensor& input, int root) {
  if (rank() == root) {
    const int64_t n = output.numel();
    const_cast<Tensor&>(output).copy_(
        input.reshape({input.numel()}).narrow(0, rank() * n, n).view(output.sizes()));
  } else {
    const_cast<Tensor&>(output).zero_();
  }
  return completed_work();
}

WorkPtr FakeCommunicator::do_send(const Tensor& tensor, int /*dst*/, int /*tag*/) {
  if (tensor.numel() == 0) return completed_work();  // as MPI: nothing posted, nothing held
  return std::make_shared<HeldSendWork>(tensor);
}

WorkPtr FakeCommunicator::do_recv(const Tensor& tensor, int /*src*/, int /*tag*/) {
  // Zeros, or nothing for a meta buffer (zero_ writes nothing there).
  const_cast<Tensor&>(tensor).zero_();
  return completed_work();
}

WorkPtr FakeCommunicator::do_barrier() {
  return completed_work();
}

std::shared_ptr<Communicator> FakeCommunicator::do_split(int /*color*/, int /*key*/) {
  DT_FAIL(
      "[split] the fake backend cannot split %s: MPI_Comm_split needs every member's color, "
      "which one process does not know (expected create_group with the members, as DeviceMesh "
      "does under the fake backend)",
      detail::describe_communicator(*this));
}

std::shared_ptr<Communicator> FakeCommunicator::do_create_group(const std::vector<int>& members) {
  std::vector<int> world(members.size());
  int me = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    world[i] = world_ranks()[static_cast<size_t>(members[i])];
    if (members[i] == rank()) me = static_cast<int>(i);
  }
  return std::make_shared<FakeCommunicator>(me, world);
}

WorkPtr FakeCommunicator::do_exchange_slots(const void* mine, void* all, std::string_view /*what*/,
                                            const Tensor* /*shape_of*/) {
  for (int r = 0; r < size(); ++r) {
    std::memcpy(static_cast<char*>(all) + static_cast<size_t>(r) * detail::kSlotBytes, mine,
                detail::kSlotBytes);
  }
  return completed_work();
}

namespace detail {
// The fake world's communicator over every rank (for the Runtime).
CommunicatorPtr make_fake_world_communicator(const FakeWorld& w) {
  return std::make_shared<FakeCommunicator>(w.rank, iota_ranks(w.world_size));
}
// A fake communicator of this rank alone (for the Runtime's self_communicator).
CommunicatorPtr make_fake_self_communicator(const FakeWorld& w) {
  return std::make_shared<FakeCommunicator>(0, std::vector<int>{w.rank});
}
}  // namespace detail

}  // namespace dtensor
