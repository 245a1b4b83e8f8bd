// Communicator::all_to_all_regions: region k of each rank's input goes straight to rank k and
// lands in that rank's region for the sender, with no packing on either side. A global
// [rows, cols] grid is held by row blocks before and by column blocks after (and back), with
// uneven and empty blocks; every element must arrive at its place and nothing else be written,
// with the consistency check on and off. Also: the fingerprint (kind, dtype, "regions") is
// compared like any other collective's, and bad regions are refused before anything moves.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "tests/collectives/collective_test_util.h"

namespace dtensor::test {
namespace {

// Uneven blocks of m over n ranks with empty ones: sizes 0, 1, 2, 0, 1, 2, ... scaled to sum
// to m (the remainder goes to the last rank).
std::vector<std::pair<int64_t, int64_t>> uneven_blocks(int64_t m, int n) {
  std::vector<int64_t> size(static_cast<size_t>(n));
  int64_t total = 0;
  for (int r = 0; r < n; ++r)
    total += size[static_cast<size_t>(r)] = std::min<int64_t>(r % 3, m - total);
  size.back() += m - total;
  std::vector<std::pair<int64_t, int64_t>> out;  // (offset, size)
  int64_t off = 0;
  for (int64_t s : size) {
    out.emplace_back(off, s);
    off += s;
  }
  return out;
}

// Element (i, j) of the global grid.
float value(int64_t i, int64_t j) {
  return static_cast<float>(i * 1000 + j);
}

// The block [r0, r0 + rs) x [c0, c0 + cs) of the global grid.
Tensor grid_block(int64_t r0, int64_t rs, int64_t c0, int64_t cs) {
  return make_tensor<float>(rs * cs, [&](int64_t k) { return value(r0 + k / cs, c0 + k % cs); })
      .view({rs, cs});
}

}  // namespace

TEST_CASE("all_to_all_regions moves row blocks to column blocks and back, in place",
          "[collectives][all_to_all]") {
  auto comm = world_communicator();
  if (!comm->supports_regions(kCPU)) return;
  const int n = comm->size();
  const int me = comm->rank();
  const CollectiveCheckMode mode = GENERATE(CollectiveCheckMode::kOn, CollectiveCheckMode::kOff);
  set_collective_check_mode(mode);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{3 * n, 2 * n},
                                   std::pair<int64_t, int64_t>{2 * n + 1, 5 * n - 1}}) {
    INFO("grid [" << rows << ", " << cols << "] mode " << static_cast<int>(mode));
    const auto row_blocks = uneven_blocks(rows, n);
    const auto col_blocks = uneven_blocks(cols, n);
    const auto [my_r0, my_rs] = row_blocks[static_cast<size_t>(me)];
    const auto [my_c0, my_cs] = col_blocks[static_cast<size_t>(me)];
    // Rows -> columns: the piece for rank k is a strided column range of my rows; rank k's
    // piece lands as a contiguous row range of my columns.
    std::vector<Shape> so, ss, ro, rs;
    for (int k = 0; k < n; ++k) {
      const auto [c0, cs] = col_blocks[static_cast<size_t>(k)];
      const auto [r0, rsz] = row_blocks[static_cast<size_t>(k)];
      so.push_back({0, c0});
      ss.push_back({my_rs, cs});
      ro.push_back({r0, 0});
      rs.push_back({rsz, my_cs});
    }
    const Tensor mine_rows = grid_block(my_r0, my_rs, 0, cols);
    Tensor by_cols = full({rows, my_cs}, -1.0f);
    CommDebugMode debug;
    comm->all_to_all_regions(by_cols, mine_rows, so, ss, ro, rs)->wait();
    CHECK(debug.count(CollectiveKind::kAllToAll) == 1);
    CHECK(by_cols.to_vector<float>() == grid_block(0, rows, my_c0, my_cs).to_vector<float>());
    // And back: the receive regions are now the strided ones.
    Tensor by_rows = full({my_rs, cols}, -1.0f);
    comm->all_to_all_regions(by_rows, by_cols, ro, rs, so, ss)->wait();
    CHECK(by_rows.to_vector<float>() == mine_rows.to_vector<float>());
    // Regions need not cover the output: what no region names is left as it was (every rank
    // takes part, even one with an empty output: the call is collective).
    const std::vector<Shape> none(static_cast<size_t>(n), Shape{0, 0});
    Tensor untouched = full({rows, my_cs}, -1.0f);
    comm->all_to_all_regions(untouched, mine_rows, none, none, none, none)->wait();
    CHECK(untouched.to_vector<float>() == full({rows, my_cs}, -1.0f).to_vector<float>());
  }
  set_collective_check_mode(CollectiveCheckMode::kOn);
}

TEST_CASE("all_to_all_regions refuses bad regions and is fingerprinted as an all_to_all",
          "[collectives][all_to_all]") {
  auto comm = world_communicator();
  if (!comm->supports_regions(kCPU)) return;
  const int n = comm->size();
  const std::vector<Shape> at0(static_cast<size_t>(n), Shape{0, 0});
  const std::vector<Shape> one(static_cast<size_t>(n), Shape{1, 1});
  const Tensor in = zeros({2, 2}, TensorOptions(kFloat32));
  Tensor out = zeros({2, 2}, TensorOptions(kFloat32));
  // Outside the input, or the wrong number of regions: refused before anything moves.
  const std::vector<Shape> outside(static_cast<size_t>(n), Shape{2, 0});
  CHECK_THROWS_WITH(comm->all_to_all_regions(out, in, outside, one, at0, one),
                    Catch::Contains("[all_to_all]") && Catch::Contains("input region") &&
                        Catch::Contains("not inside the input"));
  const std::vector<Shape> too_many(static_cast<size_t>(n) + 1, Shape{0, 0});
  CHECK_THROWS_WITH(comm->all_to_all_regions(out, in, at0, one, too_many, too_many),
                    Catch::Contains("[all_to_all]") && Catch::Contains("one region per rank"));
  // Still in step: a plain collective pairs up.
  Tensor g = zeros({n}, TensorOptions(kFloat32));
  comm->all_gather(g, ones({1}, TensorOptions(kFloat32)))->wait();
  CHECK(g.to_vector<float>() == std::vector<float>(static_cast<size_t>(n), 1.0f));
  if (n < 2) return;
  // One rank exchanges regions while the others issue a plain all_to_all: every rank raises,
  // naming both (the region form has no element count). On a communicator of its own, so that
  // the raised call leaves the world's untouched.
  comm = comm->split(0, comm->rank());
  auto run = [&] {
    if (comm->rank() == n - 1) {
      return comm->all_to_all_regions(out, in, at0, one, at0, one)->wait();
    }
    Tensor a = zeros({n}, TensorOptions(kFloat32)), b = zeros({n}, TensorOptions(kFloat32));
    comm->all_to_all(b, a)->wait();
  };
  CHECK_THROWS_WITH(run(),
                    Catch::Contains("collective mismatch") &&
                        Catch::Contains("all_to_all(float32, regions)") &&
                        Catch::Contains("all_to_all(float32, " + std::to_string(n) + " element"));
}

}  // namespace dtensor::test
