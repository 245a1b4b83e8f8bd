// Helpers shared by the reliability fuzzers: a portable deterministic RNG (every rank draws the
// same cases), the fuzz configuration read from the environment, random meshes/shapes/dtypes,
// and a world-wide agreement on "did any rank fail" so that no rank runs ahead into a
// collective the others will never issue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::fuzz {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Deterministic across ranks and platforms (no std:: distributions, whose output is
// implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(splitmix64(seed)) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return splitmix64(state_);
  }
  // Uniform in [lo, hi] (inclusive).
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  // True with probability pct/100.
  bool chance(int pct) { return static_cast<int>(next() % 100) < pct; }

 private:
  uint64_t state_;
};

// A stateless hash of a few integers, for per-element values that every rank can recompute.
inline uint64_t mix(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return splitmix64(a ^ splitmix64(b ^ splitmix64(c ^ splitmix64(d))));
}

inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoll(v, nullptr, 0);
}

// The fuzz configuration of one ctest entry (or one manual run):
//   DTENSOR_FUZZ_SEED          base seed (default 20261122); case i uses mix(seed, i)
//   DTENSOR_FUZZ_CASES         cases this run draws (default DTENSOR_FUZZ_DEFAULT_CASES, set per
//                              ctest entry, else `fallback_cases`)
//   DTENSOR_FUZZ_SCALE         multiplies that count (scripts/fuzz_nightly.sh uses 10)
//   DTENSOR_FUZZ_ENTRY         entry index k: this run draws cases [k*cases, (k+1)*cases)
//   DTENSOR_FUZZ_CASE          run only this one case index (reproduce a failure)
//   DTENSOR_FUZZ_SECONDS       time bound (default 75): stop (without failing) once exceeded
struct Config {
  uint64_t seed;
  int64_t first;
  int64_t count;
  double seconds;
};

inline Config read_config(int64_t fallback_cases) {
  Config c;
  c.seed = static_cast<uint64_t>(env_int("DTENSOR_FUZZ_SEED", 20261122));
  c.count = env_int("DTENSOR_FUZZ_CASES", env_int("DTENSOR_FUZZ_DEFAULT_CASES", fallback_cases)) *
            std::max<int64_t>(1, env_int("DTENSOR_FUZZ_SCALE", 1));
  c.first = env_int("DTENSOR_FUZZ_ENTRY", 0) * c.count;
  const int64_t one = env_int("DTENSOR_FUZZ_CASE", -1);
  if (one >= 0) {
    c.first = one;
    c.count = 1;
  }
  c.seconds = static_cast<double>(env_int("DTENSOR_FUZZ_SECONDS", 75));
  return c;
}

// Max over the world of `value` (one tiny all_reduce on the world communicator).
inline int world_max(int value) {
  Tensor t = from_vector(std::vector<int32_t>{value}, Shape{1});
  world_communicator()->all_reduce(t, ReduceOp::kMax)->wait();
  return t.item<int32_t>();
}

// A random mesh shape of 1 to 3 dims that fits the world. Half the time it covers the whole
// world (an ordered factorisation, size-1 dims included); otherwise each dim is drawn in
// [1, what is left], so smaller meshes leave ranks outside.
inline Shape random_mesh_shape(Rng& rng, int world) {
  const int64_t ndim = rng.uniform(1, 3);
  Shape mesh;
  if (rng.chance(50)) {
    int64_t left = world;
    for (int64_t d = 0; d + 1 < ndim; ++d) {
      std::vector<int64_t> divisors;
      for (int64_t k = 1; k <= left; ++k) {
        if (left % k == 0) divisors.push_back(k);
      }
      const int64_t k = divisors[rng.uniform(0, static_cast<int64_t>(divisors.size()) - 1)];
      mesh.push_back(k);
      left /= k;
    }
    mesh.push_back(left);
  } else {
    int64_t left = world;
    for (int64_t d = 0; d < ndim; ++d) {
      const int64_t k = rng.uniform(1, left);
      mesh.push_back(k);
      left /= k;
    }
  }
  return mesh;
}

// A mesh over the first prod(shape) world ranks, row-major or (a quarter of the time)
// reversed; every rank builds the same one (collective the first time).
inline DeviceMesh build_mesh(const Shape& shape, bool reversed) {
  std::vector<int> ranks(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < ranks.size(); ++i) {
    ranks[i] = reversed ? static_cast<int>(ranks.size() - 1 - i) : static_cast<int>(i);
  }
  return DeviceMesh(kCPU, shape, std::move(ranks));
}

// 1 to 3 dims, each of size 0..2*world+3; a tenth of the time one dim is forced to 0.
inline Shape random_tensor_shape(Rng& rng, int world, int64_t min_dims = 1) {
  const int64_t ndim = rng.uniform(min_dims, 3);
  Shape shape;
  for (int64_t d = 0; d < ndim; ++d) shape.push_back(rng.uniform(0, 2 * world + 3));
  if (rng.chance(10)) shape[rng.uniform(0, ndim - 1)] = 0;
  return shape;
}

inline DType random_dtype(Rng& rng) {
  static constexpr DType kAll[] = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64, kBool};
  return kAll[rng.uniform(0, 6)];
}

// Small integers in [-15, 15] (bool: a pattern of true/false), exactly representable in every
// dtype, varied by `salt`.
inline std::vector<float> base_values(int64_t n, DType dtype, uint64_t salt) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = mix(salt, static_cast<uint64_t>(i));
    v[i] = dtype == kBool ? static_cast<float>(h % 3 == 0) : static_cast<float>(h % 31) - 15.0f;
  }
  return v;
}

inline Tensor make_tensor(const std::vector<float>& v, const Shape& shape, DType dtype) {
  return from_vector(v, shape).to(dtype);
}

// The block of `full` that the rank at `coord` holds under `placements` (Shard narrowing only).
inline Tensor block_of(const Tensor& full, const Shape& mesh_shape, const Shape& coord,
                       PlacementSpan placements) {
  const LocalShard s = compute_local_shape_and_offset(full.shape(), mesh_shape, coord, placements);
  Tensor t = full;
  for (int64_t d = 0; d < full.dim(); ++d) t = t.narrow(d, s.offset[d], s.shape[d]);
  return t.contiguous();
}

class Timer {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace dtensor::fuzz
