// Distributed checkpoint under mpirun (1, 2 and 4 ranks): round trips of every placement on
// 1-D and 2-D meshes, even, uneven and empty shards, every dtype, self-mesh (local) tensors;
// resharded loads to other meshes and placements; one writer per chunk; the errors (missing,
// truncated and corrupt files, missing keys, shape/dtype mismatches, escaping index paths,
// Partial) raised on every rank with the target untouched; an interrupted save leaving the old
// checkpoint loadable; and resume equality of training. Loads at another world size are in
// ckpt_tool.cc (ctest fixtures).
#include <absl/strings/str_cat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "ckpt_test_util.h"
#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/train_state.h"
#include "dtensor/nn/nn.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/optim/lr_scheduler.h"
#include "dtensor/optim/optimizer.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/rng/random.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/env_test_util.h"

namespace ck = dtensor::checkpoint;
namespace nn = dtensor::nn;
using namespace ckpt_test;

namespace {

std::string test_dir(const std::string& name) {
  return absl::StrCat("ckpt_mpi_np", dt::world_size(), "_", name);
}

struct Case {
  std::string name;
  dt::Shape shape;
  dt::DType dtype;
  int id;
  dt::DeviceMesh mesh;
  dt::Placements placements;
};

// Every dtype x shape (even-ish, uneven world*3+1, a dim smaller than the mesh: empty shards,
// zero-size) x every 1-D and 2-D placement.
std::vector<Case> all_cases() {
  const int64_t w = dt::world_size();
  const std::vector<dt::Shape> shapes = {{3 * w + 1, 5}, {2, 3}, {0, 4}, {4 * w, 2 * w}};
  const std::vector<dt::DType> dtypes = {dt::kFloat32, dt::kFloat64, dt::kFloat16, dt::kBFloat16,
                                         dt::kInt32,   dt::kInt64,   dt::kBool};
  std::vector<std::pair<dt::DeviceMesh, dt::Placements>> layouts;
  for (const auto& p : placements_1d()) layouts.emplace_back(mesh_1d(), p);
  for (const auto& p : placements_2d()) layouts.emplace_back(mesh_2d(), p);
  std::vector<Case> cases;
  int id = 0;
  for (dt::DType d : dtypes) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      for (size_t l = 0; l < layouts.size(); ++l) {
        cases.push_back({absl::StrCat(std::string(dt::dtype_name(d)), ".s", s, ".l", l), shapes[s],
                         d, id++, layouts[l].first, layouts[l].second});
      }
    }
  }
  return cases;
}

// The distinct non-empty chunks of a layout (what the writers must write, each once).
size_t distinct_chunks(const Case& c) {
  std::set<std::vector<int64_t>> offsets;
  const dt::DTensorSpec spec(c.mesh, c.placements, dt::TensorMeta(c.shape, c.dtype));
  const dt::Shape& ms = c.mesh.shape();
  dt::Shape coord(ms.size(), 0);
  for (int64_t r = 0; r < c.mesh.size(); ++r) {
    int64_t rest = r;
    for (int64_t d = static_cast<int64_t>(ms.size()) - 1; d >= 0; --d) {
      coord[d] = rest % ms[d];
      rest /= ms[d];
    }
    const dt::LocalShard s = spec.local_shard(coord);
    if (dt::shape_numel(s.shape) > 0) offsets.insert({s.offset.begin(), s.offset.end()});
  }
  return offsets.size();
}

// Load targets laid out like `state`'s tensors, holding 42: a failed load must leave them so.
ck::StateDict sentinels(const ck::StateDict& state) {
  ck::StateDict out;
  for (const auto& [name, t] : state) {
    out.emplace_back(name,
                     dt::distribute_tensor(dt::full(t.shape(), 42, dt::TensorOptions(t.dtype())),
                                           t.device_mesh(), t.placements(), std::nullopt));
  }
  return out;
}

bool holds_42(const dt::DTensor& t) {
  const dt::Tensor& l = t.to_local();
  return dt::equal(l, dt::full(l.shape(), 42, dt::TensorOptions(l.dtype())));
}

void rewrite_file(const std::string& path, const std::function<std::string(std::string)>& edit) {
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << edit(text);
}

}  // namespace

TEST_CASE("checkpoint: every dtype, placement and shard shape round-trips and reshards",
          "[checkpoint]") {
  const std::vector<Case> cases = all_cases();
  ck::StateDict state;
  for (const Case& c : cases) {
    state.emplace_back(c.name, expected(c.shape, c.dtype, c.id, c.mesh, c.placements));
  }
  // Local (self-mesh) values: a 0-d step count and a vector, the same on every rank.
  state.emplace_back("local.step", dt::local_dtensor(expected_full({}, dt::kInt64, 5)));
  state.emplace_back("local.vec", dt::local_dtensor(expected_full({7}, dt::kFloat32, 6)));
  const std::string dir = test_dir("roundtrip");
  ck::save(state, dir);

  SECTION("one writer per chunk, empty chunks not written") {
    const auto index = ck::read_index(dir);
    REQUIRE(index.size() == state.size());
    for (const Case& c : cases) {
      INFO(c.name << " " << dt::placements_str(c.placements));
      CHECK(index.at(c.name).chunks.size() == distinct_chunks(c));
    }
    CHECK(index.at("local.step").chunks.size() == 1);
    CHECK(index.at("local.step").chunks[0].file == "rank-00000.safetensors");
  }

  SECTION("same layout") {
    ck::StateDict targets;
    for (const Case& c : cases)
      targets.emplace_back(c.name, target(c.shape, c.dtype, c.mesh, c.placements));
    targets.emplace_back("local.vec", dt::local_dtensor(dt::zeros({7})));
    ck::load(targets, dir);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO(cases[i].name << " " << dt::placements_str(cases[i].placements));
      CHECK(dt::equal(targets[i].second.to_local(), state[i].second.to_local()));
    }
    CHECK(dt::equal(targets.back().second.to_local(), expected_full({7}, dt::kFloat32, 6)));
  }

  SECTION("resharded to another mesh and placements") {
    // Case i is loaded with the layout of case i + 1 (1-D <-> 2-D, Shard <-> Replicate).
    ck::StateDict targets;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const Case& other = cases[(i + 1) % cases.size()];
      targets.emplace_back(c.name, target(c.shape, c.dtype, other.mesh, other.placements));
    }
    ck::load(targets, dir);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO(cases[i].name << " loaded as " << targets[i].second.str());
      CHECK(dt::equal(targets[i].second.full_tensor(),
                      expected_full(cases[i].shape, cases[i].dtype, cases[i].id)));
    }
    // A sharded tensor loaded as a local one: every rank reads it whole.
    ck::StateDict local = {
        {cases[0].name, dt::local_dtensor(dt::zeros(cases[0].shape, cases[0].dtype))}};
    ck::load(local, dir);
    CHECK(dt::equal(local[0].second.to_local(),
                    expected_full(cases[0].shape, cases[0].dtype, cases[0].id)));
  }
}

TEST_CASE("checkpoint: tensors on a submesh are written once and load on every rank",
          "[checkpoint]") {
  // A (dp, tp) mesh: 2x2 at 4 ranks, 2x1 at 2, 1x1 at 1. A tensor on the tp submesh is the same
  // in every dp group (tensor parallelism without data parallelism); one on the dp submesh the
  // same in every tp group. Each distinct chunk must be written once over the whole world (not
  // once per group) and load back onto the submesh, the world mesh and a local tensor. And a
  // tensor on the one-rank mesh of the last rank, which no other rank holds, is written by it.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = w >= 4 ? dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"})
                                     : dt::init_device_mesh(dt::kCPU, {w, 1}, {"dp", "tp"});
  const dt::Shape shape = {3 * w + 1, 2 * w + 1};
  std::vector<Case> cases;
  int id = 0;
  for (const char* dim : {"tp", "dp"}) {
    for (const dt::Placements& p : placements_1d()) {
      cases.push_back(
          {absl::StrCat(dim, ".", p[0].str()), shape, dt::kFloat32, id++, mesh[dim], p});
    }
  }
  const dt::DeviceMesh last(dt::kCPU, {1}, {static_cast<int>(w - 1)});
  cases.push_back({"last_rank", shape, dt::kFloat32, id++, last, {dt::Replicate()}});
  ck::StateDict state;
  for (const Case& c : cases) {
    state.emplace_back(c.name, expected(c.shape, c.dtype, c.id, c.mesh, c.placements));
  }
  const std::string dir = test_dir("submesh");
  ck::save(state, dir);

  const auto index = ck::read_index(dir);
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(index.at(c.name).chunks.size() == distinct_chunks(c));
  }
  ck::StateDict same, world, local;
  for (const Case& c : cases) {
    same.emplace_back(c.name, target(c.shape, c.dtype, c.mesh, c.placements));
    world.emplace_back(c.name, target(c.shape, c.dtype, mesh_1d(), {dt::Shard(1)}));
    local.emplace_back(c.name, dt::local_dtensor(dt::zeros(c.shape, c.dtype)));
  }
  ck::load(same, dir);
  ck::load(world, dir);
  ck::load(local, dir);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].name);
    const dt::Tensor want = expected_full(cases[i].shape, cases[i].dtype, cases[i].id);
    CHECK(dt::equal(same[i].second.to_local(), state[i].second.to_local()));
    CHECK(dt::equal(world[i].second.full_tensor(), want));
    CHECK(dt::equal(local[i].second.to_local(), want));
  }
  // And the other way: saved from the world mesh, loaded onto each submesh.
  ck::StateDict from_world;
  for (const Case& c : cases) {
    from_world.emplace_back(c.name,
                            expected(c.shape, c.dtype, c.id + 100, mesh_1d(), {dt::Shard(0)}));
  }
  ck::save(from_world, dir);
  ck::load(same, dir);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].name);
    if (!cases[i].mesh.contains_me()) continue;  // holds nothing of it
    CHECK(dt::equal(same[i].second.full_tensor(),
                    expected_full(cases[i].shape, cases[i].dtype, cases[i].id + 100)));
  }
}

TEST_CASE("checkpoint: errors are raised on every rank and leave the targets untouched",
          "[checkpoint]") {
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = mesh_1d();
  const dt::Shape shape_a = {3 * w + 1, 4};
  const dt::Placements s0 = {dt::Shard(0)}, r = {dt::Replicate()};
  const ck::StateDict state = {{"a", expected(shape_a, dt::kFloat32, 1, mesh, s0)},
                               {"b", expected({5}, dt::kInt64, 2, mesh, r)}};
  const std::string dir = test_dir("errors");
  const std::string file0 = dir + "/rank-00000.safetensors";
  const bool root = dt::world_rank() == 0;
  // A section may have left a directory without index.json, which save refuses to replace.
  if (root) std::filesystem::remove_all(dir);
  barrier();
  ck::save(state, dir);

  // Targets hold 42; after a failed load they must still.
  auto sentinel_targets = [&] { return sentinels(state); };
  auto untouched = [&](const ck::StateDict& t) {
    return holds_42(t[0].second) && holds_42(t[1].second);
  };
  auto expect_error = [&](const ck::StateDict& targets, std::vector<std::string> parts) {
    std::string msg;
    try {
      ck::load(targets, dir);
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    INFO(msg);
    REQUIRE(!msg.empty());  // on every rank
    for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
    CHECK(untouched(targets));
  };
  // Each case edits the checkpoint on rank 0, then restores it by saving again.
  auto on_root = [&](const std::function<void()>& fn) {
    if (root) fn();
    barrier();
  };

  SECTION("missing key, shape and dtype mismatches") {
    ck::StateDict t = sentinel_targets();
    t.emplace_back("c", expected({2}, dt::kFloat32, 3, mesh, r));
    expect_error(t, {"[checkpoint::load]", "tensor 'c' is not in the checkpoint", dir});
    t = sentinel_targets();
    t[1].second = dt::distribute_tensor(dt::full({6}, 42, dt::TensorOptions(dt::kInt64)), mesh, r,
                                        std::nullopt);
    expect_error(t, {"tensor 'b'", "[6]", "[5]"});
    t = sentinel_targets();
    t[1].second = dt::distribute_tensor(dt::full({5}, 42, dt::TensorOptions(dt::kInt32)), mesh, r,
                                        std::nullopt);
    {
      std::string msg;
      try {
        ck::load(t, dir);
      } catch (const dt::Error& e) {
        msg = e.what();
      }
      CHECK(msg.find("tensor 'b' is int64") != std::string::npos);
      CHECK(msg.find("int32") != std::string::npos);
      CHECK(holds_42(t[0].second));
    }
  }

  SECTION("corrupt data: checksum") {
    on_root([&] {
      rewrite_file(file0, [](std::string s) {
        s[s.size() - 1] ^= 0x5a;  // the last byte of the last entry (b, written by rank 0)
        return s;
      });
    });
    expect_error(sentinel_targets(), {"rank-00000.safetensors", "CRC-32", "'b"});
  }

  SECTION("truncated file") {
    on_root([&] { std::filesystem::resize_file(file0, std::filesystem::file_size(file0) - 3); });
    expect_error(sentinel_targets(), {"rank-00000.safetensors", "truncated", "tensor '"});
  }

  SECTION("missing file") {
    on_root([&] { std::filesystem::remove(file0); });
    expect_error(sentinel_targets(), {"rank-00000.safetensors", "cannot open", "tensor '"});
  }

  SECTION("corrupt header") {
    on_root([&] {
      rewrite_file(file0, [](std::string s) {
        s[10] = '#';
        return s;
      });
    });
    expect_error(sentinel_targets(), {"rank-00000.safetensors", "corrupt"});
  }

  SECTION("index paths cannot leave the directory") {
    on_root([&] {
      rewrite_file(dir + "/index.json", [](std::string s) {
        for (size_t p; (p = s.find("\"rank-00000")) != std::string::npos;) s.replace(p, 1, "\"../");
        return s;
      });
    });
    expect_error(sentinel_targets(),
                 {"index.json", "../rank-00000.safetensors", "not a plain file name"});
  }

  SECTION("overlapping chunks whose element count adds up") {
    // Tensor a's chunks rewritten so that one row is held twice and another by none: the count
    // matches, only the disjointness check sees it (the entries are renamed after the new
    // offsets, or the entry check would see the edit first).
    on_root([&] {
      rewrite_file(dir + "/index.json", [&](const std::string& text) {
        auto index = ck::detail::index_from_json(text, "index.json");
        std::vector<ck::ChunkInfo>& chunks = index.tensors.at("a").chunks;
        if (chunks.size() >= 2) {
          REQUIRE(chunks[1].offset[0] > 0);
          chunks[1].offset[0] -= 1;  // overlaps chunk 0's last row, leaves its own last row
        } else {
          ck::ChunkInfo top = chunks.at(0), bottom = chunks.at(0);
          top.shape[0] = bottom.shape[0] = shape_a[0] / 2;  // rows [0, h) and [1, h + 1)
          bottom.offset[0] = 1;
          chunks = {top, bottom};
          REQUIRE(2 * top.shape[0] * shape_a[1] == shape_a[0] * shape_a[1]);
        }
        for (ck::ChunkInfo& c : chunks) c.entry = ck::detail::chunk_entry_name("a", c.offset);
        return ck::detail::index_to_json(index, static_cast<int>(w));
      });
    });
    expect_error(sentinel_targets(), {"index.json", "tensor 'a'", "overlapping chunks"});
  }

  SECTION("corrupt or missing index") {
    on_root([&] {
      rewrite_file(dir + "/index.json", [](std::string s) { return s.substr(0, s.size() / 2); });
    });
    expect_error(sentinel_targets(), {"index.json", "corrupt"});
    on_root([&] { std::filesystem::remove(dir + "/index.json"); });
    expect_error(sentinel_targets(), {"cannot open", "index.json"});
  }

  SECTION("one rank that cannot read the index raises its error, not 'being replaced'") {
    // The other ranks read an index; a rank that reads none did not see a save replace it.
    const std::string mine = w > 1 && dt::world_rank() == 1 ? test_dir("no_such_checkpoint") : dir;
    std::string msg;
    try {
      ck::load(sentinel_targets(), mine);
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    INFO(msg);
    if (w > 1) {
      CHECK(msg.find("cannot open") != std::string::npos);
      CHECK(msg.find("no_such_checkpoint/index.json") != std::string::npos);
    }
  }

  SECTION("Partial is refused on save and load") {
    const dt::DTensor p = dt::DTensor::from_local(dt::ones({2}), mesh, {dt::Partial()});
    std::string msg;
    try {
      ck::save({{"p", p}}, test_dir("partial"));
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    CHECK(msg.find("[checkpoint::save] tensor 'p' has Partial placements [P(sum)]") !=
          std::string::npos);
    msg.clear();
    try {
      ck::load({{"b", p}}, dir);
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    CHECK(msg.find("Partial") != std::string::npos);
  }

  SECTION("the ranks must save the same names") {
    ck::StateDict mine = state;
    if (w > 1 && dt::world_rank() == 1) mine[0].first = "z";
    std::string msg;
    try {
      ck::save(mine, test_dir("names"));
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    if (w > 1) CHECK(msg.find("the ranks save different states") != std::string::npos);
  }

  SECTION("a directory that is not a checkpoint is not replaced") {
    const std::string other = test_dir("not_a_checkpoint");
    on_root([&] {
      std::filesystem::create_directories(other);
      std::ofstream(other + "/precious.txt") << "keep me";
    });
    std::string msg;
    try {
      ck::save(state, other);
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    CHECK(msg.find("is not a checkpoint") != std::string::npos);
    CHECK(std::filesystem::exists(other + "/precious.txt"));
  }

  // Restore for the next section (sections re-run the test case from the top: it saves anew).
  barrier();
}

TEST_CASE("checkpoint: no edit of the index loads wrong data", "[checkpoint]") {
  // p and q have equal shapes and layouts: at 2+ ranks every chunk is [2, 3], so two chunks of p
  // (and p's and q's) can trade offsets, entries, files or whole tensors and still tile. Each
  // edit is applied to a fresh save's index.json; the load must then raise (leaving the targets
  // untouched) or, for an edit that keeps the meaning, load exactly what was saved.
  using json = nlohmann::json;
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = mesh_1d();
  const dt::Shape shape = {2 * w, 3};
  const dt::Placements s0 = {dt::Shard(0)};
  const ck::StateDict state = {{"p", expected(shape, dt::kFloat32, 1, mesh, s0)},
                               {"q", expected(shape, dt::kFloat32, 2, mesh, s0)}};
  const std::string dir = test_dir("index_edits");
  auto chunk = [](json& doc, const char* t, size_t i) -> json& {
    return doc["tensors"][t]["chunks"][i];
  };
  // Another chunk of p's shape: p's second at 2+ ranks, q's only one at 1 rank.
  auto other = [&](json& doc) -> json& { return w >= 2 ? chunk(doc, "p", 1) : chunk(doc, "q", 0); };
  auto trade = [](json& a, json& b, std::initializer_list<const char*> keys) {
    for (const char* k : keys) std::swap(a[k], b[k]);
  };
  struct Edit {
    std::string what;
    bool must_fail;
    std::function<void(json&)> apply;
  };
  const std::vector<Edit> edits = {
      {"two chunks trade offsets", w >= 2,
       [&](json& d) { trade(chunk(d, "p", 0), other(d), {"offset"}); }},
      {"two chunks trade entries and checksums", true,
       [&](json& d) {
         trade(chunk(d, "p", 0), other(d), {"entry", "crc32"});
       }},
      {"two chunks trade files, entries and checksums", true,
       [&](json& d) {
         trade(chunk(d, "p", 0), other(d), {"file", "entry", "crc32"});
       }},
      {"p and q trade chunk lists", true,
       [&](json& d) { std::swap(d["tensors"]["p"]["chunks"], d["tensors"]["q"]["chunks"]); }},
      {"a chunk names another rank's file", w >= 2,
       [&](json& d) { chunk(d, "p", 0)["file"] = other(d)["file"]; }},
      {"a dtype of the same size", true, [&](json& d) { d["tensors"]["p"]["dtype"] = "I32"; }},
      // p as [3, 2w] with every chunk transposed ([2, 3] at [2i, 0] -> [3, 2] at [0, 2i]): the
      // chunks still tile it, and hold as many elements.
      {"p's shape and its chunks' shapes and offsets transposed", true,
       [&](json& d) {
         json& t = d["tensors"]["p"];
         std::swap(t["shape"][0], t["shape"][1]);
         for (json& c : t["chunks"]) {
           std::swap(c["shape"][0], c["shape"][1]);
           std::swap(c["offset"][0], c["offset"][1]);
         }
       }},
      {"a checksum", true,
       [&](json& d) {
         chunk(d, "p", 0)["crc32"] = chunk(d, "p", 0)["crc32"].get<uint32_t>() ^ 1u;
       }},
      {"the save id", true,
       [&](json& d) {
         if (d["metadata"].contains("save_id")) d["metadata"]["save_id"] = "0123456789abcdef";
       }},
      // Reordering the chunks keeps the meaning: it must still load.
      {"the chunks of p listed in reverse", false,
       [&](json& d) {
         json& c = d["tensors"]["p"]["chunks"];
         std::reverse(c.begin(), c.end());
       }},
  };
  for (const Edit& e : edits) {
    INFO(e.what);
    ck::save(state, dir);
    bool changed = false;
    if (dt::world_rank() == 0) {
      rewrite_file(dir + "/index.json", [&](const std::string& text) {
        json doc = json::parse(text);
        const json before = doc;
        e.apply(doc);
        changed = doc != before;
        return doc.dump(1);
      });
    }
    barrier();
    const ck::StateDict t = sentinels(state);
    std::string msg;
    try {
      ck::load(t, dir);
    } catch (const dt::Error& err) {
      msg = err.what();
    }
    INFO(msg);
    if (!msg.empty()) {
      CHECK(holds_42(t[0].second));
      CHECK(holds_42(t[1].second));
    } else {
      CHECK(dt::equal(t[0].second.full_tensor(), expected_full(shape, dt::kFloat32, 1)));
      CHECK(dt::equal(t[1].second.full_tensor(), expected_full(shape, dt::kFloat32, 2)));
    }
    if (e.must_fail && dt::world_rank() == 0 && changed) CHECK(!msg.empty());
  }
}

TEST_CASE("checkpoint: a save over a checkpoint on a filesystem without RENAME_EXCHANGE",
          "[checkpoint]") {
  // DTENSOR_CKPT_NO_EXCHANGE=1 takes the fallback NFS and FUSE need (three renames through
  // DIR.old); the second save must replace the first and leave nothing behind.
  const dt::DeviceMesh mesh = mesh_1d();
  const dt::Shape shape = {2 * dt::world_size() + 1, 3};
  const dt::Placements s0 = {dt::Shard(0)};
  const std::string dir = test_dir("no_exchange");
  if (dt::world_rank() == 0) std::filesystem::remove_all(dir);
  barrier();
  {
    const dt::test::ScopedEnv no_exchange("DTENSOR_CKPT_NO_EXCHANGE", "1");
    ck::save({{"w", expected(shape, dt::kFloat32, 1, mesh, s0)}}, dir);
    ck::save({{"w", expected(shape, dt::kFloat32, 2, mesh, s0)}}, dir);
  }
  ck::StateDict t = {{"w", target(shape, dt::kFloat32, mesh, s0)}};
  ck::load(t, dir);
  CHECK(dt::equal(t[0].second.to_local(), expected(shape, dt::kFloat32, 2, mesh, s0).to_local()));
  CHECK(!std::filesystem::exists(dir + ".old"));
  CHECK(!std::filesystem::exists(dir + ".tmp"));
}

TEST_CASE("checkpoint: a load while a save replaces the checkpoint gets one of them whole",
          "[checkpoint]") {
  // The hook runs after every rank read the index and before any chunk is read: a save there
  // replaces every file under the load, which must notice and read the new checkpoint whole
  // instead of reporting the old index's checksums as corruption.
  const int64_t w = dt::world_size();
  const dt::DeviceMesh mesh = mesh_1d();
  const dt::Shape shape = {3 * w + 1, 3};
  const dt::Placements s0 = {dt::Shard(0)}, r = {dt::Replicate()};
  auto state = [&](int v) {
    return ck::StateDict{{"x", expected(shape, dt::kFloat32, v, mesh, s0)},
                         {"y", expected({5}, dt::kInt64, v + 50, mesh, r)}};
  };
  auto holds = [&](const ck::StateDict& t, int v) {
    return dt::equal(t[0].second.full_tensor(), expected_full(shape, dt::kFloat32, v)) &&
           dt::equal(t[1].second.full_tensor(), expected_full({5}, dt::kInt64, v + 50));
  };
  const std::string dir = test_dir("replaced");
  const bool no_exchange = GENERATE(false, true);
  INFO("DTENSOR_CKPT_NO_EXCHANGE=" << no_exchange);
  const dt::test::ScopedEnv env("DTENSOR_CKPT_NO_EXCHANGE", no_exchange ? "1" : nullptr);
  ck::save(state(1), dir);

  SECTION("replaced once: the load reads the new checkpoint") {
    int reads = 0;
    ck::LoadOptions opts;
    opts.after_index = [&] {
      if (reads++ == 0) ck::save(state(2), dir);
    };
    const ck::StateDict t = sentinels(state(1));
    ck::load(t, dir, opts);
    CHECK(reads == 2);
    CHECK(holds(t, 2));
  }

  SECTION("replaced during every read: 'being replaced', no target modified") {
    int v = 1;
    ck::LoadOptions opts;
    opts.after_index = [&] { ck::save(state(++v), dir); };
    const ck::StateDict t = sentinels(state(1));
    std::string msg;
    try {
      ck::load(t, dir, opts);
    } catch (const dt::Error& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("[checkpoint::load] checkpoint '" + dir + "' is being replaced") !=
          std::string::npos);
    CHECK(holds_42(t[0].second));
    CHECK(holds_42(t[1].second));
    // The last save is complete and loads.
    ck::load(t, dir);
    CHECK(holds(t, v));
  }
}

TEST_CASE("checkpoint: a save interrupted before the commit leaves the old checkpoint",
          "[checkpoint]") {
  const dt::DeviceMesh mesh = mesh_1d();
  const dt::Shape shape = {3 * dt::world_size() + 1, 3};
  const std::string dir = test_dir("interrupted");
  const dt::Placements s0 = {dt::Shard(0)};
  ck::save({{"x", expected(shape, dt::kFloat32, 1, mesh, s0)}}, dir);
  ck::SaveOptions crash;
  // Raised on the last rank alone: every rank must raise it (and none commit or hang).
  crash.before_commit = [] {
    if (dt::world_rank() == dt::world_size() - 1) throw std::runtime_error("simulated crash");
  };
  REQUIRE_THROWS_WITH(ck::save({{"x", expected(shape, dt::kFloat32, 2, mesh, s0)}}, dir, crash),
                      Catch::Contains("simulated crash"));
  barrier();
  ck::StateDict t = {{"x", target(shape, dt::kFloat32, mesh, s0)}};
  ck::load(t, dir);
  CHECK(dt::equal(t[0].second.full_tensor(), expected_full(shape, dt::kFloat32, 1)));
  // The leftover temporary directory does not disturb the next save.
  CHECK(std::filesystem::exists(dir + ".tmp"));
  ck::save({{"x", expected(shape, dt::kFloat32, 3, mesh, s0)}}, dir);
  ck::load(t, dir);
  CHECK(dt::equal(t[0].second.full_tensor(), expected_full(shape, dt::kFloat32, 3)));
  CHECK(!std::filesystem::exists(dir + ".tmp"));
}

namespace {

// A tensor-parallel MLP trained with AdamW on inputs drawn from the default generator, so the
// model, the optimizer state and the RNG state all matter for the next steps.
struct Run {
  std::unique_ptr<nn::MLP> model;
  std::unique_ptr<dt::optim::AdamW> opt;

  explicit Run(uint64_t seed) {
    dt::manual_seed(seed);
    model = std::make_unique<nn::MLP>(6, 2 * dt::world_size() + 1, nn::Activation::kGelu);
    dt::parallelize_module(*model, mesh_1d(),
                           {{"fc1", dt::ColwiseParallel()}, {"fc2", dt::RowwiseParallel()}});
    opt = std::make_unique<dt::optim::AdamW>(model->parameters(), dt::optim::AdamWOptions(1e-2));
  }
  void steps(int n) {
    for (int i = 0; i < n; ++i) {
      opt->zero_grad();
      const dt::DTensor x = nn::local_dtensor(dt::randn({4, 6}));
      const dt::DTensor y = (*model)(x);
      dt::sum(dt::mul(y, y)).backward();
      opt->step();
    }
  }
};

}  // namespace

TEST_CASE("checkpoint: resuming from step k equals the uninterrupted run bit for bit",
          "[checkpoint][resume]") {
  const std::string dir = test_dir("resume");
  Run a(7);
  a.steps(3);
  ck::save_training_state(a.model.get(), a.opt.get(), &dt::default_generator(), dir);
  a.steps(4);

  Run b(99);  // other weights, no optimizer state, another RNG stream
  dt::manual_seed(12345);
  ck::load_training_state(b.model.get(), b.opt.get(), &dt::default_generator(), dir);
  CHECK(b.opt->step_count() == 3);
  b.steps(4);
  const auto pa = a.model->named_parameters();
  const auto pb = b.model->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(pa[i].second.placements() == pb[i].second.placements());
    CHECK(dt::equal(pa[i].second.to_local(), pb[i].second.to_local()));
  }
}

// A scheduler's state travels with the training state (round 7c), and the optimizer's
// hyper-parameters with the optimizer's (PyTorch's param_groups): a run resumed into an
// optimizer built with another learning rate and a fresh scheduler follows the saved schedule
// and lands on the uninterrupted run's parameters bit for bit. Before, the checkpoint held
// neither: the resumed run restarted the warmup from the constructor's learning rate.
TEST_CASE("checkpoint: the scheduler and the optimizer's hyper-parameters resume the schedule",
          "[checkpoint][resume]") {
  namespace optim = dt::optim;
  const std::string dir = test_dir("resume_sched"), old_dir = test_dir("resume_sched_old");
  auto schedule = [](optim::Optimizer& opt) {
    std::vector<std::unique_ptr<optim::LRScheduler>> parts;
    parts.push_back(std::make_unique<optim::LinearLR>(opt, 0.25, 1.0, 2));
    parts.push_back(std::make_unique<optim::CosineAnnealingLR>(opt, 5, 1e-4));
    return std::make_unique<optim::SequentialLR>(opt, std::move(parts), std::vector<int64_t>{2});
  };
  auto train = [](Run& r, optim::LRScheduler& s, int n, std::vector<double>* lrs) {
    for (int i = 0; i < n; ++i) {
      lrs->push_back(r.opt->lr());
      r.steps(1);
      s.step();
    }
  };
  Run a(7);
  auto sa = schedule(*a.opt);
  std::vector<double> want, got;
  train(a, *sa, 3, &want);
  ck::save_training_state(a.model.get(), a.opt.get(), sa.get(), &dt::default_generator(), dir);
  // The same state without the new entries, as a checkpoint of an earlier build.
  ck::StateDict old_state;
  for (auto& [name, t] : ck::training_state(a.model.get(), a.opt.get(), sa.get(), nullptr)) {
    if (!name.starts_with("optim.param_groups.") && !name.starts_with("lr_scheduler."))
      old_state.emplace_back(name, t);
  }
  ck::save(old_state, old_dir);
  train(a, *sa, 4, &want);

  Run b(99);
  b.opt->set_lr(0.5);  // another constructor's learning rate: the loaded one wins
  auto sb = schedule(*b.opt);
  dt::manual_seed(12345);
  ck::load_training_state(b.model.get(), b.opt.get(), sb.get(), &dt::default_generator(), dir);
  CHECK(sb->last_epoch() == 3);
  CHECK(sb->base_lr() == 1e-2);
  CHECK(*b.opt->initial_lr() == 1e-2);
  CHECK(b.opt->lr() == want[3]);
  got.assign(want.begin(), want.begin() + 3);
  train(b, *sb, 4, &got);
  CHECK(got == want);
  const auto pa = a.model->named_parameters();
  const auto pb = b.model->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(dt::equal(pa[i].second.to_local(), pb[i].second.to_local()));
  }
  // A checkpoint without them loads: the optimizer keeps the constructor's options and the
  // scheduler its first step (the schedule restarts, as it always did).
  Run c(5);
  c.opt->set_lr(0.5);
  auto sc = schedule(*c.opt);
  ck::load_training_state(c.model.get(), c.opt.get(), sc.get(), nullptr, old_dir);
  CHECK(c.opt->step_count() == 3);
  CHECK(sc->last_epoch() == 0);
  CHECK(c.opt->lr() == 0.5 * 0.25);
  CHECK(*c.opt->initial_lr() == 0.5);
}

// Another optimizer's checkpoint (AdamW's states loaded into SGD) is refused on every rank
// before anything is loaded: the model keeps its parameters. Before, the optimizer's checks ran
// after the model was loaded (and, until round 7c, the AdamW states were dropped silently).
TEST_CASE("checkpoint: another optimizer's training state is refused with nothing loaded",
          "[checkpoint][resume]") {
  const std::string dir = test_dir("other_optimizer");
  Run a(7);
  a.steps(2);
  ck::save_training_state(a.model.get(), a.opt.get(), nullptr, dir);
  Run b(99);
  dt::optim::SGD sgd(b.model->parameters(), dt::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<dt::Tensor> before;
  for (const auto& [name, p] : b.model->named_parameters()) before.push_back(p.to_local().clone());
  CHECK_THROWS_WITH(ck::load_training_state(b.model.get(), &sgd, nullptr, dir),
                    Catch::Contains("names no state of SGD"));
  const auto after = b.model->named_parameters();
  for (size_t i = 0; i < after.size(); ++i) CHECK(dt::equal(after[i].second.to_local(), before[i]));
  CHECK(sgd.step_count() == 0);
  CHECK(sgd.options().lr() == 0.1);
}

// A hand-edited checkpoint with an invalid hyper-parameter value (the optimizer's or the
// scheduler's), or another kind of scheduler's state, is refused on every rank before anything
// is written (round 8b): the model keeps its parameters, the optimizer and the scheduler their
// state. Before, the values were read with the model's parameters and refused after those
// were overwritten (and the scheduler's hyper-parameters were not saved at all).
TEST_CASE("checkpoint: invalid hyper-parameter values are refused with nothing loaded",
          "[checkpoint][resume]") {
  namespace optim = dt::optim;
  Run a(7);
  optim::StepLR sa(*a.opt, 2, 0.5);
  a.steps(2);
  sa.step();
  // The training state with entry `name` replaced by `value`, saved in test_dir(`tag`).
  auto save_edited = [&](const std::string& tag, const std::string& name, dt::DTensor value) {
    const std::string dir = test_dir(tag);
    ck::StateDict state = ck::training_state(a.model.get(), a.opt.get(), &sa, nullptr);
    for (auto& [n, t] : state) {
      if (n == name) t = value;
    }
    ck::save(state, dir);
    return dir;
  };
  const std::string bad_lr = save_edited("bad_lr", "optim.param_groups.lr",
                                         dt::local_dtensor(dt::from_vector<double>({-1.0}, {1})));
  const std::string bad_step = save_edited("bad_step_size", "lr_scheduler.step_size",
                                           dt::local_dtensor(dt::from_vector<int64_t>({0}, {1})));
  Run b(99);
  optim::StepLR sb(*b.opt, 3, 0.1);
  optim::CosineAnnealingLR cosine(*b.opt, 4);
  std::vector<dt::Tensor> before;
  for (const auto& [name, p] : b.model->named_parameters()) before.push_back(p.to_local().clone());
  CHECK_THROWS_WITH(ck::load_training_state(b.model.get(), b.opt.get(), &sb, nullptr, bad_lr),
                    Catch::Contains("[AdamW]") && Catch::Contains("lr") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(ck::load_training_state(b.model.get(), b.opt.get(), &sb, nullptr, bad_step),
                    Catch::Contains("[StepLR] step_size 0, expected > 0"));
  const std::string good = test_dir("good_step");
  ck::save_training_state(a.model.get(), a.opt.get(), &sa, nullptr, good);
  CHECK_THROWS_WITH(ck::load_training_state(b.model.get(), b.opt.get(), &cosine, nullptr, good),
                    Catch::Contains("names no state of CosineAnnealingLR"));
  const auto after = b.model->named_parameters();
  for (size_t i = 0; i < after.size(); ++i) CHECK(dt::equal(after[i].second.to_local(), before[i]));
  CHECK(b.opt->step_count() == 0);
  CHECK(b.opt->lr() == 1e-2);
  CHECK(sb.last_epoch() == 0);
  CHECK(cosine.last_epoch() == 0);
}

// BatchNorm's running statistics are buffers (Module::named_buffers) and travel with the
// parameters, as in PyTorch's state_dict: before, they were not saved, and a model loaded from a
// checkpoint evaluated with fresh statistics (mean 0, var 1) -- silently different outputs.
TEST_CASE("checkpoint: a module's buffers (BatchNorm's running statistics) are saved and loaded",
          "[checkpoint][buffers]") {
  const std::string dir = test_dir("buffers");
  dt::manual_seed(3);
  nn::BatchNorm1d a(3, 1e-5, std::nullopt);  // momentum None: the count matters too
  for (int i = 0; i < 3; ++i) a(nn::local_dtensor(dt::randn({5, 3})));
  const auto names = a.named_buffers();
  REQUIRE(names.size() == 3);
  CHECK(names[0].first == "running_mean");
  CHECK(names[1].first == "running_var");
  CHECK(names[2].first == "num_batches_tracked");
  CHECK(a.num_batches_tracked() == 3);
  ck::save_training_state(&a, nullptr, nullptr, dir);

  nn::BatchNorm1d b(3, 1e-5, std::nullopt);
  ck::load_training_state(&b, nullptr, nullptr, dir);
  CHECK(b.num_batches_tracked() == 3);
  CHECK(dt::equal(b.running_mean().to_local(), a.running_mean().to_local()));
  CHECK(dt::equal(b.running_var().to_local(), a.running_var().to_local()));
  a.eval();
  b.eval();
  const dt::DTensor x = nn::local_dtensor(dt::randn({4, 3}));
  CHECK(dt::equal(a(x).to_local(), b(x).to_local()));
  // The loaded statistics are the module's own: a further training step updates them.
  b.train();
  b(x);
  CHECK(b.num_batches_tracked() == 4);
  CHECK_FALSE(dt::equal(b.running_mean().to_local(), a.running_mean().to_local()));
}
