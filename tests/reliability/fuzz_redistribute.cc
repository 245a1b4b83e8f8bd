// Redistribute fuzzer (mpirun). Each case draws a mesh that fits the world (1-3 dims, size-1
// dims, meshes smaller than the world), a shape (1-3 dims, sizes 0..2*world+3: empty and
// uneven shards), a dtype, a source placement list (R, S(d), P(sum|avg|max|min) for numeric
// dtypes) and a chain of 3-6 target placement lists. The source is built with
// distribute_tensor (from rank 0 or from every rank) or from_local (local values whose
// reduction is exactly the full tensor), then redistributed step by step; after every step
// full_tensor() must equal the full tensor bit for bit, the local shard must have the shape of
// compute_local_shape_and_offset and, without Partial, the content of that block.
//
// Values are small integers, so every sum, avg, max and min is exact in every dtype. Chains
// only request exact transitions: a Partial op changes only sum -> avg, or avg -> sum on a
// floating dtype over a power-of-two mesh dim (dividing by 3 is not exact).
//
// Configuration: see fuzz_util.h (DTENSOR_FUZZ_SEED / _CASES / _ENTRY / _CASE / _SECONDS). On
// a failure rank 0 prints the seed, the case index and the whole case; rerun it alone with
// DTENSOR_FUZZ_SEED=<seed> DTENSOR_FUZZ_CASE=<index> mpirun -np <N> fuzz_redistribute.
#include <catch2/catch.hpp>
#include <exception>
#include <string>
#include <vector>

#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/compare.h"
#include "tests/reliability/fuzz_util.h"

namespace dtensor::fuzz {
namespace {

constexpr ReduceOp kPartialOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

enum class Build { kDistributeFromRank0, kDistributeEverywhere, kFromLocal, kFromLocalChecked };

const char* build_name(Build b) {
  switch (b) {
    case Build::kDistributeFromRank0:
      return "distribute_tensor(src_data_rank=0)";
    case Build::kDistributeEverywhere:
      return "distribute_tensor(src_data_rank=nullopt)";
    case Build::kFromLocal:
      return "from_local";
    case Build::kFromLocalChecked:
      return "from_local(run_check=true)";
  }
  return "?";
}

struct Case {
  uint64_t seed = 0;  // per-case seed
  int64_t index = 0;
  Shape mesh;
  bool reversed = false;  // mesh ranks in reverse order
  bool packed = false;    // MPI region placement off: collectives pack blocks (as for CUDA)
  Shape shape;
  DType dtype = kFloat32;
  Build build = Build::kFromLocal;
  Placements src;
  std::vector<Placements> chain;

  std::string str() const {
    std::string s = "case " + std::to_string(index) + ": mesh " + shape_str(mesh) +
                    (reversed ? " (ranks reversed)" : "") + (packed ? " (packed)" : "") +
                    ", shape " + shape_str(shape) + ", " + std::string(dtype_name(dtype)) +
                    ", built by " + build_name(build) + ", source " + placements_str(src) +
                    ", chain";
    for (const Placements& p : chain) s += " -> " + placements_str(p);
    return s;
  }
};

bool is_pow2(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// Whether moving mesh dim `m` from `from` to `to` has an exact plan for this case's values.
bool exact_transition(const Placement& from, const Placement& to, DType dtype, int64_t n) {
  if (!from.is_partial() || !to.is_partial() || from == to) return true;
  const ReduceOp a = from.reduce_op();
  const ReduceOp b = to.reduce_op();
  if (a == ReduceOp::kSum && b == ReduceOp::kAvg) return true;
  if (a == ReduceOp::kAvg && b == ReduceOp::kSum) return is_floating(dtype) && is_pow2(n);
  return false;
}

Placement random_placement(Rng& rng, int64_t tensor_ndim, DType dtype) {
  const int64_t kinds = dtype == kBool ? 2 : 3;
  switch (rng.uniform(0, kinds - 1)) {
    case 0:
      return Replicate();
    case 1:
      // Shard needs a dim; a 0-d tensor never occurs (shapes have >= 1 dim).
      return Shard(rng.chance(15) ? -1 - rng.uniform(0, tensor_ndim - 1)
                                  : rng.uniform(0, tensor_ndim - 1));
    default:
      return Partial(kPartialOps[rng.uniform(0, 3)]);
  }
}

// Normalised placement (negative Shard dims as the spec stores them).
Placement normalised(const Placement& p, int64_t ndim) {
  return p.is_shard() && p.dim() < 0 ? Shard(p.dim() + ndim) : p;
}

Case draw_case(uint64_t base_seed, int64_t index, int world) {
  Case c;
  c.index = index;
  c.seed =
      mix(base_seed, static_cast<uint64_t>(index), 0x7265646973ull, static_cast<uint64_t>(world));
  Rng rng(c.seed);
  c.mesh = random_mesh_shape(rng, world);
  c.reversed = rng.chance(25);
  c.shape = random_tensor_shape(rng, world);
  c.dtype = random_dtype(rng);
  c.build = static_cast<Build>(rng.uniform(0, 3));
  const int64_t nd = static_cast<int64_t>(c.shape.size());
  for (size_t m = 0; m < c.mesh.size(); ++m) c.src.push_back(random_placement(rng, nd, c.dtype));
  Placements cur = c.src;
  for (Placement& p : cur) p = normalised(p, nd);
  const int64_t steps = rng.uniform(3, 6);
  for (int64_t s = 0; s < steps; ++s) {
    Placements next;
    for (size_t m = 0; m < c.mesh.size(); ++m) {
      Placement p = random_placement(rng, nd, c.dtype);
      for (int tries = 0; tries < 8 && !exact_transition(cur[m], p, c.dtype, c.mesh[m]); ++tries) {
        p = random_placement(rng, nd, c.dtype);
      }
      if (!exact_transition(cur[m], p, c.dtype, c.mesh[m])) p = Replicate();
      next.push_back(p);
    }
    c.chain.push_back(next);
    cur = next;
    for (Placement& p : cur) p = normalised(p, nd);
  }
  c.packed = rng.chance(30);  // drawn last: the draws above are those of earlier versions
  return c;
}

// This rank's local values (full-size, before sharding) whose reduction over the Partial mesh
// dims is exactly `x`: over the P(sum) dims, the ranks other than the first hold small values
// in [-1, 1] and the first holds x minus their sum; a lone P(max) / P(min) dim has x on one
// "holder" rank per element and x -/+ [0, 3] elsewhere; P(avg) and the other cases hold x.
std::vector<float> partial_values(const Case& c, const std::vector<float>& x, const Shape& coord) {
  std::vector<int64_t> sum_dims;
  std::vector<int64_t> partial_dims;
  for (size_t m = 0; m < c.src.size(); ++m) {
    if (!c.src[m].is_partial()) continue;
    partial_dims.push_back(static_cast<int64_t>(m));
    if (c.src[m].reduce_op() == ReduceOp::kSum) sum_dims.push_back(static_cast<int64_t>(m));
  }
  std::vector<float> v = x;
  const int64_t n = static_cast<int64_t>(x.size());
  if (!sum_dims.empty()) {
    int64_t total = 1;
    int64_t flat = 0;
    for (int64_t m : sum_dims) {
      total *= c.mesh[m];
      flat = flat * c.mesh[m] + coord[m];
    }
    auto r = [&](int64_t f, int64_t i) {
      return static_cast<float>(static_cast<int64_t>(mix(c.seed, 11, f, i) % 3) - 1);
    };
    for (int64_t i = 0; i < n; ++i) {
      if (flat != 0) {
        v[i] = r(flat, i);
      } else {
        float rest = 0;
        for (int64_t f = 1; f < total; ++f) rest += r(f, i);
        v[i] = x[i] - rest;
      }
    }
  } else if (partial_dims.size() == 1) {
    const int64_t m = partial_dims[0];
    const ReduceOp op = c.src[m].reduce_op();
    if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t holder = static_cast<int64_t>(mix(c.seed, 13, i) % c.mesh[m]);
        if (coord[m] == holder) continue;
        const float d = static_cast<float>(mix(c.seed, 17, coord[m], i) % 4);
        v[i] = op == ReduceOp::kMax ? x[i] - d : x[i] + d;
      }
    }
  }
  return v;
}

DTensor build_source(const Case& c, const DeviceMesh& mesh, const Tensor& x,
                     const std::vector<float>& xv) {
  switch (c.build) {
    case Build::kDistributeFromRank0: {
      // Only rank 0's data counts: the others pass garbage of the right shape.
      Tensor mine = world_rank() == 0 ? x : full(x.shape(), 7, TensorOptions(x.dtype()));
      return distribute_tensor(mine, mesh, c.src, 0);
    }
    case Build::kDistributeEverywhere:
      return distribute_tensor(x, mesh, c.src, std::nullopt);
    case Build::kFromLocal:
    case Build::kFromLocalChecked: {
      const bool check = c.build == Build::kFromLocalChecked;
      if (!mesh.contains_me()) return DTensor::from_local(x, mesh, c.src, check, x.shape());
      const Shape& coord = mesh.get_coordinate();
      Tensor values = make_tensor(partial_values(c, xv, coord), c.shape, c.dtype);
      Tensor local = block_of(values, mesh.shape(), coord, c.src);
      return DTensor::from_local(local, mesh, c.src, check, x.shape());
    }
  }
  return DTensor();
}

// Empty when `d` is right, else what is wrong.
std::string check_step(const DTensor& d, const Tensor& x, const Placements& want) {
  const int64_t nd = x.dim();
  Placements norm = want;
  for (Placement& p : norm) p = normalised(p, nd);
  if (!(d.placements() == norm)) {
    return "placements " + placements_str(d.placements()) + ", expected " + placements_str(norm);
  }
  if (!(d.shape() == x.shape()) || d.dtype() != x.dtype()) {
    return "global " + shape_str(d.shape()) + " " + std::string(dtype_name(d.dtype())) +
           ", expected " + shape_str(x.shape()) + " " + std::string(dtype_name(x.dtype()));
  }
  const DeviceMesh& mesh = d.device_mesh();
  const Tensor& local = d.to_local();
  if (mesh.contains_me()) {
    const LocalShard s =
        compute_local_shape_and_offset(x.shape(), mesh.shape(), mesh.get_coordinate(), norm);
    if (!(local.shape() == s.shape)) {
      return "local shape " + shape_str(local.shape()) + ", expected " + shape_str(s.shape);
    }
    if (!d.spec().has_partial() &&
        !equal(local, block_of(x, mesh.shape(), mesh.get_coordinate(), norm))) {
      return "local shard content differs from the block of the full tensor";
    }
  } else if (local.numel() != 0) {
    return "a rank outside the mesh holds " + shape_str(local.shape()) + " (expected empty)";
  }
  const Tensor full_t = d.full_tensor();
  if (mesh.contains_me() && !equal(full_t, x)) {
    return "full_tensor() differs from the full tensor (max |diff| " +
           std::to_string(max_abs_diff(full_t, x)) + ")";
  }
  if (!mesh.contains_me() && full_t.numel() != 0) {
    return "full_tensor() on a rank outside the mesh is not empty";
  }
  return "";
}

// Runs one case; returns "" or the first error ("step k: ...").
std::string run_case(const Case& c) {
  int64_t step = -1;
  try {
    const DeviceMesh mesh = build_mesh(c.mesh, c.reversed);
    const std::vector<float> xv = base_values(shape_numel(c.shape), c.dtype, c.seed);
    const Tensor x = make_tensor(xv, c.shape, c.dtype);
    DTensor d = build_source(c, mesh, x, xv);
    std::string err = check_step(d, x, c.src);
    if (!err.empty()) return "source: " + err;
    for (step = 0; step < static_cast<int64_t>(c.chain.size()); ++step) {
      d = d.redistribute(mesh, c.chain[step]);
      err = check_step(d, x, c.chain[step]);
      if (!err.empty()) return "step " + std::to_string(step + 1) + ": " + err;
    }
  } catch (const std::exception& e) {
    return (step < 0 ? std::string("source") : "step " + std::to_string(step + 1)) +
           ": exception: " + e.what();
  }
  return "";
}

TEST_CASE("fuzz redistribute: random chains equal the full tensor bit for bit") {
  const Config cfg = read_config(300);
  const int world = world_size();
  const int rank = world_rank();
  Timer timer;
  int64_t ran = 0;
  int64_t steps = 0;
  // What the cases covered (printed by rank 0, quoted in docs/RELIABILITY.md).
  int64_t with_partial = 0, with_empty = 0, uneven = 0, outside = 0, mesh3d = 0, size1 = 0;
  std::string failure;
  for (int64_t i = cfg.first; i < cfg.first + cfg.count; ++i) {
    const Case c = draw_case(cfg.seed, i, world);
    MpiCommunicator::set_regions_enabled(!c.packed);
    std::string err = run_case(c);
    MpiCommunicator::set_regions_enabled(true);
    if (!err.empty()) {
      // Printed at once: if the other ranks are now stuck in a collective, the deadline ends the
      // job and this line is what is left to read.
      std::fprintf(stderr, "[rank %d] fuzz_redistribute seed %llu %s: %s\n", rank,
                   static_cast<unsigned long long>(cfg.seed), c.str().c_str(), err.c_str());
    }
    const int any_failed = world_max(err.empty() ? 0 : 1);
    ++ran;
    steps += static_cast<int64_t>(c.chain.size());
    bool any_partial = false, any_uneven = false;
    for (const Placements& ps : c.chain) {
      for (const Placement& p : ps) any_partial = any_partial || p.is_partial();
    }
    for (const Placement& p : c.src) any_partial = any_partial || p.is_partial();
    for (int64_t s : c.shape) {
      for (int64_t m : c.mesh) any_uneven = any_uneven || (m > 1 && s % m != 0);
    }
    with_partial += any_partial;
    with_empty += shape_numel(c.shape) == 0;
    uneven += any_uneven;
    outside += shape_numel(c.mesh) < world;
    mesh3d += c.mesh.size() == 3;
    for (int64_t m : c.mesh) {
      if (m == 1 && c.mesh.size() > 1) {
        ++size1;
        break;
      }
    }
    if (any_failed) {
      failure = "seed " + std::to_string(cfg.seed) + " " + c.str() +
                "; this rank: " + (err.empty() ? std::string("ok") : err) +
                "; reproduce with DTENSOR_FUZZ_SEED=" + std::to_string(cfg.seed) +
                " DTENSOR_FUZZ_CASE=" + std::to_string(i) + " mpirun -np " + std::to_string(world);
      break;
    }
    // Rank 0's clock decides, so every rank stops after the same case.
    if (world_max(rank == 0 && timer.seconds() > cfg.seconds ? 1 : 0)) break;
  }
  if (rank == 0) {
    std::fprintf(stderr,
                 "fuzz_redistribute: np %d, seed %llu, cases [%lld, %lld): ran %lld cases, %lld "
                 "redistribute steps in %.1f s%s\n",
                 world, static_cast<unsigned long long>(cfg.seed),
                 static_cast<long long>(cfg.first), static_cast<long long>(cfg.first + cfg.count),
                 static_cast<long long>(ran), static_cast<long long>(steps), timer.seconds(),
                 ran < cfg.count && failure.empty() ? " (stopped by the time bound)" : "");
    std::fprintf(stderr,
                 "fuzz_redistribute: cases with Partial %lld, zero-size %lld, uneven %lld, ranks "
                 "outside the mesh %lld, 3-d meshes %lld, size-1 mesh dims %lld\n",
                 static_cast<long long>(with_partial), static_cast<long long>(with_empty),
                 static_cast<long long>(uneven), static_cast<long long>(outside),
                 static_cast<long long>(mesh3d), static_cast<long long>(size1));
  }
  INFO(failure);
  CHECK(failure.empty());
}

}  // namespace
}  // namespace dtensor::fuzz
