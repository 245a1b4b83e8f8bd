// Save and load jobs for the checkpoint tests that span several mpirun jobs (ctest fixtures):
// a checkpoint saved at one world size is loaded at another, into other meshes and
// placements; a save killed before its commit leaves the previous checkpoint loadable.
//
//   ckpt_tool save DIR VERSION        save the tensor set (contents depend on VERSION)
//   ckpt_tool load DIR VERSION        load it resharded and check every element
//   ckpt_tool crash-save DIR VERSION  save, but the last rank dies just before the commit
//   ckpt_tool race-save DIR N         save versions 1..N, stopping early once DIR.stop exists
//   ckpt_tool race-load DIR N         load again and again while race-save (another job)
//                                     replaces the checkpoint, until N versions above 1 were
//                                     loaded: each load must give one version whole, or say
//                                     that the checkpoint is being replaced; any other error
//                                     fails
//
// Exit status 0 when everything matched; 1 otherwise (each rank prints what differed).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "ckpt_test_util.h"
#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/tensor/compare.h"

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
      {"w1", {13, 7}, dt::kFloat32, 1}, {"w2", {5, 9}, dt::kBFloat16, 2},
      {"w3", {2, 3}, dt::kFloat64, 3},  {"h", {6, 10}, dt::kFloat16, 4},
      {"i1", {11}, dt::kInt64, 5},      {"i2", {3, 4}, dt::kInt32, 6},
      {"b1", {6, 4}, dt::kBool, 7},     {"z", {0, 3}, dt::kFloat32, 8},
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
    state.emplace_back(s.name,
                       zeros ? target(s.shape, s.dtype, mesh, placements)
                             : expected(s.shape, s.dtype, s.id + 100 * version, mesh, placements));
  }
  return state;
}

// Whether `state` (built with build(...)) holds version `version` everywhere; prints what differs.
int count_mismatches(const ck::StateDict& state, int version) {
  int bad = 0;
  for (size_t i = 0; i < specs().size(); ++i) {
    const Spec& s = specs()[i];
    const dt::Tensor got = state[i].second.full_tensor();
    if (!dt::equal(got, expected_full(s.shape, s.dtype, s.id + 100 * version))) {
      std::printf("rank %d: %s loaded as %s differs from version %d\n", dt::world_rank(), s.name,
                  state[i].second.str().c_str(), version);
      ++bad;
    }
  }
  return bad;
}

// The same flag on every rank: whether any rank passed true.
bool any_rank(bool flag) {
  dt::Tensor t = dt::from_vector(std::vector<int64_t>{flag ? 1 : 0}, {1});
  dt::world_communicator()->all_reduce(t, dt::ReduceOp::kMax)->wait();
  return t.item<int64_t>() != 0;
}

// race-save / race-load: the state carries its version in "version" (a local int64 [1]).
int race(const std::string& mode, const std::string& dir, int n) {
  const int rank = dt::world_rank();
  if (mode == "race-save") {
    int v = 1;
    for (; v <= n && !any_rank(std::filesystem::exists(dir + ".stop")); ++v) {
      ck::StateDict state = build(v, 0, false);
      state.emplace_back("version",
                         dt::local_dtensor(dt::from_vector(std::vector<int64_t>{v}, {1})));
      ck::save(state, dir);
    }
    if (rank == 0) std::printf("race-save: saved %d versions\n", v - 1);
    return 0;
  }
  // Versions seen above 1 (the saver's own; its mpirun takes a while to start): the loop ends
  // when there were n of them, so that n saves overlapped loads whatever the two jobs' speeds
  // (a load is faster than a save here). Gives up after 20000 loads.
  std::set<int> seen;
  int loaded = 0, replaced = 0, bad = 0;
  for (int i = 0; static_cast<int>(seen.size()) < n && i < 20000; ++i) {
    ck::StateDict state = build(0, 2, true);
    state.emplace_back("version", dt::local_dtensor(dt::zeros({1}, dt::kInt64)));
    try {
      ck::load(state, dir);
    } catch (const dt::Error& e) {
      if (std::string_view(e.what()).find("is being replaced") == std::string_view::npos) {
        std::printf("rank %d: load %d failed: %s\n", rank, i, e.what());
        return 1;
      }
      ++replaced;
      continue;
    }
    const int version = static_cast<int>(state.back().second.to_local().item<int64_t>());
    bad += count_mismatches(state, version);
    if (version > 1) seen.insert(version);
    ++loaded;
  }
  if (rank == 0) {
    std::printf(
        "race-load: %d loads whole (%zu versions above 1), %d raised 'being replaced', "
        "%d mismatches\n",
        loaded, seen.size(), replaced, bad);
  }
  return bad == 0 && static_cast<int>(seen.size()) == n ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  dt::Runtime runtime(&argc, &argv);
  if (argc != 4) {
    std::cerr << "usage: ckpt_tool save|load|crash-save|race-save|race-load DIR VERSION|N\n";
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int version = std::atoi(argv[3]);
  const int rank = dt::world_rank();
  try {
    if (mode == "race-save" || mode == "race-load") return race(mode, dir, version);
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
    const int bad = count_mismatches(state, version);
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
