// checkpoint::save: validate and agree, write each rank's chunks into "<dir>.tmp", let rank 0
// assemble the index from every rank's chunk records, then swap the directory into place.
#include <absl/strings/str_cat.h>

#include <bit>
#include <map>
#include <string_view>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/detail/plan.h"
#include "dtensor/checkpoint/detail/safetensors.h"
#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint {

namespace {

constexpr std::string_view kOp = "checkpoint::save";

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; the checkpoint writes memory as it lies");

// Rank 0 only: `dir` must be absent, empty, or a previous checkpoint (it is replaced); then a
// fresh "<dir>.tmp" (a leftover of an interrupted save is removed).
void prepare_directory(const std::string& dir, const std::string& tmp) {
  if (detail::path_exists(dir)) {
    DT_CHECK(detail::is_directory(dir), "[%s] '%s' exists and is not a directory", kOp, dir);
    DT_CHECK(detail::path_exists(absl::StrCat(dir, "/", detail::kIndexFile)) ||
                 detail::directory_is_empty(dir, kOp),
             "[%s] '%s' exists and is not a checkpoint (no %s): refusing to replace it", kOp, dir,
             detail::kIndexFile);
  }
  detail::remove_tree(tmp, kOp);
  detail::make_directory(tmp, kOp);
}

// Writes the chunks this rank's plan holds (plan.h) into its file in `tmp`, with the save's id
// in the file's metadata; returns their records.
detail::ChunkRecords write_own_chunks(const StateDict& state, const std::vector<WriteItem>& plan,
                                      const std::string& save_id, const std::string& tmp) {
  std::map<std::string_view, const DTensor*> by_name;
  for (const auto& [name, t] : state) by_name.emplace(name, &t);
  std::vector<std::pair<std::string, Tensor>> entries;
  detail::ChunkRecords records;
  for (const WriteItem& w : plan) {
    entries.emplace_back(w.entry, by_name.at(w.fqn)->to_local().to(Device()).contiguous());
    records.emplace_back(w.fqn, ChunkInfo{w.file, w.entry, w.offset, w.shape, 0});
  }
  if (entries.empty()) return records;  // nothing owned: no file
  const std::vector<uint32_t> crcs = detail::write_safetensors(
      absl::StrCat(tmp, "/", plan.front().file), entries, {{detail::kSaveIdKey, save_id}}, kOp);
  for (size_t i = 0; i < records.size(); ++i) records[i].second.crc32 = crcs[i];
  return records;
}

// Rank 0 only: the index from the state's global metadata and every rank's records.
void write_index(const StateDict& state, const std::vector<std::string>& all_records,
                 const std::string& save_id, const std::string& tmp) {
  detail::Index index;
  index.save_id = save_id;
  for (const auto& [name, t] : state) index.tensors[name] = TensorInfo{t.shape(), t.dtype(), {}};
  for (const std::string& text : all_records) {
    for (auto& [name, c] : detail::records_from_json(text)) index.tensors[name].chunks.push_back(c);
  }
  const std::string path = absl::StrCat(tmp, "/", detail::kIndexFile);
  const std::string text = detail::index_to_json(index, world_size());
  // Validate what we wrote as a reader will (coverage of every tensor by its chunks).
  detail::index_from_json(text, path);
  const detail::File f = detail::File::create(path, kOp);
  f.pwrite_all(text.data(), text.size(), 0);
  f.sync();
  detail::sync_directory(tmp, kOp);
}

}  // namespace

void save(const StateDict& state, const std::string& dir_arg, const SaveOptions& options) {
  check_real_data("save");  // a dry run (fake backend) would write filler
  const DeviceMesh world = detail::world_mesh();
  const bool root = world_rank() == 0;
  std::string dir, tmp;
  detail::run_on_all_ranks(world, [&] {
    dir = detail::normalize_dir(dir_arg, kOp);
    tmp = dir + ".tmp";
    detail::validate_state(state, kOp);
    detail::check_has_data(state, kOp);
  });
  detail::run_on_all_ranks(world, [&] { detail::check_same_state_everywhere(state, kOp); });
  const std::vector<WriteItem> plan = detail::local_writes(world, state);
  // Rank 0's id for this save, in the index and in every file (a load compares them).
  std::string my_id;
  detail::run_on_all_ranks(world, [&] {
    if (root) my_id = detail::new_save_id();
  });
  const std::string save_id = detail::all_gather_strings(my_id)[0];
  detail::run_on_all_ranks(world, [&] {
    if (root) prepare_directory(dir, tmp);
  });
  detail::ChunkRecords mine;
  detail::run_on_all_ranks(world, [&] { mine = write_own_chunks(state, plan, save_id, tmp); });
  const std::vector<std::string> all_records =
      detail::all_gather_strings(detail::records_to_json(mine));
  detail::run_on_all_ranks(world, [&] {
    if (root) write_index(state, all_records, save_id, tmp);
  });
  // An error the hook raises is agreed like every other (no rank commits, none hangs).
  detail::run_on_all_ranks(world, [&] {
    if (options.before_commit) options.before_commit();
  });
  // No rank may commit before every rank got here (a rank that died in before_commit, or
  // before, leaves the previous checkpoint in place).
  world_communicator()->barrier()->wait();
  detail::run_on_all_ranks(world, [&] {
    if (!root) return;
    detail::swap_into_place(tmp, dir, kOp);
    detail::sync_directory(detail::parent_directory(dir), kOp);
    detail::remove_tree(tmp, kOp);  // the previous checkpoint, after an exchange
  });
}

}  // namespace dtensor::checkpoint
