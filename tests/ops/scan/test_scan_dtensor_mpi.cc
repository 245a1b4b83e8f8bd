// cumsum / cumprod on DTensors along a sharded scanned dim (mpirun at 1, 2, 4 ranks): the blocks
// form a pipeline in global order (each passes the single-device scan's accumulator to the next,
// point to point; no gather of the dim). Results equal the single-device scan BIT FOR BIT
// (dt::equal compares bytes) for every dtype on 1-D and 2-D meshes with even, uneven and empty
// blocks: random data of mixed magnitudes (which the earlier all-gather-of-totals scheme, which
// regrouped the prefix, got wrong in the last bit), overflow that later cancels, NaN / inf in an
// earlier block, zeros and integer wrap; gradients equal the single-device ones. Communication
// is counted with CommDebugMode as point-to-point messages on this rank: one recv (from the
// previous block) unless first, one send (to the next) unless last, 8 bytes per row each.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::Placements;
using dt::Replicate;
using dt::Shard;
using dt::Tensor;

namespace {

// Values in {-1.5, -1, ..., 3.5}: one zero in every 11 consecutive elements.
Tensor data(dt::IntSpan shape, int salt, dt::DType dtype) {
  return tt::det_input(shape, salt, -1.5, 0.5, dt::kFloat64).to(dtype);
}

using ScanFn = Tensor (*)(const Tensor&, int64_t);
using DScanFn = DTensor (*)(const DTensor&, int64_t);

// Same dtype, shape and bytes (dt::equal is a memcmp; bool compares truth values).
bool same_bits(const Tensor& got, const Tensor& want) {
  return dt::equal(got, want);
}

// splitmix64: deterministic, the same on every rank.
uint64_t mix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with a full 53-bit mantissa.
double unit(uint64_t& state) {
  return static_cast<double>(mix(state) >> 11) * 0x1.0p-53;
}

// Random float64 data of mixed magnitudes for cumsum (signs and magnitudes 1e-6 .. 1e6, full
// mantissas: every partial sum rounds) or near 1 for cumprod (factors in [0.5, 2), full
// mantissas: every partial product rounds, none over- or underflows).
Tensor mixed(dt::IntSpan shape, uint64_t seed, bool prod) {
  const int64_t n = dt::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& e : v) {
    if (prod) {
      e = 0.5 + 1.5 * unit(seed);
    } else {
      const double sign = unit(seed) < 0.5 ? -1.0 : 1.0;
      e = sign * (1.0 + unit(seed)) * std::pow(10.0, std::floor(13.0 * unit(seed)) - 6.0);
    }
  }
  return dt::from_vector<double>(v, shape);
}

// The earlier scheme on w ranks of a 1-D mesh (torch.chunk blocks of a 1-D float64 vector):
// block j scanned from the (identity-started) fold of the earlier blocks' totals, each total
// accumulated from the identity. Used to show that the data below tells the schemes apart.
std::vector<double> regrouped_scan(const std::vector<double>& x, int64_t w, bool prod) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t chunk = (n + w - 1) / w;
  const auto op = [prod](double a, double b) { return prod ? a * b : a + b; };
  const double id = prod ? 1.0 : 0.0;
  std::vector<double> totals;
  for (int64_t lo = 0; lo < n; lo += chunk) {
    double t = id;
    for (int64_t i = lo; i < std::min(n, lo + chunk); ++i) t = op(t, x[i]);
    totals.push_back(t);
  }
  std::vector<double> out(x.size());
  double before = id;
  for (int64_t j = 0; j < static_cast<int64_t>(totals.size()); ++j) {
    double acc = op(before, id);
    for (int64_t i = j * chunk; i < std::min(n, (j + 1) * chunk); ++i) {
      acc = op(acc, x[i]);
      out[i] = acc;
    }
    before = op(before, totals[j]);
  }
  return out;
}

// The meshes of the bit-exactness suites: family_meshes (1-D over the world, [2, w/2] or
// [1, w]) and [1, w], so that a dim sharded only on the second mesh dim runs the pipeline.
std::vector<dt::DeviceMesh> scan_meshes() {
  std::vector<dt::DeviceMesh> m = tt::family_meshes();
  const int64_t w = dt::world_size();
  if (w % 2 == 0) m.push_back(tt::make_mesh({1, w}));
  return m;
}

// Checks op(distribute(x, mesh, p)) == op(x) bit for bit for every mesh of scan_meshes, every
// placement list of R / S(d) (d < x's ndim) and every dim: cumsum and cumprod, or only one
// (`only`: 0 cumsum, 1 cumprod).
void check_bits(const Tensor& x, const std::string& what, int only = -1) {
  const std::vector<std::pair<ScanFn, DScanFn>> ops = {
      {static_cast<ScanFn>(&dt::cumsum), static_cast<DScanFn>(&dt::cumsum)},
      {static_cast<ScanFn>(&dt::cumprod), static_cast<DScanFn>(&dt::cumprod)}};
  const int64_t nd = x.dim();
  for (const dt::DeviceMesh& mesh : scan_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), tt::shard_choices(nd, false), nd)) {
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      for (int64_t dim = 0; dim < nd; ++dim) {
        for (int o = 0; o < 2; ++o) {
          if (only >= 0 && o != only) continue;
          INFO(what << " " << tt::describe(mesh, {p}, x.sizes()) << " " << dt::dtype_name(x.dtype())
                    << " dim " << dim << (o == 0 ? " cumsum" : " cumprod"));
          const DTensor got = ops[o].second(dx, dim);
          const Tensor full = got.full_tensor();
          if (!mesh.contains_me()) continue;
          CHECK(got.placements() == dx.placements());
          CHECK(same_bits(full, ops[o].first(x, dim)));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("cumsum and cumprod along a sharded dim equal the single-device scan") {
  const int64_t w = dt::world_size();
  const std::vector<tt::Ints> shapes = {
      {3 * w + 1, 4}, {2 * w, 3}, {w > 1 ? w - 1 : 1, 5}, {2, 2 * w + 1, 3}, {0, 3}};
  const std::vector<std::pair<ScanFn, DScanFn>> ops = {
      {static_cast<ScanFn>(&dt::cumsum), static_cast<DScanFn>(&dt::cumsum)},
      {static_cast<ScanFn>(&dt::cumprod), static_cast<DScanFn>(&dt::cumprod)}};
  int salt = 0;
  for (dt::DType dtype :
       {dt::kFloat64, dt::kFloat32, dt::kBFloat16, dt::kInt64, dt::kInt32, dt::kBool}) {
    for (const tt::Ints& shape : shapes) {
      const Tensor x = data(shape, salt++, dtype);
      for (const dt::DeviceMesh& mesh : scan_meshes()) {
        for (const Placements& p : tt::placement_lists(
                 mesh.ndim(), tt::shard_choices(static_cast<int64_t>(shape.size()), false),
                 static_cast<int64_t>(shape.size()))) {
          const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
          for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
            for (const auto& [local, sharded] : ops) {
              INFO(tt::describe(mesh, {p}, shape)
                   << " " << dt::dtype_name(dtype) << " dim " << dim
                   << (local == ops[0].first ? " cumsum" : " cumprod"));
              const DTensor got = sharded(dx, dim);
              const Tensor full = got.full_tensor();
              if (!mesh.contains_me()) continue;
              // Where the scanned dim was sharded it stays sharded (no gather of the dim).
              CHECK(got.placements() == dx.placements());
              // Bit for bit (the blocks continue the single-device accumulator).
              CHECK(same_bits(full, local(x, dim)));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("random mixed-magnitude data: sharded cumsum / cumprod equal one device bit for bit") {
  const int64_t w = dt::world_size();
  // Rows long enough for several elements per block, uneven blocks and (w - 1 elements) empty
  // ones, the scanned dim first, last and in the middle.
  const std::vector<tt::Ints> shapes = {
      {5 * w + 3, 3}, {3, 5 * w + 3}, {w > 1 ? w - 1 : 1, 4}, {2, 4 * w + 1, 2}};
  uint64_t seed = 7;
  for (const tt::Ints& shape : shapes) {
    for (bool prod : {false, true}) {
      const Tensor x = mixed(shape, seed++, prod);
      for (dt::DType dtype : {dt::kFloat64, dt::kFloat32, dt::kBFloat16}) {
        check_bits(x.to(dtype), "mixed", prod ? 1 : 0);
      }
    }
  }
}

TEST_CASE("the random data tells a regrouped prefix from the single-device accumulation") {
  // The earlier scheme (totals from the identity, folded) differs from one device in the last
  // bit on this data from the third block on, so the suite above would fail with it at 4 ranks.
  const int64_t w = dt::world_size();
  if (w < 3) return;
  const int64_t n = 5 * w + 3;
  for (bool prod : {false, true}) {
    const Tensor x = mixed({n}, prod ? 101 : 100, prod);
    const std::vector<double> v = x.to_vector<double>();
    const std::vector<double> one =
        (prod ? dt::cumprod(x, 0) : dt::cumsum(x, 0)).to_vector<double>();
    const std::vector<double> old = regrouped_scan(v, w, prod);
    CHECK(std::memcmp(one.data(), old.data(), one.size() * sizeof(double)) != 0);
    const DTensor dx = dt::distribute_tensor(x, tt::make_mesh({w}), {Shard(0)}, std::nullopt);
    const Tensor got = (prod ? dt::cumprod(dx, 0) : dt::cumsum(dx, 0)).full_tensor();
    CHECK(same_bits(got, prod ? dt::cumprod(x, 0) : dt::cumsum(x, 0)));
  }
}

TEST_CASE("sharded scans keep overflow, underflow, inf and NaN exactly as one device") {
  const double big = 1e308, huge = 1e200, tiny = 1e-200;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // cumsum: 1e308 + 1e308 overflows at the third element and stays inf; a regrouped prefix
  // (1e308 + (1e308 - 1e308)) would give 1e308 back.
  const Tensor s = dt::from_vector<double>({big, 0, big, -big, 0, 0, 0, 0}, {8});
  {
    const std::vector<double> want = dt::cumsum(s, 0).to_vector<double>();
    CHECK(want[1] == big);
    CHECK(want[2] == inf);
    CHECK(want[7] == inf);
  }
  // cumprod: 1e200 * 1e200 overflows and inf * 1e-200 stays inf (a regrouped prefix gives 1).
  const Tensor q = dt::from_vector<double>({huge, 1, huge, tiny, tiny, 1, 1, 1}, {8});
  CHECK(dt::cumprod(q, 0).to_vector<double>()[7] == inf);
  // Underflow that a regrouped product would undo: 1e-200 * 1e-200 is 0 for good.
  const Tensor u = dt::from_vector<double>({tiny, 1, tiny, huge, huge, 1, 1, 1}, {8});
  CHECK(dt::cumprod(u, 0).to_vector<double>()[7] == 0.0);
  // NaN and inf in the first block, then finite data: every later element NaN (payload and
  // sign as one device makes them); inf then -inf gives NaN.
  const Tensor n = dt::from_vector<double>({1, nan, 2, 3, 4, 5, 6, 7}, {8});
  const Tensor i = dt::from_vector<double>({inf, 1, -inf, 2, 3, 4, 5, 6}, {8});
  // Zeros for cumprod: a -0.0 in the first block, an inf after it (0 * inf = NaN).
  const Tensor z = dt::from_vector<double>({2, -0.0, 3, -1, inf, 1, 1, 1}, {8});
  // float32 overflow of the output only: the float64 accumulator carries on past FLT_MAX.
  const Tensor f = dt::from_vector<double>({3e38, 3e38, -3e38, -3e38, 1, 1, 1, 1}, {8});
  for (const Tensor& x : {s, q, u, n, i, z}) {
    check_bits(x, "special");
    check_bits(x.reshape({2, 4}).transpose(0, 1).contiguous(), "special 2-d");
  }
  check_bits(f.to(dt::kFloat32), "float32 overflow", 0);
}

TEST_CASE("a sharded cumprod sends one accumulator per row to the next block, no gather") {
  const int64_t w = dt::world_size();
  const Tensor x = data({5, 64 * w + 3}, 1, dt::kFloat32);
  // 1-D mesh: block p receives from p - 1 and sends to p + 1 (rank = block on this mesh).
  {
    const dt::DeviceMesh mesh = tt::make_mesh({w});
    const int64_t p = mesh.get_local_rank(0);
    const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(1)}, std::nullopt);
    dt::CommDebugMode comm;
    const DTensor y = dt::cumprod(dx, 1);
    const int64_t sends = p + 1 < w ? 1 : 0, recvs = p > 0 ? 1 : 0;
    CHECK(comm.count(dt::CollectiveKind::kSend) == sends);
    CHECK(comm.count(dt::CollectiveKind::kRecv) == recvs);
    CHECK(comm.count(dt::CollectiveKind::kAllGather) == 0);
    CHECK(comm.total_count() == sends + recvs);
    // One float64 accumulator per row, not the dim.
    CHECK(comm.bytes(dt::CollectiveKind::kSend) == sends * 5 * 8);
    CHECK(comm.bytes(dt::CollectiveKind::kRecv) == recvs * 5 * 8);
    CHECK(same_bits(y.full_tensor(), dt::cumprod(x, 1)));
  }
  // 2x2 mesh, [S(1), S(1)]: block = 2 * coord0 + coord1 along the flattened mesh dims.
  if (w == 4) {
    const dt::DeviceMesh mesh = tt::make_mesh({2, 2});
    const DTensor dx = dt::distribute_tensor(x, mesh, {Shard(1), Shard(1)}, std::nullopt);
    (void)dt::cumprod(dx, 1);  // creates the flattened communicator
    const int64_t p = 2 * mesh.get_local_rank(0) + mesh.get_local_rank(1);
    dt::CommDebugMode comm;
    const DTensor y = dt::cumsum(dx, 1);
    CHECK(comm.count(dt::CollectiveKind::kSend) == (p < 3 ? 1 : 0));
    CHECK(comm.count(dt::CollectiveKind::kRecv) == (p > 0 ? 1 : 0));
    CHECK(comm.total_count() == (p < 3 ? 1 : 0) + (p > 0 ? 1 : 0));
    CHECK(same_bits(y.full_tensor(), dt::cumsum(x, 1)));
    // A mesh dim that does not shard the scanned dim communicates nothing: [S(1), S(0)]
    // pipelines over mesh dim 0 alone (the two coordinates of mesh dim 1 are separate groups).
    const DTensor dz = dt::distribute_tensor(x, mesh, {Shard(1), Shard(0)}, std::nullopt);
    dt::CommDebugMode comm2;
    const DTensor z = dt::cumprod(dz, 1);
    CHECK(comm2.total_count() == 1);
    CHECK(same_bits(z.full_tensor(), dt::cumprod(x, 1)));
  }
}

TEST_CASE("a sharded scan runs nothing on mesh dims of one rank") {
  const int64_t w = dt::world_size();
  const Tensor x = data({3 * w + 1, 2 * w + 1}, 3, dt::kFloat64);
  for (const tt::Ints& shape : {tt::Ints{w, 1}, tt::Ints{1, w}, tt::Ints{1}}) {
    const dt::DeviceMesh mesh = tt::make_mesh(shape);
    for (const Placements& p :
         tt::all_placements({Replicate(), Shard(0), Shard(1), dt::Partial()}, shape.size())) {
      const DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
      for (int64_t dim : {0, 1}) {
        INFO(tt::describe(mesh, {p}, x.sizes()) << " dim " << dim);
        dt::CommDebugMode comm;
        const DTensor s = dt::cumsum(dx, dim);
        const DTensor q = dt::cumprod(dx, dim);
        CHECK(comm.single_rank_count() == 0);
        if (mesh.size() == 1) CHECK(comm.total_count() == 0);
        const Tensor fs = s.full_tensor(), fq = q.full_tensor();
        if (!mesh.contains_me()) continue;
        // Partial(sum) inputs hold x on one rank and zeros elsewhere: exact here too.
        CHECK(same_bits(fs, dt::cumsum(x, dim)));
        CHECK(same_bits(fq, dt::cumprod(x, dim)));
      }
    }
  }
}

TEST_CASE("sharded cumprod: zeros and wrapping integers") {
  const int64_t w = dt::world_size();
  const int64_t n = 7 * w + 2;
  for (const dt::DeviceMesh& mesh : scan_meshes()) {
    for (const Placements& p : tt::placement_lists(mesh.ndim(), {Replicate(), Shard(0)}, 1)) {
      INFO(tt::describe(mesh, {p}, {n}));
      // A zero in the first block: every later element is 0 (and -0.0 where the sign says so).
      std::vector<double> v(n, -1.25);
      v[1] = 0.0;
      const Tensor z = dt::from_vector<double>(v, {n});
      CHECK(same_bits(dt::cumprod(dt::distribute_tensor(z, mesh, p, std::nullopt), 0).full_tensor(),
                      dt::cumprod(z, 0)));
      // int64 products and sums that overflow wrap exactly as on one device (mod 2^64); int32
      // and bool scan into int64.
      std::vector<int64_t> big(n);
      for (int64_t i = 0; i < n; ++i) big[i] = 1000003 + 7 * i;
      big[n / 2] = std::numeric_limits<int64_t>::max();
      const Tensor b = dt::from_vector<int64_t>(big, {n});
      // int32 near its limit (the int64 accumulator does not wrap there) and bool.
      std::vector<int32_t> i32(n);
      std::vector<bool> flags(n);
      for (int64_t i = 0; i < n; ++i) {
        i32[i] = (i % 3 == 0 ? -1 : 1) * (2147483647 - static_cast<int32_t>(i));
        flags[i] = i % 5 != 3;
      }
      const Tensor c = dt::from_vector<int32_t>(i32, {n});
      const Tensor f = dt::from_vector<bool>(flags, {n});
      for (const Tensor& t : {b, c, f}) {
        const DTensor d = dt::distribute_tensor(t, mesh, p, std::nullopt);
        CHECK(same_bits(dt::cumprod(d, 0).full_tensor(), dt::cumprod(t, 0)));
        CHECK(same_bits(dt::cumsum(d, 0).full_tensor(), dt::cumsum(t, 0)));
      }
    }
  }
}

TEST_CASE("gradients of a cumprod / cumsum along a sharded dim equal the single-device ones") {
  const int64_t w = dt::world_size();
  for (const tt::Ints& shape : {tt::Ints{3 * w + 1, 3}, tt::Ints{w > 1 ? w - 1 : 1, 2}}) {
    // Zeros in the data (one per 11 elements) exercise cumprod_backward's exact zero handling.
    const Tensor x = tt::det_input(shape, 2, -1.5, 0.5, dt::kFloat64);
    const Tensor g = tt::det_input(shape, 5, -1.0, 0.25, dt::kFloat64);
    for (bool prod : {true, false}) {
      // Single device: d/dx sum(g * scan(x)).
      DTensor ref;
      {
        const dt::DeviceMesh whole = tt::make_mesh({w});  // replicated: the full computation
        DTensor rx = dt::distribute_tensor(x, whole, {Replicate()}, std::nullopt);
        rx.requires_grad_();
        const DTensor rg = dt::distribute_tensor(g, whole, {Replicate()}, std::nullopt);
        const DTensor y = prod ? dt::cumprod(rx, 0) : dt::cumsum(rx, 0);
        dt::sum(dt::mul(y, rg)).backward();
        ref = rx.grad();
      }
      const Tensor want = ref.full_tensor();
      for (const dt::DeviceMesh& mesh : scan_meshes()) {
        for (const Placements& p : tt::placement_lists(mesh.ndim(), {Replicate(), Shard(0)}, 2)) {
          INFO(tt::describe(mesh, {p}, shape) << (prod ? " cumprod" : " cumsum"));
          DTensor dx = dt::distribute_tensor(x, mesh, p, std::nullopt);
          dx.requires_grad_();
          const DTensor dg = dt::distribute_tensor(g, mesh, p, std::nullopt);
          const DTensor y = prod ? dt::cumprod(dx, 0) : dt::cumsum(dx, 0);
          dt::sum(dt::mul(y, dg)).backward();
          REQUIRE(dx.grad().defined());
          CHECK(dx.grad().placements() == dx.placements());
          const Tensor got = dx.grad().full_tensor();
          // Bit for bit too: the reversed cumsum runs the same pipeline, cumprod_backward
          // gathers the dim and runs the single-device kernel.
          if (mesh.contains_me()) CHECK(same_bits(got, want));
        }
      }
    }
  }
}
