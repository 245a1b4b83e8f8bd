// Communicator::all_gather_into_dim: each rank's piece lands straight in its place along a
// non-leading dim. The result must equal the copy-based gather (all_gather into a contiguous
// buffer, then each block copied into output.narrow(dim, ...)) bit for bit, for even, uneven
// and empty pieces, with the consistency check on (inline and data paths) and off.
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

// Rank r's piece: shape `full` with dim `dim` = sizes[r], element i = r * 1000 + i.
Tensor piece(const Shape& full, int64_t dim, const std::vector<int64_t>& sizes, int r) {
  Shape s = full;
  s[static_cast<size_t>(dim)] = sizes[static_cast<size_t>(r)];
  int64_t numel = 1;
  for (int64_t v : s) numel *= v;
  return make_tensor<float>(numel, [&](int64_t i) { return r * 1000.0 + static_cast<double>(i); })
      .view(s);
}

// The copy-based reference, computed locally from every rank's known piece.
Tensor reference(const Shape& full, int64_t dim, const std::vector<int64_t>& sizes) {
  Tensor out = zeros(full, TensorOptions(kFloat32));
  int64_t off = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] > 0) {
      out.narrow(dim, off, sizes[r]).copy_(piece(full, dim, sizes, static_cast<int>(r)));
    }
    off += sizes[r];
  }
  return out;
}

void check_gather(Communicator& comm, const Shape& shape, int64_t dim,
                  const std::vector<int64_t>& sizes) {
  Shape full = shape;
  int64_t sum = 0;
  for (int64_t s : sizes) sum += s;
  full[static_cast<size_t>(dim)] = sum;
  INFO("shape " << shape_str(full) << " dim " << dim << " sizes "
                << shape_str(Shape(sizes.begin(), sizes.end())));
  Tensor out = dtensor::full(full, -1.0, TensorOptions(kFloat32));  // unwritten elements show
  comm.all_gather_into_dim(out, piece(full, dim, sizes, comm.rank()), dim, sizes)->wait();
  const Tensor ref = reference(full, dim, sizes);
  CHECK(out.to_vector<float>() == ref.to_vector<float>());
}

}  // namespace

TEST_CASE("all_gather_into_dim equals the copy-based gather on even, uneven and empty pieces",
          "[collectives][all_gather]") {
  auto comm = world_communicator();
  const int n = comm->size();
  const CollectiveCheckMode mode = GENERATE(CollectiveCheckMode::kOn, CollectiveCheckMode::kOff);
  set_collective_check_mode(mode);
  // Rows of 3 x 5 x 4: big enough (scale 40) that the check's inline path is not taken.
  const int64_t scale = GENERATE(int64_t{1}, int64_t{40});
  const Shape shape{3 * scale, 5, 4};
  for (int64_t dim = 0; dim < 3; ++dim) {
    std::vector<int64_t> even(static_cast<size_t>(n), 2), uneven, empty_last;
    for (int r = 0; r < n; ++r) {
      uneven.push_back((r * 3 + 1) % 4);  // 1, 0, 3, 2, ...: zero pieces included
      empty_last.push_back(r == n - 1 ? 0 : 3);
    }
    INFO("mode " << static_cast<int>(mode) << " scale " << scale);
    check_gather(*comm, shape, dim, even);
    check_gather(*comm, shape, dim, uneven);
    check_gather(*comm, shape, dim, empty_last);
  }
  // A 1-d output and an output with an empty outer dim.
  check_gather(*comm, Shape{7}, 0, std::vector<int64_t>(static_cast<size_t>(n), 3));
  check_gather(*comm, Shape{0, 6}, 1, std::vector<int64_t>(static_cast<size_t>(n), 2));
  // Small enough for the check's inline path, uneven with empty pieces.
  std::vector<int64_t> alternate;
  for (int r = 0; r < n; ++r) alternate.push_back(r % 2);
  check_gather(*comm, Shape{2, 0, 3}, 1, alternate);
  set_collective_check_mode(CollectiveCheckMode::kOn);
}

TEST_CASE("all_gather_into_dim refuses sizes that do not match the tensors",
          "[collectives][all_gather]") {
  auto comm = world_communicator();
  const int n = comm->size();
  Tensor out = zeros({2, 3 * n}, TensorOptions(kFloat32));
  Tensor in = zeros({2, 3}, TensorOptions(kFloat32));
  std::vector<int64_t> wrong(static_cast<size_t>(n), 2);  // sums to 2n, not 3n
  CHECK_THROWS_WITH(comm->all_gather_into_dim(out, in, 1, wrong),
                    Catch::Contains("[all_gather]") && Catch::Contains("sizes sum to"));
  CHECK_THROWS_WITH(comm->all_gather_into_dim(out, in, 2, wrong),
                    Catch::Contains("[all_gather]") && Catch::Contains("one size per rank"));
  // A plain all_gather afterwards still pairs up: the refused calls took sequence numbers on
  // every rank alike.
  Tensor g = zeros({n}, TensorOptions(kFloat32));
  comm->all_gather(g, ones({1}, TensorOptions(kFloat32)))->wait();
  CHECK(g.to_vector<float>() == std::vector<float>(static_cast<size_t>(n), 1.0f));
}

// all_gather_into_regions: rank r's block lands at its own offset in a 2-d grid of blocks
// (a [rows, cols] output cut into a grid of rank blocks, as a tensor sharded over two
// flattened mesh dims), uneven and empty blocks included, every element placed or left as it
// was, on the inline and the data path.
TEST_CASE("all_gather_into_regions places each rank's block at its offset",
          "[collectives][all_gather]") {
  auto comm = world_communicator();
  const int n = comm->size();
  const CollectiveCheckMode mode = GENERATE(CollectiveCheckMode::kOn, CollectiveCheckMode::kOff);
  set_collective_check_mode(mode);
  // Blocks laid out on a grid of g0 x g1 ranks (g1 = 2 when n is even).
  const int g1 = n % 2 == 0 ? 2 : 1, g0 = n / g1;
  for (const Shape& full : {Shape{2 * g0, 3 * g1}, Shape{7 * g0 + 1, 40 * g1 + 3}, Shape{1, 5}}) {
    INFO("output " << shape_str(full) << " mode " << static_cast<int>(mode));
    std::vector<Shape> offsets, shapes;
    for (int r = 0; r < n; ++r) {
      // torch.chunk bounds of each grid dim.
      auto bounds = [](int64_t m, int64_t k, int64_t i) {
        const int64_t c = (m + k - 1) / k;
        const int64_t lo = std::min(m, c * i);
        return std::make_pair(lo, std::min(m, lo + c) - lo);
      };
      const auto [o0, s0] = bounds(full[0], g0, r / g1);
      const auto [o1, s1] = bounds(full[1], g1, r % g1);
      offsets.push_back({o0, o1});
      shapes.push_back({s0, s1});
    }
    auto block = [&](int r) {
      const Shape& sh = shapes[static_cast<size_t>(r)];
      return make_tensor<float>(sh[0] * sh[1], [&](int64_t i) { return r * 1000.0 + i; }).view(sh);
    };
    Tensor out = dtensor::full(full, -1.0, TensorOptions(kFloat32));
    CommDebugMode debug;
    comm->all_gather_into_regions(out, block(comm->rank()), offsets, shapes)->wait();
    CHECK(debug.count(CollectiveKind::kAllGather) == 1);
    Tensor ref = dtensor::full(full, -1.0, TensorOptions(kFloat32));
    for (int r = 0; r < n; ++r) {
      const Shape& o = offsets[static_cast<size_t>(r)];
      const Shape& sh = shapes[static_cast<size_t>(r)];
      if (sh[0] * sh[1] > 0) ref.narrow(0, o[0], sh[0]).narrow(1, o[1], sh[1]).copy_(block(r));
    }
    CHECK(out.to_vector<float>() == ref.to_vector<float>());
  }
  set_collective_check_mode(CollectiveCheckMode::kOn);
  // A region outside the output is refused on the rank that passes it.
  Tensor out = zeros({2, 2}, TensorOptions(kFloat32));
  std::vector<Shape> offsets(static_cast<size_t>(n), Shape{1, 1}),
      shapes(static_cast<size_t>(n), Shape{2, 1});
  CHECK_THROWS_WITH(
      comm->all_gather_into_regions(out, zeros({2, 1}, TensorOptions(kFloat32)), offsets, shapes),
      Catch::Contains("[all_gather]") && Catch::Contains("not inside the output"));
  Tensor g = zeros({n}, TensorOptions(kFloat32));
  comm->all_gather(g, ones({1}, TensorOptions(kFloat32)))->wait();
  CHECK(g.to_vector<float>() == std::vector<float>(static_cast<size_t>(n), 1.0f));
}

}  // namespace dtensor::test
