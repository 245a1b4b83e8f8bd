// Hugging Face directories in and out (checkpoint/hf.h) under mpirun (1, 2 and 4 ranks): the
// committed tiny Llama (transformers' own save_pretrained output) loaded into a stand-in module
// with its parameter names under every placement on 1-D and 2-D meshes and into local tensors,
// equal to the file read whole by an independent reader; bf16 / f16 conversions equal to
// PyTorch's (tests/data/hf_dtypes); save_hf's single and sharded layouts (file names, the
// index, the split, the metadata, stale files) read back equal, across layouts and, through the
// hidden [.hf_save_w2] / [.hf_load_w2] cases that ctest runs at 2 then 1 and 4 ranks, across
// world sizes; tied parameters (parameter_aliases) loaded from either name and saved once;
// every error raised on every rank with no parameter changed.
#include <absl/strings/str_cat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "ckpt_test_util.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/tensor/compare.h"
#include "hf_test_util.h"

namespace ck = dtensor::checkpoint;
namespace fs = std::filesystem;
using namespace ckpt_test;
using namespace hf_test;

namespace {

std::string test_dir(const std::string& name) {
  return absl::StrCat("hf_np", dt::world_size(), "_", name);
}

// A fresh empty directory (rank 0 makes it; every rank returns after it exists).
std::string fresh_dir(const std::string& name) {
  const std::string dir = test_dir(name);
  if (dt::world_rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  barrier();
  return dir;
}

// The placements for a tensor of `ndim` dims: a Shard of a dim it lacks becomes Shard(0) (the
// norm weights are 1-D).
dt::Placements fit(const dt::Placements& p, size_t ndim) {
  dt::Placements out = p;
  for (auto& pl : out) {
    if (pl.is_shard() && static_cast<size_t>(pl.dim()) >= ndim) pl = dt::Shard(0);
  }
  return out;
}

// The stand-in for the tiny Llama: its parameter names and shapes (`params`), every parameter
// holding 42 in `dtype`, laid out by (mesh, placements), or local when `mesh` is not given.
std::shared_ptr<Holder> stand_in(const std::optional<dt::DeviceMesh>& mesh,
                                 const dt::Placements& placements,
                                 std::vector<std::pair<std::string, dt::Shape>> params,
                                 dt::DType dtype = dt::kFloat32) {
  return make_tree(params, [&](const std::string&, const dt::Shape& shape) {
    const dt::Tensor v = dt::full(shape, 42, dt::TensorOptions(dtype));
    if (!mesh) return dt::local_dtensor(v);
    return dt::distribute_tensor(v, *mesh, fit(placements, shape.size()), std::nullopt);
  });
}

// Every parameter of `m` equals the entry of the same name in `whole`, converted to its dtype.
void check_equal(const dt::nn::Module& m, const std::map<std::string, dt::Tensor>& whole) {
  for (const auto& [name, p] : m.named_parameters()) {
    INFO(name);
    REQUIRE(whole.contains(name));
    CHECK(dt::equal(p.full_tensor(), whole.at(name).to(p.dtype())));
  }
}

// No parameter of `m` changed from 42 (a failed load writes nothing).
bool untouched(const dt::nn::Module& m) {
  for (const auto& [name, p] : m.named_parameters()) {
    const dt::Tensor& l = p.to_local();
    if (!dt::equal(l, dt::full(l.shape(), 42, dt::TensorOptions(l.dtype())))) return false;
  }
  return true;
}

std::vector<std::pair<dt::DeviceMesh, dt::Placements>> all_layouts() {
  std::vector<std::pair<dt::DeviceMesh, dt::Placements>> out;
  for (const auto& p : placements_1d()) out.emplace_back(mesh_1d(), p);
  for (const auto& p : placements_2d()) out.emplace_back(mesh_2d(), p);
  return out;
}

const std::map<std::string, dt::Tensor>& tiny_whole() {
  static const auto whole = read_whole(kTinyLlama + "/model.safetensors");
  return whole;
}

// The tiny Llama loaded under [Shard(0), Shard(1)] (a 2-D mesh), for the save tests.
std::shared_ptr<Holder> loaded_tiny() {
  auto m = stand_in(mesh_2d(), {dt::Shard(0), dt::Shard(1)}, tiny_llama_params());
  ck::load_hf(*m, kTinyLlama);
  return m;
}

}  // namespace

TEST_CASE("load_hf: the tiny Llama into every placement on 1-D and 2-D meshes", "[hf]") {
  for (const auto& [mesh, placements] : all_layouts()) {
    INFO(dt::placements_str(placements) << " on a mesh of " << mesh.size());
    auto m = stand_in(mesh, placements, tiny_llama_params());
    const ck::HfLoadResult r = ck::load_hf(*m, kTinyLlama);
    CHECK(r.missing_keys.empty());
    CHECK(r.unexpected_keys.empty());
    check_equal(*m, tiny_whole());
  }
  // Local (self-mesh) parameters: every rank reads every tensor whole.
  auto local = stand_in(std::nullopt, {}, tiny_llama_params());
  ck::load_hf(*local, kTinyLlama);
  check_equal(*local, tiny_whole());
}

TEST_CASE("load_hf: bf16 and f16 entries load converted as PyTorch's copy_ converts", "[hf]") {
  // hf_dtypes holds a float32 tensor and PyTorch's bf16 and f16 conversions of it.
  const auto whole = read_whole(kDtypes + "/model.safetensors");
  const dt::Tensor& f32 = whole.at("f32.weight");
  const dt::Tensor& bf16 = whole.at("bf16.weight");
  const dt::Tensor& f16 = whole.at("f16.weight");
  for (const auto& [mesh, placements] : all_layouts()) {
    INFO(dt::placements_str(placements));
    for (const dt::DType target : {dt::kFloat32, dt::kBFloat16, dt::kFloat16}) {
      ck::StateDict state;
      for (const char* name : {"f32.weight", "bf16.weight", "f16.weight"}) {
        state.emplace_back(name, ckpt_test::target(f32.shape(), target, mesh, placements));
      }
      ck::load_hf(state, kDtypes);
      INFO("into " << dt::dtype_name(target));
      const dt::Tensor from_f32 = state[0].second.full_tensor();
      // float32 -> bf16 / f16 rounds as PyTorch does (to nearest even, f16 overflow to inf).
      if (target == dt::kBFloat16) CHECK(dt::equal(from_f32, bf16));
      if (target == dt::kFloat16) CHECK(dt::equal(from_f32, f16));
      if (target == dt::kFloat32) CHECK(dt::equal(from_f32, f32));
      CHECK(dt::equal(state[1].second.full_tensor(), bf16.to(target)));
      CHECK(dt::equal(state[2].second.full_tensor(), f16.to(target)));
    }
  }
}

TEST_CASE("save_hf: dtype writes bf16 and f16 as PyTorch converts", "[hf]") {
  const auto whole = read_whole(kDtypes + "/model.safetensors");
  const dt::Tensor& f32 = whole.at("f32.weight");
  const dt::DeviceMesh mesh = mesh_1d();
  ck::StateDict state = {
      {"w", dt::distribute_tensor(f32, mesh, {dt::Shard(1)}, std::nullopt)},
      {"ids", dt::distribute_tensor(dt::arange(8), mesh, {dt::Shard(0)}, std::nullopt)}};
  for (const auto& [dtype, name, st] : {std::tuple{dt::kBFloat16, "bf16.weight", "BF16"},
                                        std::tuple{dt::kFloat16, "f16.weight", "F16"}}) {
    const std::string dir = fresh_dir(absl::StrCat("dtype_", st));
    ck::HfSaveOptions options;
    options.dtype = dtype;
    ck::save_hf(state, dir, options);
    const auto written = read_whole(dir + "/model.safetensors");
    CHECK(dt::equal(written.at("w"), whole.at(name)));
    CHECK(header_of(dir + "/model.safetensors")["w"]["dtype"] == st);
    // Integer parameters are written as they are (as model.to(dtype) leaves them).
    CHECK(dt::equal(written.at("ids"), dt::arange(8)));
  }
}

TEST_CASE("save_hf: the tiny Llama written back as one file, as transformers wrote it", "[hf]") {
  auto m = loaded_tiny();
  const std::string dir = fresh_dir("single");
  if (dt::world_rank() == 0) {
    // Weight files of an earlier save go; other files (a tokenizer) stay.
    for (const char* stale :
         {"model-00001-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json"}) {
      std::ofstream(dir + "/" + stale) << "{}";
    }
  }
  barrier();
  ck::HfSaveOptions options;
  options.config_json = ck::read_hf_config(kTinyLlama);
  ck::save_hf(*m, dir, options);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"config.json", "model.safetensors", "tokenizer.json"});
  CHECK(read_bytes(dir + "/config.json") == read_bytes(kTinyLlama + "/config.json"));
  const auto header = header_of(dir + "/model.safetensors");
  CHECK(header["__metadata__"]["format"] == "pt");
  const auto written = read_whole(dir + "/model.safetensors");
  CHECK(written.size() == tiny_whole().size());
  for (const auto& [name, t] : tiny_whole()) {
    INFO(name);
    REQUIRE(written.contains(name));
    CHECK(header[name]["dtype"] == "F32");
    CHECK(dt::equal(written.at(name), t));
  }
}

TEST_CASE("save_hf: a sharded set split as transformers splits it, reloaded equal", "[hf]") {
  auto m = loaded_tiny();
  const std::string dir = fresh_dir("sharded");
  ck::HfSaveOptions options;
  options.max_shard_bytes = 100000;
  ck::save_hf(*m, dir, options);
  // The files transformers 5.24's save_pretrained(max_shard_size=100000) writes for the tiny
  // Llama (its index, run by hand; CI has no PyTorch): the split in entry-name order.
  const std::vector<std::vector<std::string>> expected = {
      {"lm_head.weight"},
      {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"},
      {"model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.gate_proj.weight"},
      {"model.layers.0.mlp.up_proj.weight", "model.layers.0.post_attention_layernorm.weight",
       "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.o_proj.weight",
       "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
       "model.layers.1.input_layernorm.weight"},
      {"model.layers.1.mlp.down_proj.weight", "model.layers.1.mlp.gate_proj.weight"},
      {"model.layers.1.mlp.up_proj.weight", "model.layers.1.post_attention_layernorm.weight",
       "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.o_proj.weight",
       "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.v_proj.weight",
       "model.norm.weight"}};
  const auto index = nlohmann::json::parse(read_bytes(dir + "/model.safetensors.index.json"));
  REQUIRE(index["weight_map"].size() == tiny_whole().size());
  for (size_t k = 0; k < expected.size(); ++k) {
    const std::string file = absl::StrFormat("model-%05d-of-00006.safetensors", k + 1);
    const auto written = read_whole(dir + "/" + file);
    CHECK(written.size() == expected[k].size());
    for (const std::string& name : expected[k]) {
      INFO(name);
      CHECK(index["weight_map"][name] == file);
      REQUIRE(written.contains(name));
      CHECK(dt::equal(written.at(name), tiny_whole().at(name)));
    }
  }
  int64_t total = 0;
  for (const auto& [name, p] : m->named_parameters()) total += p.numel();
  CHECK(index["metadata"]["total_size"] == total * 4);
  CHECK(index["metadata"]["total_parameters"] == total);
  CHECK(!fs::exists(dir + "/model.safetensors"));
  // Reloaded into other layouts: equal.
  for (const auto& [mesh, placements] : all_layouts()) {
    auto back = stand_in(mesh, placements, tiny_llama_params());
    ck::load_hf(*back, dir);
    check_equal(*back, tiny_whole());
  }
  // A sharded save over a single-file one removes model.safetensors (from_pretrained would read
  // it first) and vice versa.
  ck::save_hf(*m, dir, {});
  CHECK(fs::exists(dir + "/model.safetensors"));
  CHECK(!fs::exists(dir + "/model.safetensors.index.json"));
  CHECK(!fs::exists(dir + "/model-00001-of-00006.safetensors"));
}

TEST_CASE("save_hf -> load_hf between local and sharded parameters", "[hf]") {
  // Saved from local tensors (a one-process view: rank 0 writes), loaded sharded, and back.
  auto local = stand_in(std::nullopt, {}, tiny_llama_params());
  ck::load_hf(*local, kTinyLlama);
  const std::string dir = fresh_dir("local");
  ck::save_hf(*local, dir);
  auto sharded = stand_in(mesh_2d(), {dt::Shard(1), dt::Shard(0)}, tiny_llama_params());
  ck::load_hf(*sharded, dir);
  check_equal(*sharded, tiny_whole());
  const std::string dir2 = fresh_dir("from_sharded");
  ck::save_hf(*sharded, dir2);
  auto local2 = stand_in(std::nullopt, {}, tiny_llama_params());
  ck::load_hf(*local2, dir2);
  check_equal(*local2, tiny_whole());
}

TEST_CASE("load_hf: rename maps and strict = false", "[hf]") {
  const dt::DeviceMesh mesh = mesh_1d();
  auto params = tiny_llama_params();
  params.back().first = "output.weight";  // Meta's name for lm_head
  auto m = stand_in(mesh, {dt::Shard(0)}, params);
  ck::HfLoadOptions options;
  options.rename = ck::hf_rename_map({{"lm_head.weight", "output.weight"}});
  ck::load_hf(*m, kTinyLlama, options);
  CHECK(dt::equal(m->get_parameter("output.weight").full_tensor(),
                  tiny_whole().at("lm_head.weight")));
  // An empty name drops the entry.
  params.pop_back();
  auto no_head = stand_in(mesh, {dt::Shard(0)}, params);
  options.rename = [](const std::string& n) { return n == "lm_head.weight" ? "" : n; };
  ck::load_hf(*no_head, kTinyLlama, options);
  check_equal(*no_head, tiny_whole());
  // strict = false reports what did not match and loads the rest.
  params.push_back({"extra.weight", {3}});
  auto partial = stand_in(mesh, {dt::Shard(0)}, params);
  options = {};
  options.strict = false;
  const ck::HfLoadResult r = ck::load_hf(*partial, kTinyLlama, options);
  CHECK(r.missing_keys == std::vector<std::string>{"extra.weight"});
  CHECK(r.unexpected_keys == std::vector<std::string>{"lm_head.weight"});
  CHECK(dt::equal(partial->get_parameter("model.norm.weight").full_tensor(),
                  tiny_whole().at("model.norm.weight")));
}

// The tiny Llama's stand-in with lm_head.weight tied to the embedding (as tie_word_embeddings
// does), every parameter 42, on a 1-D mesh; parameter_aliases() names the tie.
std::shared_ptr<Holder> tied_stand_in() {
  auto m = stand_in(mesh_1d(), {dt::Shard(0)}, tiny_llama_params());
  auto head = std::make_shared<Holder>();
  head->tie_parameter("weight", m->get_parameter("model.embed_tokens.weight"));
  m->register_module("lm_head", head);
  return m;
}

TEST_CASE("load_hf: a tied parameter loads from either name; both must agree", "[hf]") {
  const auto m0 = tied_stand_in();
  REQUIRE(m0->parameter_aliases() == std::vector<std::pair<std::string, std::string>>{
                                         {"lm_head.weight", "model.embed_tokens.weight"}});
  // Directories holding the tiny Llama's tensors under chosen names (save_hf of named
  // DTensors writes exactly those names).
  const std::map<std::string, dt::Tensor>& whole = tiny_whole();
  const dt::Tensor& embed = whole.at("model.embed_tokens.weight");
  const auto write = [&](const std::string& name, bool canonical, bool alias) {
    ck::StateDict state;
    for (const auto& [n, t] : whole) {
      if (n == "lm_head.weight" || n == "model.embed_tokens.weight") continue;
      state.emplace_back(n, dt::local_dtensor(t));
    }
    if (canonical) state.emplace_back("model.embed_tokens.weight", dt::local_dtensor(embed));
    if (alias) state.emplace_back("lm_head.weight", dt::local_dtensor(embed));
    const std::string dir = fresh_dir(name);
    ck::save_hf(state, dir);
    return dir;
  };
  // transformers' save_pretrained of a tied model (no lm_head.weight), a file that holds the
  // same table under both names, and one that holds it as lm_head.weight only: each loads
  // strictly, the table once.
  for (const auto& [name, canonical, alias] :
       {std::tuple{"tied_canonical", true, false}, std::tuple{"tied_both", true, true},
        std::tuple{"tied_alias_only", false, true}}) {
    INFO(name);
    auto m = tied_stand_in();
    const ck::HfLoadResult r = ck::load_hf(*m, write(name, canonical, alias));
    CHECK(r.missing_keys.empty());
    CHECK(r.unexpected_keys.empty());
    check_equal(*m, whole);  // every parameter, the tied table listed once
    CHECK(dt::equal(m->get_parameter("lm_head.weight").full_tensor(), embed));
  }
  // A save of the tied module writes the table once, under its canonical name (as
  // save_pretrained leaves the tied lm_head.weight out).
  {
    auto m = tied_stand_in();
    ck::load_hf(*m, write("tied_resave_src", true, false));
    const std::string dir = fresh_dir("tied_resave");
    ck::save_hf(*m, dir);
    const nlohmann::json header = header_of(dir + "/model.safetensors");
    CHECK(header.contains("model.embed_tokens.weight"));
    CHECK_FALSE(header.contains("lm_head.weight"));
  }
}

TEST_CASE("load_hf: errors name the tensor and the file, on every rank; nothing changes", "[hf]") {
  const dt::DeviceMesh mesh = mesh_1d();
  const dt::Placements s1 = {dt::Shard(1)};
  auto expect_error = [&](const std::shared_ptr<Holder>& m, const std::string& dir,
                          const std::vector<std::string>& parts) {
    try {
      ck::load_hf(*m, dir);
      FAIL("no error");
    } catch (const dt::Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.starts_with("[load_hf]"));
      for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
    }
    CHECK(untouched(*m));
  };
  const std::string tiny_file = kTinyLlama + "/model.safetensors";

  SECTION("a tied parameter's two entries differ") {
    // The committed tiny Llama is untied: its lm_head.weight differs from the embedding.
    // transformers' from_pretrained would untie the pair (with a warning); a tied module cannot.
    expect_error(tied_stand_in(), kTinyLlama,
                 {"entries 'model.embed_tokens.weight' and 'lm_head.weight' are the tied "
                  "parameter 'model.embed_tokens.weight' but hold different values",
                  "tie_word_embeddings = false"});
  }
  SECTION("missing") {
    auto params = tiny_llama_params();
    params.push_back({"extra.weight", {3}});
    expect_error(stand_in(mesh, s1, params), kTinyLlama, {"1 missing", "'extra.weight'"});
  }
  SECTION("unexpected") {
    auto params = tiny_llama_params();
    params.pop_back();
    expect_error(stand_in(mesh, s1, params), kTinyLlama,
                 {"1 unexpected", "'lm_head.weight' in '" + tiny_file + "'"});
  }
  SECTION("wrong shape") {
    auto params = tiny_llama_params();
    params.back().second = {256, 32};
    expect_error(stand_in(mesh, s1, params), kTinyLlama,
                 {"entry 'lm_head.weight' of file '" + tiny_file + "'", "[256, 64]", "[256, 32]"});
  }
  SECTION("wrong dtype: a float entry into an integer parameter") {
    expect_error(
        stand_in(mesh, s1, tiny_llama_params(), dt::kInt64), kTinyLlama,
        {"entry 'model.embed_tokens.weight' of file '" + tiny_file + "'", "float32", "int64"});
  }
  SECTION("wrong dtype: an integer entry into a float parameter") {
    const std::string dir = fresh_dir("int_entry");
    ck::save_hf(
        {{"model.norm.weight", dt::local_dtensor(dt::zeros({64}, dt::TensorOptions(dt::kInt64)))}},
        dir);
    expect_error(stand_in(mesh, s1, {{"model.norm.weight", {64}}}), dir,
                 {"entry 'model.norm.weight'", "int64", "float32", "only a floating entry"});
  }
  SECTION("truncated file") {
    const std::string dir = fresh_dir("truncated");
    if (dt::world_rank() == 0) {
      fs::copy_file(tiny_file, dir + "/model.safetensors");
      fs::resize_file(dir + "/model.safetensors", 300000);
    }
    barrier();
    expect_error(stand_in(mesh, s1, tiny_llama_params()), dir,
                 {"file '" + dir + "/model.safetensors' is truncated", "entry '"});
  }
  SECTION("bad header") {
    const std::string dir = fresh_dir("bad_header");
    if (dt::world_rank() == 0) {
      std::string blob = read_bytes(tiny_file);
      blob.replace(8, 4, "XXXX");
      std::ofstream(dir + "/model.safetensors", std::ios::binary) << blob;
    }
    barrier();
    expect_error(stand_in(mesh, s1, tiny_llama_params()), dir,
                 {"file '" + dir + "/model.safetensors' is corrupt"});
  }
  SECTION("no weights") {
    const std::string dir = fresh_dir("empty");
    expect_error(stand_in(mesh, s1, tiny_llama_params()), dir,
                 {"holds no Hugging Face weights", "model.safetensors.index.json"});
  }
  SECTION("an index naming a file without the entry, or a path outside") {
    const std::string dir = fresh_dir("bad_index");
    if (dt::world_rank() == 0) {
      fs::copy_file(tiny_file, dir + "/model-00001-of-00001.safetensors");
      std::ofstream(dir + "/model.safetensors.index.json")
          << R"({"weight_map": {"model.norm.weight": "model-00001-of-00001.safetensors",
                                "no.such.weight": "model-00001-of-00001.safetensors"}})";
    }
    barrier();
    expect_error(
        stand_in(mesh, s1, {{"model.norm.weight", {64}}}), dir,
        {"tensor 'no.such.weight'", "model-00001-of-00001.safetensors", "has no such entry"});
    if (dt::world_rank() == 0) {
      std::ofstream(dir + "/model.safetensors.index.json")
          << R"({"weight_map": {"model.norm.weight": "../model.safetensors"}})";
    }
    barrier();
    expect_error(stand_in(mesh, s1, {{"model.norm.weight", {64}}}), dir,
                 {"'model.norm.weight'", "not a file name inside the directory"});
  }
}

TEST_CASE("save_hf: errors on every rank", "[hf]") {
  const std::string dir = fresh_dir("save_errors");
  auto expect_error = [&](const ck::StateDict& state, const ck::HfSaveOptions& options,
                          const std::string& part) {
    try {
      ck::save_hf(state, dir, options);
      FAIL("no error");
    } catch (const dt::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(part) != std::string::npos);
    }
  };
  const dt::DTensor a = dt::local_dtensor(dt::zeros({4}));
  ck::HfSaveOptions options;
  options.rename = [](const std::string&) { return std::string("same"); };
  expect_error({{"a", a}, {"b", a}}, options, "parameters 'a' and 'b' would both be written as");
  options = {};
  options.dtype = dt::kInt32;
  expect_error({{"a", a}}, options, "dtype int32 is not a floating dtype");
  options = {};
  options.config_json = "{not json";
  expect_error({{"a", a}}, options, "config_json is not valid JSON");
  const dt::DTensor partial = dt::DTensor::from_local(dt::zeros({4}), mesh_1d(), {dt::Partial()});
  expect_error({{"p", partial}}, {}, "tensor 'p' has Partial placements");
}

// Across world sizes (ctest runs [.hf_save_w2] at 2 ranks, then [.hf_load_w2] at 1 and 4).
TEST_CASE("save_hf at 2 ranks, sharded set", "[.hf_save_w2]") {
  auto m = stand_in(mesh_1d(), {dt::Shard(1)}, tiny_llama_params());
  ck::load_hf(*m, kTinyLlama);
  ck::HfSaveOptions options;
  options.max_shard_bytes = 100000;
  ck::save_hf(*m, "hf_fixture_w2", options);
}

TEST_CASE("load_hf of the 2-rank save at another world size", "[.hf_load_w2]") {
  for (const auto& [mesh, placements] : all_layouts()) {
    auto m = stand_in(mesh, placements, tiny_llama_params());
    ck::load_hf(*m, "hf_fixture_w2");
    check_equal(*m, tiny_whole());
  }
}
