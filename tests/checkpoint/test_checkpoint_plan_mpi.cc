// Checkpoint planning (checkpoint/plan.h) under mpirun at 1, 2 and 4 ranks: plan_save's items
// and totals are what save writes (its index read back), on real and on meta DTensors alike
// and without allocating; plan_load's reads cover each shard from the saved chunks; save and
// load of meta DTensors are refused on every rank.
#include <absl/strings/str_cat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "ckpt_test_util.h"
#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/plan.h"
#include "dtensor/tensor/memory_stats.h"

namespace ck = dtensor::checkpoint;
using namespace ckpt_test;

namespace {

std::string test_dir(const std::string& name) {
  return absl::StrCat("ckpt_plan_np", dt::world_size(), "_", name);
}

// A DTensor of `shape` laid out by (mesh, placements) on `device`: zeros on the CPU, an
// allocation-free meta tensor otherwise (this rank's local shape only).
dt::DTensor make(dt::IntSpan shape, dt::DType dtype, const dt::DeviceMesh& mesh,
                 const dt::Placements& p, dt::Device device) {
  if (!device.is_meta()) return target(shape, dtype, mesh, p);
  const dt::Shape local =
      dt::compute_local_shape_and_offset(shape, mesh.shape(), mesh.get_coordinate(), p).shape;
  return dt::DTensor::from_local(dt::empty(local, dt::TensorOptions(dtype, device)), mesh, p, false,
                                 dt::Shape(shape.begin(), shape.end()));
}

// Every kind of writer choice: sharded and replicated on the world, 2-D layouts, a tensor on
// the second dim's submesh (one copy per first-dim coordinate: the lowest rank's copy writes),
// a local (self-mesh) tensor (rank 0 writes), an uneven shard and an empty one.
ck::StateDict state_on(dt::Device device, int64_t scale = 1) {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh m1 = mesh_1d(), m2 = mesh_2d();
  const dt::DeviceMesh sub = m2.submesh({1});
  ck::StateDict s;
  s.emplace_back("w.shard", make({4 * w * scale, 3}, dt::kFloat32, m1, {dt::Shard(0)}, device));
  s.emplace_back("w.repl", make({5, 2}, dt::kBFloat16, m1, {dt::Replicate()}, device));
  s.emplace_back("w.uneven", make({3 * w + 1, 2}, dt::kFloat64, m1, {dt::Shard(0)}, device));
  s.emplace_back("w.2d",
                 make({4 * w, 2 * w}, dt::kFloat32, m2, {dt::Shard(0), dt::Shard(1)}, device));
  s.emplace_back("w.2d_rs", make({6, 4}, dt::kInt64, m2, {dt::Replicate(), dt::Shard(0)}, device));
  s.emplace_back("w.sub", make({8, 3}, dt::kFloat16, sub, {dt::Shard(0)}, device));
  s.emplace_back("w.empty", make({0, 4}, dt::kFloat32, m1, {dt::Shard(0)}, device));
  s.emplace_back("step", make({}, dt::kInt64, dt::self_mesh(dt::kCPU), {dt::Replicate()}, device));
  return s;
}

struct Chunk {
  std::string fqn, file;
  std::vector<int64_t> offset, shape;
  bool operator<(const Chunk& o) const {
    return std::tie(fqn, file, offset, shape) < std::tie(o.fqn, o.file, o.offset, o.shape);
  }
  bool operator==(const Chunk& o) const = default;
};

std::vector<int64_t> vec(const dt::Shape& s) {
  return {s.begin(), s.end()};
}

std::set<Chunk> chunks_of(const ck::SavePlan& plan) {
  std::set<Chunk> out;
  for (const ck::WriteItem& w : plan.items)
    out.insert({w.fqn, w.file, vec(w.offset), vec(w.shape)});
  return out;
}

}  // namespace

TEST_CASE("plan_save is what save writes", "[checkpoint][plan]") {
  const ck::StateDict state = state_on(dt::Device());
  const ck::SavePlan plan = ck::plan_save(state);
  const std::string dir = test_dir("save");
  ck::save(state, dir);
  const auto index = ck::read_index(dir);

  // This rank's items are exactly the index's chunks in this rank's file.
  const std::string mine = ck::detail::rank_file_name(dt::world_rank());
  std::set<Chunk> written;
  std::set<std::string> files;
  std::vector<int64_t> rank_bytes(dt::world_size(), 0);
  int64_t total = 0;
  for (const auto& [name, t] : index) {
    for (const ck::ChunkInfo& c : t.chunks) {
      const int64_t bytes = dt::shape_numel(c.shape) * int64_t(dt::dtype_size(t.dtype));
      files.insert(c.file);
      total += bytes;
      rank_bytes[std::stoi(c.file.substr(5, 5))] += bytes;
      if (c.file == mine) written.insert({name, c.file, vec(c.offset), vec(c.shape)});
    }
  }
  CHECK(chunks_of(plan) == written);
  CHECK(plan.rank == dt::world_rank());
  CHECK(plan.bytes == rank_bytes[dt::world_rank()]);
  CHECK(plan.rank_bytes == rank_bytes);
  CHECK(plan.files == static_cast<int>(files.size()));
  CHECK(plan.total_bytes == total);
  for (const ck::WriteItem& w : plan.items) {
    CHECK(w.entry == ck::detail::chunk_entry_name(w.fqn, w.offset));
    CHECK(w.dtype == index.at(w.fqn).dtype);
  }
  barrier();
  if (dt::world_rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("plan_save on meta equals the real plan and allocates nothing", "[checkpoint][plan]") {
  const ck::SavePlan real = ck::plan_save(state_on(dt::Device()));
  const ck::StateDict meta = state_on(dt::Device(dt::kMeta));
  const ck::SavePlan planned = ck::plan_save(meta);
  CHECK(chunks_of(planned) == chunks_of(real));
  CHECK(planned.bytes == real.bytes);
  CHECK(planned.rank_bytes == real.rank_bytes);
  CHECK(planned.files == real.files);
  CHECK(planned.total_bytes == real.total_bytes);

  // A meta state of ~4 GiB a rank: planning it holds no tensor memory, real or meta (the
  // metadata collectives' few small buffers aside).
  const ck::StateDict big = state_on(dt::Device(dt::kMeta), int64_t{1} << 28);
  const int64_t before = dt::memory_stats().current_bytes;
  dt::reset_peak_memory_stats();
  dt::reset_peak_meta_memory_stats();
  const ck::SavePlan p = ck::plan_save(big);
  CHECK(p.total_bytes > (int64_t{1} << 32));
  CHECK(dt::memory_stats().peak_bytes - before < (int64_t{1} << 20));
  CHECK(dt::meta_memory_stats().allocations == 0);
  const ck::LoadPlan l = ck::plan_load(big, [&] {
    std::map<std::string, ck::TensorInfo> index;
    for (const auto& [name, t] : big) {
      index[name] = {t.shape(), t.dtype(), {{"f", "", dt::Shape(t.shape().size(), 0), t.shape()}}};
    }
    return index;
  }());
  CHECK(l.files == 1);
  CHECK(dt::memory_stats().peak_bytes - before < (int64_t{1} << 20));
  CHECK(dt::meta_memory_stats().allocations == 0);
}

TEST_CASE("plan_load reads what covers each shard", "[checkpoint][plan]") {
  const std::string dir = test_dir("load");
  ck::save(state_on(dt::Device()), dir);
  // Load into other layouts: every sharded tensor replicated (each rank reads every chunk),
  // and the same on meta.
  const dt::DeviceMesh m1 = mesh_1d();
  ck::StateDict repl;
  for (const auto& [name, t] : state_on(dt::Device())) {
    repl.emplace_back(name, make(t.shape(), t.dtype(), m1, {dt::Replicate()}, dt::Device()));
  }
  const ck::LoadPlan plan = ck::plan_load(repl, dir);
  const auto index = ck::read_index(dir);
  int64_t all = 0;
  std::set<std::string> files;
  size_t chunks = 0;
  for (const auto& [name, t] : index) {
    for (const ck::ChunkInfo& c : t.chunks) {
      all += dt::shape_numel(c.shape) * int64_t(dt::dtype_size(t.dtype));
      files.insert(c.file);
      ++chunks;
    }
  }
  CHECK(plan.bytes == all);
  CHECK(plan.files == static_cast<int>(files.size()));
  REQUIRE(plan.items.size() == chunks);
  for (const ck::ReadItem& r : plan.items) {
    CHECK(r.offset == r.chunk.offset);  // a replicated target takes each chunk whole
    CHECK(r.shape == r.chunk.shape);
  }
  // The same layouts on meta plan the same reads; the original layout reads exactly the
  // chunks this rank wrote, or (replicas) a copy's.
  ck::StateDict repl_meta;
  for (const auto& [name, t] : repl) {
    repl_meta.emplace_back(
        name, make(t.shape(), t.dtype(), m1, {dt::Replicate()}, dt::Device(dt::kMeta)));
  }
  const ck::LoadPlan meta = ck::plan_load(repl_meta, dir);
  CHECK(meta.bytes == plan.bytes);
  CHECK(meta.items.size() == plan.items.size());
  ck::load(repl, dir);  // the plan's reads are load's own: it succeeds
  barrier();
  if (dt::world_rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("plan_load refuses a target the checkpoint lacks", "[checkpoint][plan]") {
  const ck::StateDict s = state_on(dt::Device(dt::kMeta));
  std::map<std::string, ck::TensorInfo> index;
  REQUIRE_THROWS_WITH(ck::plan_load(s, index),
                      Catch::Contains("[checkpoint::load] tensor 'w.shard' is not in the "
                                      "checkpoint"));
  index["w.shard"] = {s[0].second.shape(), dt::kFloat64, {}};
  REQUIRE_THROWS_WITH(ck::plan_load({s[0]}, index),
                      Catch::Contains("[checkpoint::load] tensor 'w.shard'") &&
                          Catch::Contains("but the target is"));
}

TEST_CASE("save and load of meta DTensors are refused on every rank", "[checkpoint][plan]") {
  const std::string dir = test_dir("meta");
  const ck::StateDict meta = state_on(dt::Device(dt::kMeta));
  REQUIRE_THROWS_WITH(ck::save(meta, dir),
                      Catch::Contains("[checkpoint::save] tensor 'w.shard' is on the meta "
                                      "device") &&
                          Catch::Contains("plan_save"));
  CHECK_FALSE(std::filesystem::exists(dir));
  ck::save(state_on(dt::Device()), dir);
  REQUIRE_THROWS_WITH(ck::load(meta, dir),
                      Catch::Contains("[checkpoint::load] tensor 'w.shard' is on the meta "
                                      "device") &&
                          Catch::Contains("plan_load"));
  barrier();
  if (dt::world_rank() == 0) std::filesystem::remove_all(dir);
}
