// Collectives whose pieces differ in size by rank (all_to_all_regions, all_gather_into_dim,
// all_gather_into_regions):
// ranks that agree on the fingerprint but describe the exchange differently (one rank expects
// a piece of another size than its peer sends, as when the ranks hold different global shapes
// for one DTensor) raise dtensor::Error on every rank before any data moves, naming the pairs
// that disagree, instead of MPI taking a shorter piece as it is. Each case runs on a
// communicator of its own (the raised call leaves the world's untouched) and checks that the
// ranks are still in step afterwards.
#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {
namespace {

using Catch::Contains;

// A plain all_gather pairs up on `comm` (the ranks are in step).
void check_in_step(Communicator& comm) {
  const int n = comm.size();
  Tensor g = zeros({n}, TensorOptions(kFloat32));
  comm.all_gather(g, ones({1}, TensorOptions(kFloat32)))->wait();
  CHECK(g.to_vector<float>() == std::vector<float>(static_cast<size_t>(n), 1.0f));
}

std::string pair_text(int from, int64_t sent, int to, int64_t expected) {
  return "rank " + std::to_string(from) + " sends " + std::to_string(sent) + " bytes to rank " +
         std::to_string(to) + ", which expects " + std::to_string(expected) + " from it";
}

}  // namespace

TEST_CASE("all_to_all_regions: a rank expecting another piece size raises on every rank",
          "[collectives][all_to_all][check]") {
  auto world = world_communicator();
  const int n = world->size();
  auto comm = world->split(0, world->rank());
  const int last = n - 1;
  const std::vector<Shape> at0(static_cast<size_t>(n), Shape{0, 0});
  const std::vector<Shape> one(static_cast<size_t>(n), Shape{1, 1});
  const Tensor in = ones({2, 2}, TensorOptions(kFloat32));
  Tensor out = zeros({2, 2}, TensorOptions(kFloat32));
  // Agreeing ranks exchange one element with each peer.
  comm->all_to_all_regions(out, in, at0, one, at0, one)->wait();
  CHECK(out.to_vector<float>() == std::vector<float>{1, 0, 0, 0});
  if (n < 2) return;  // one rank has no peer to disagree with
  // The last rank expects two elements from rank 0, which sends one.
  std::vector<Shape> recv = one;
  if (comm->rank() == last) recv[0] = Shape{1, 2};
  out.zero_();
  CHECK_THROWS_WITH(comm->all_to_all_regions(out, in, at0, one, at0, recv)->wait(),
                    Contains("[all_to_all] ranks disagree on the sizes of the pieces") &&
                        Contains(pair_text(0, 4, last, 8)));
  CHECK(out.to_vector<float>() == std::vector<float>(4, 0.0f));  // nothing moved
  check_in_step(*comm);
}

TEST_CASE("all_gather_into_dim: sizes that differ by rank raise on every rank",
          "[collectives][all_gather][check]") {
  auto world = world_communicator();
  const int n = world->size();
  auto comm = world->split(0, world->rank());
  const int last = n - 1;
  {  // Agreeing ranks: one row each.
    Tensor out = zeros({n, 3}, TensorOptions(kFloat32));
    comm->all_gather_into_dim(out, ones({1, 3}, TensorOptions(kFloat32)), 0,
                              std::vector<int64_t>(static_cast<size_t>(n), 1))
        ->wait();
    CHECK(out.to_vector<float>() == std::vector<float>(static_cast<size_t>(3 * n), 1.0f));
  }
  if (n < 2) return;  // one rank has no peer to disagree with
  // One row of `cols` floats per rank; the last rank believes rank 0 has two rows and itself
  // none (the same total, so the fingerprints agree).
  for (const int64_t cols : {int64_t{64}, int64_t{1}}) {  // the data path, then the inline one
    INFO("cols " << cols);
    std::vector<int64_t> sizes(static_cast<size_t>(n), 1);
    if (comm->rank() == last) {
      sizes[0] = 2;
      sizes[static_cast<size_t>(last)] = 0;
    }
    const int64_t mine = sizes[static_cast<size_t>(comm->rank())];
    const Tensor in = ones({mine, cols}, TensorOptions(kFloat32));
    Tensor out = zeros({n, cols}, TensorOptions(kFloat32));
    const int64_t row = cols * 4;
    if (row * n > 192) {
      // Not inline: the slots carry each rank's table, so the report names the pairs.
      CHECK_THROWS_WITH(comm->all_gather_into_dim(out, in, 0, sizes)->wait(),
                        Contains("[all_gather] ranks disagree on the sizes of the pieces") &&
                            Contains(pair_text(0, row, last, 2 * row)));
    } else {
      CHECK_THROWS_WITH(comm->all_gather_into_dim(out, in, 0, sizes)->wait(),
                        Contains("[all_gather] ranks disagree on the sizes of the pieces"));
    }
    CHECK(out.to_vector<float>() == std::vector<float>(static_cast<size_t>(n * cols), 0.0f));
    check_in_step(*comm);
  }
}

TEST_CASE("all_gather_into_regions: region shapes that differ by rank raise on every rank",
          "[collectives][all_gather][check]") {
  auto world = world_communicator();
  const int n = world->size();
  auto comm = world->split(0, world->rank());
  const int last = n - 1;
  // Rank r's block is rows [2r, 2r + 2) x all 32 columns of a [2n, 32] output.
  constexpr int64_t kCols = 32;
  std::vector<Shape> offsets, shapes;
  for (int r = 0; r < n; ++r) {
    offsets.push_back({2 * r, 0});
    shapes.push_back({2, kCols});
  }
  const Tensor in = ones({2, kCols}, TensorOptions(kFloat32));
  {  // Agreeing ranks fill the whole output.
    Tensor out = zeros({2 * n, kCols}, TensorOptions(kFloat32));
    comm->all_gather_into_regions(out, in, offsets, shapes)->wait();
    CHECK(out.to_vector<float>() == std::vector<float>(static_cast<size_t>(2 * n * kCols), 1.0f));
  }
  if (n < 2) return;  // one rank has no peer to disagree with
  // The last rank believes rank 0's block has one row: the regions' total differs from the
  // output, but the fingerprint (the output's size) does not, so only the sizes tell.
  std::vector<Shape> mine = shapes;
  if (comm->rank() == last) mine[0] = Shape{1, kCols};
  Tensor out = zeros({2 * n, kCols}, TensorOptions(kFloat32));
  const int64_t block = 2 * kCols * 4;
  CHECK_THROWS_WITH(comm->all_gather_into_regions(out, in, offsets, mine)->wait(),
                    Contains("[all_gather] ranks disagree on the sizes of the pieces") &&
                        Contains(pair_text(0, block, last, block / 2)));
  CHECK(out.to_vector<float>() == std::vector<float>(static_cast<size_t>(2 * n * kCols), 0.0f));
  check_in_step(*comm);
}

}  // namespace dtensor::test
