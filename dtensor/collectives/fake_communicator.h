// The fake backend (PyTorch's FakeProcessGroup, init_process_group("fake", rank, world_size)):
// one process plays rank `rank` of a world of `world_size` ranks, with no MPI and no peers, so
// that meshes of any size (1,024 or 65,536 ranks) build on one machine and a program's layouts,
// plans, memory and communication volume can be checked before a cluster is booked (issue 46).
//
// Turned on before anything starts the runtime, either by the environment
//   DTENSOR_BACKEND=fake DTENSOR_FAKE_WORLD_SIZE=1024 DTENSOR_FAKE_RANK=0 ./prog
// (DTENSOR_FAKE_RANK defaults to 0) or by init_fake_backend(world_size, rank) at the top of
// main(). Then world_rank() / world_size() are the given ones, the Runtime initialises no MPI,
// and world_communicator() / self_communicator() / every mesh dim are FakeCommunicators.
//
// Collectives complete at issue and move no data. CommDebugMode still counts each one (kind,
// mesh dim, bytes: the public Communicator calls record before the backend runs), and
// DTENSOR_LOG=collectives still logs them. Their outputs are correctly shaped but hold a
// deterministic filler that is MEANINGLESS as data: every rank is taken to hold this rank's
// input (all_gather: each block is this rank's input; reduce_scatter: this rank's block of the
// input, unreduced; all_to_all: the input; all_reduce and broadcast: the tensor unchanged; region
// exchanges, scatter to a non-root and recv: zeros; a meta tensor is left as it is). Point-to-point
// calls complete at once too and are counted and logged as collectives are ("send" / "recv",
// the tensor's bytes, on the communicator's mesh dim): a pipeline's stage transfers (whose
// headers the receiver then takes from what it expects, dtensor/parallel/pipeline/transfer.h)
// and ring attention's k/v ring run as on MPI. A send's Work holds its tensor until waited on,
// as MPI's does, so memory figures match the real run's. The consistency check
// (DTENSOR_CHECK_COLLECTIVES) is turned off, since there are no peers to compare fingerprints
// with; DTENSOR_LOG=config says so in its "fake backend" line.
//
// Reading a collective's result as data is refused where it can be detected: check_real_data(op)
// throws dtensor::Error "[op] needs the data of a collective ..." and is called by the
// checkpoint writers (checkpoint::save, save_hf: a saved file would be filler). Host reads of
// a DTensor (full_tensor(), a loss printed from to_local()) are NOT refused: they cannot tell a
// reduced value from a local one, so a dry run must not take decisions on values.
#pragma once

#include <string_view>
#include <vector>

#include "dtensor/collectives/communicator.h"

namespace dtensor {

// Turns the fake backend on for this process: it plays rank `rank` (0 <= rank < world_size) of
// `world_size` ranks. Call before the Runtime and before any call that starts it (world_rank,
// a collective, a DeviceMesh); afterwards, or with MPI already initialised, it throws
// dtensor::Error. Calling it again with the same values is allowed.
void init_fake_backend(int world_size, int rank);
// Whether this process runs on the fake backend (the call above, or DTENSOR_BACKEND=fake).
// Reads the environment at first use and throws dtensor::Error naming the variable for a bad
// DTENSOR_BACKEND ("fake", "mpi", empty or unset), DTENSOR_FAKE_WORLD_SIZE or DTENSOR_FAKE_RANK.
bool fake_backend();
// Throws dtensor::Error "[op] ..." under the fake backend: `op` needs the data of a collective,
// which the fake backend does not move.
void check_real_data(std::string_view op);

// A communicator of the fake backend: rank `rank` of `world_ranks.size()` members.
class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(int rank, const std::vector<int>& world_ranks);

  std::string_view backend() const override { return "fake"; }
  // Every device: no data moves.
  bool supports(Device /*device*/) const override { return true; }
  // The region calls are accepted everywhere (their outputs are zero-filled).
  bool supports_regions(Device /*device*/) const override { return true; }

 protected:
  WorkPtr do_all_reduce(const Tensor& tensor, ReduceOp op) override;
  WorkPtr do_all_reduce_out(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_gather(const Tensor& output, const Tensor& input) override;
  WorkPtr do_all_gather_into_regions(const Tensor& output, const Tensor& input,
                                     const std::vector<Shape>& offsets,
                                     const std::vector<Shape>& shapes) override;
  WorkPtr do_all_to_all_regions(const Tensor& output, const Tensor& input,
                                const std::vector<Shape>& send_offsets,
                                const std::vector<Shape>& send_shapes,
                                const std::vector<Shape>& recv_offsets,
                                const std::vector<Shape>& recv_shapes) override;
  WorkPtr do_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr do_all_to_all(const Tensor& output, const Tensor& input) override;
  WorkPtr do_broadcast(const Tensor& tensor, int root) override;
  WorkPtr do_scatter(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr do_send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr do_recv(const Tensor& tensor, int src, int tag) override;
  WorkPtr do_barrier() override;
  // MPI_Comm_split needs every member's color, which one process does not know: refused
  // (DeviceMesh builds its dims with create_group under the fake backend).
  std::shared_ptr<Communicator> do_split(int color, int key) override;
  // The members' communicator; this rank's place in `members` is its rank.
  std::shared_ptr<Communicator> do_create_group(const std::vector<int>& members) override;
  // Every rank's slot is taken to be this rank's (split() and meet() always exchange).
  WorkPtr do_exchange_slots(const void* mine, void* all, std::string_view what,
                            const Tensor* shape_of) override;
};

namespace detail {
// The fake world (world_size, rank) when fake_backend(), for the Runtime.
struct FakeWorld {
  int world_size = 1;
  int rank = 0;
};
// Null unless fake_backend(). The first call decides the backend for good (and, when fake,
// turns the consistency check off).
const FakeWorld* fake_world();
// The fake world's communicator over every rank, and one of this rank alone (for the Runtime).
CommunicatorPtr make_fake_world_communicator(const FakeWorld& w);
CommunicatorPtr make_fake_self_communicator(const FakeWorld& w);
}  // namespace detail

}  // namespace dtensor
