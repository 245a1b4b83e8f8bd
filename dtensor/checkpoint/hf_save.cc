// save_hf: plan the files as save_pretrained does (names, order, split by size), let rank 0
// create each file with its header at its full size, let every rank write its shards' bytes
// at their positions, then let rank 0 write the index and config.json.
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <system_error>

#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/checkpoint/detail/hf_format.h"
#include "dtensor/checkpoint/detail/safetensors.h"
#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor::checkpoint {

namespace {

constexpr std::string_view kOp = "save_hf";

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; save_hf writes memory as it lies");

// What is written: the tensors under their entry names, the dtype of each, and the files.
struct Plan {
  StateDict tensors;  // entry name -> the DTensor
  std::vector<DType> dtypes;
  struct File {
    std::string name;
    std::vector<size_t> tensors;  // indices into `tensors`, in order
    detail::SafetensorsLayout layout;
  };
  std::vector<File> files;
  uint64_t total_parameters = 0, total_size = 0;
};

// The tensors to write, renamed, with their dtypes; checks the names and the options.
void select_tensors(const StateDict& state, const HfSaveOptions& options, Plan& plan) {
  detail::validate_state(state, kOp);
  DT_CHECK(options.max_shard_bytes > 0, "[%s] max_shard_bytes must be positive", kOp);
  DT_CHECK(!options.dtype || is_floating(*options.dtype),
           "[%s] dtype %s is not a floating dtype (the dtype floating parameters are written in)",
           kOp, options.dtype ? dtype_name(*options.dtype) : "");
  if (!options.config_json.empty()) {
    DT_CHECK(nlohmann::json::accept(options.config_json),
             "[%s] config_json is not valid JSON (it is written as config.json)", kOp);
  }
  std::map<std::string, std::string> source_of;  // entry name -> parameter name
  for (const auto& [name, t] : state) {
    std::string entry = options.rename ? options.rename(name) : name;
    if (entry.empty()) continue;
    const auto [it, fresh] = source_of.emplace(entry, name);
    DT_CHECK(fresh, "[%s] parameters '%s' and '%s' would both be written as '%s'", kOp, it->second,
             name, entry);
    plan.dtypes.push_back(options.dtype && is_floating(t.dtype()) ? *options.dtype : t.dtype());
    plan.tensors.emplace_back(std::move(entry), t);
  }
}

// As transformers 5.24's save_pretrained: huggingface_hub's split_torch_state_dict_into_shards
// over the tensors in entry-name order (what its state dict holds by then; checked against its
// output). In that order a tensor opens a new file when it would take the current one over the
// limit; a tensor above the limit alone gets a file of its own (the current one stays open
// after it). Within a file, entries lie in name order too, as safetensors writes one dtype.
void plan_files(const HfSaveOptions& options, Plan& plan) {
  std::vector<size_t> order(plan.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return plan.tensors[a].first < plan.tensors[b].first; });
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (const size_t i : order) {
    const DTensor& t = plan.tensors[i].second;
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(plan.dtypes[i]);
    plan.total_parameters += static_cast<uint64_t>(t.numel());
    plan.total_size += bytes;
    if (bytes > options.max_shard_bytes) {
      shards.push_back({i});
      continue;
    }
    if (current_bytes + bytes > options.max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  const int n = static_cast<int>(shards.size());
  for (int k = 0; k < n; ++k) {
    Plan::File f;
    f.name = n == 1 ? std::string(detail::kHfWeightsFile) : detail::hf_shard_file_name(k + 1, n);
    f.tensors = std::move(shards[k]);
    std::vector<detail::SafetensorsEntryMeta> metas;
    for (const size_t i : f.tensors) {
      metas.push_back({plan.tensors[i].first, plan.dtypes[i], plan.tensors[i].second.shape()});
    }
    f.layout = detail::layout_safetensors(metas, {});
    plan.files.push_back(std::move(f));
  }
}

// Every rank must write the same layout: the same tensors (checked by the state's hash) and
// the same options.
void check_same_options_everywhere(const HfSaveOptions& options) {
  const std::string s = absl::StrCat(options.max_shard_bytes, "|",
                                     options.dtype ? std::string(dtype_name(*options.dtype)) : "-",
                                     "|", options.config_json);
  DT_CHECK(detail::agree(stable_hash(s.data(), s.size())).same,
           "[%s] the ranks pass different options (max_shard_bytes, dtype or config_json): every "
           "rank must pass the same",
           kOp);
}

// Rank 0: the directory exists; weight files of an earlier save that this one does not write
// are gone (save_pretrained removes stale shards; we also remove a stale single file or
// index, which from_pretrained would otherwise read instead); each file is created with its
// header and its full size.
void create_files(const std::string& dir, const Plan& plan) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DT_CHECK(!ec && detail::is_directory(dir), "[%s] cannot create directory '%s': %s", kOp, dir,
           ec ? ec.message() : "a file is in the way");
  std::set<std::string> written;
  for (const Plan::File& f : plan.files) written.insert(f.name);
  if (plan.files.size() > 1) written.insert(detail::kHfIndexFile);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool weights = name == detail::kHfWeightsFile || name == detail::kHfIndexFile ||
                         detail::is_hf_shard_file_name(name);
    if (weights && !written.contains(name)) detail::remove_tree(e.path().string(), kOp);
  }
  DT_CHECK(!ec, "[%s] cannot list directory '%s': %s", kOp, dir, ec.message());
  for (const Plan::File& f : plan.files) {
    const detail::File file = detail::File::create(absl::StrCat(dir, "/", f.name), kOp);
    file.pwrite_all(f.layout.prefix.data(), f.layout.prefix.size(), 0);
    file.resize(f.layout.file_size);
    // Synced here: rank 0 may write no shard into this file (its tensors live on ranks of a
    // sub-mesh without it), and the writers sync only what they wrote.
    file.sync();
  }
}

// Every rank: the bytes of the shards it writes (plan_writes), each run at its position.
void write_shards(const std::string& dir, const Plan& plan, const std::vector<bool>& writes) {
  for (const Plan::File& f : plan.files) {
    std::optional<detail::File> file;  // opened when this rank writes into it
    for (size_t k = 0; k < f.tensors.size(); ++k) {
      const size_t i = f.tensors[k];
      if (!writes[i]) continue;
      if (!file) file = detail::File::open_write(absl::StrCat(dir, "/", f.name), kOp);
      const DTensor& t = plan.tensors[i].second;
      const detail::Region r = detail::local_region(t);
      const Tensor local = t.to_local().to(Device(), plan.dtypes[i]).contiguous();
      const char* base = static_cast<const char*>(local.data_ptr());
      const int64_t es = static_cast<int64_t>(dtype_size(plan.dtypes[i]));
      const uint64_t begin = f.layout.begin[k];
      detail::for_each_run(
          t.shape(), r.offset, r.shape, [&](int64_t at, int64_t in_box, int64_t n) {
            file->pwrite_all(base + in_box * es, static_cast<size_t>(n * es), begin + at * es);
          });
    }
    if (file) file->sync();
  }
}

void write_text(const std::string& path, const std::string& text) {
  const detail::File f = detail::File::create(path, kOp);
  f.pwrite_all(text.data(), text.size(), 0);
  f.sync();
}

// Rank 0, after every rank wrote its shards: the index (several files) and config.json.
void write_index_and_config(const std::string& dir, const Plan& plan,
                            const HfSaveOptions& options) {
  if (plan.files.size() > 1) {
    std::map<std::string, std::string> weight_map;
    for (const Plan::File& f : plan.files) {
      for (const size_t i : f.tensors) weight_map.emplace(plan.tensors[i].first, f.name);
    }
    write_text(absl::StrCat(dir, "/", detail::kHfIndexFile),
               detail::hf_index_to_json(weight_map, plan.total_parameters, plan.total_size));
  }
  if (!options.config_json.empty()) {
    write_text(absl::StrCat(dir, "/", detail::kHfConfigFile), options.config_json);
  }
  detail::sync_directory(dir, kOp);
}

}  // namespace

void save_hf(const StateDict& state, const std::string& dir_arg, const HfSaveOptions& options) {
  check_real_data("save_hf");  // a dry run (fake backend) would write filler
  const DeviceMesh world = detail::world_mesh();
  const bool root = world_rank() == 0;
  std::string dir;
  Plan plan;
  detail::run_on_all_ranks(world, [&] {
    dir = detail::normalize_dir(dir_arg, kOp);
    select_tensors(state, options, plan);
  });
  detail::run_on_all_ranks(world, [&] {
    detail::check_same_state_everywhere(plan.tensors, kOp);
    check_same_options_everywhere(options);
  });
  plan_files(options, plan);
  const std::vector<bool> writes = detail::plan_writes(world, plan.tensors);
  detail::run_on_all_ranks(world, [&] {
    if (root) create_files(dir, plan);
  });
  detail::run_on_all_ranks(world, [&] { write_shards(dir, plan, writes); });
  detail::run_on_all_ranks(world, [&] {
    if (root) write_index_and_config(dir, plan, options);
  });
}

void save_hf(const nn::Module& module, const std::string& dir, const HfSaveOptions& options) {
  save_hf(module.named_parameters(), dir, options);
}

}  // namespace dtensor::checkpoint
