// Save and load jobs for the checkpoint tests that span several mpirun jobs (ctest fixtures):
// a checkpoint saved at one world size is loaded at another, into other meshes and
// placements; a save killed before its commit leaves the previous checkpoint loadable.
//
//   ckpt_tool save DIR VERSION        save the tensor set (contents depend on VERSION)
//   ckpt_tool load DIR VERSION        load it resharded and check every element
//   ckpt_tool crash-save DIR VERSION  save, but the last rank dies just before the commit
//
// Exit status 0 when everything matched; 1 otherwise (each rank prints what differed).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "ckpt_test_util.h"
#include "tensor/compare.h"

namespace ck = dtensor::checkpoint;
using namespace ckpt_test;

namespace {

struct Spec {
  const char* name;
  dt::Shape shape;
  dt::DType dtype;
  int id;
};

// Fixed shapes (independent of the world size): uneven, with dims smaller than 4 ranks (empty
// shards), zero-size, 1-D, every dtype.
const std::vector<Spec>& specs() {
  static const std::vector<Spec> s = {
      {"w1", {13, 7}, dt::kFloat32, 1},  {"w2", {5, 9}, dt::kBFloat16, 2},
      {"w3", {2, 3}, dt::kFloat64, 3},   {"h", {6, 10}, dt::kFloat16, 4},
      {"i1", {11}, dt::kInt64, 5},       {"i2", {3, 4}, dt::kInt32, 6},
      {"b1", {6, 4}, dt::kBool, 7},      {"z", {0, 3}, dt::kFloat32, 8},
  };
  return s;
}

// The k-th layout valid for a tensor of `ndim` dims (k taken modulo their count); -1: local.
std::pair<dt::DeviceMesh, dt::Placements> layout(size_t ndim, size_t k) {
  std::vector<std::pair<dt::DeviceMesh, dt::Placements>> all;
  for (const auto& p : placements_1d()) all.emplace_back(mesh_1d(), p);
  for (const auto& p : placements_2d()) all.emplace_back(mesh_2d(), p);
  all.emplace_back(dt::self_mesh(), dt::Placements{dt::Replicate()});
  std::vector<std::pair<dt::DeviceMesh, dt::Placements>> valid;
  for (auto& [m, p] : all) {
    bool ok = true;
    for (const auto& pl : p) ok = ok && (!pl.is_shard() || pl.dim() < static_cast<int64_t>(ndim));
    if (ok) valid.emplace_back(m, p);
  }
  return valid[k % valid.size()];
}

ck::StateDict build(int version, size_t shift, bool zeros) {
  ck::StateDict state;
  for (size_t i = 0; i < specs().size(); ++i) {
    const Spec& s = specs()[i];
    const auto [mesh, placements] = layout(s.shape.size(), i * 3 + shift + dt::world_size());
    state.emplace_back(s.name, zeros ? target(s.shape, s.dtype, mesh, placements)
                                     : expected(s.shape, s.dtype, s.id + 100 * version, mesh,
                                                placements));
  }
  return state;
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  if (argc != 4) {
    std::cerr << "usage: ckpt_tool save|load|crash-save DIR VERSION\n";
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int version = std::atoi(argv[3]);
  const int rank = dt::world_rank();
  try {
    if (mode == "save" || mode == "crash-save") {
      ck::SaveOptions opts;
      if (mode == "crash-save") {
        opts.before_commit = [] {
          if (dt::world_rank() == dt::world_size() - 1) {
            std::printf("rank %d: simulated crash before the commit\n", dt::world_rank());
            std::fflush(stdout);
            std::_Exit(3);
          }
        };
      }
      ck::save(build(version, 0, false), dir, opts);
      if (rank == 0) std::printf("saved version %d at %d ranks\n", version, dt::world_size());
      return 0;
    }
    if (mode != "load") return 2;
    // Other layouts than the save's (shift 2, and the world size differs too).
    const ck::StateDict state = build(version, 2, true);
    ck::load(state, dir);
    int bad = 0;
    for (size_t i = 0; i < state.size(); ++i) {
      const Spec& s = specs()[i];
      const dt::Tensor got = state[i].second.full_tensor();
      if (!dt::equal(got, expected_full(s.shape, s.dtype, s.id + 100 * version))) {
        std::printf("rank %d: %s loaded as %s differs from version %d\n", rank, s.name,
                    state[i].second.str().c_str(), version);
        ++bad;
      }
    }
    if (rank == 0 && bad == 0) {
      std::printf("loaded version %d at %d ranks: all %zu tensors match\n", version,
                  dt::world_size(), state.size());
    }
    return bad == 0 ? 0 : 1;
  } catch (const dt::Error& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    return 1;
  }
}
