// checkpoint::save: validate and agree, write each rank's chunks into "<dir>.tmp", let rank 0
// assemble the index from every rank's chunk records, then swap the directory into place.
#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <bit>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/detail/safetensors.h"
#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor::checkpoint {

namespace {

constexpr std::string_view kOp = "checkpoint::save";

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; the checkpoint writes memory as it lies");

// Every rank must save the same names, in the same order, with the same global shapes, dtypes
// and layouts, or the index would mix tensors: compare a stable hash of them over the world.
void check_same_state_everywhere(const StateDict& state) {
  uint64_t h = kStableHashSeed;
  for (const auto& [name, t] : state) {
    // A one-rank mesh is a self mesh on its rank and not on the others (and any placement on
    // it is the whole tensor), so only its tensor's shape and dtype are compared.
    const std::string s = t.device_mesh().size() == 1
                              ? absl::StrCat(name, "|self|", absl::StrJoin(t.shape(), ","), "|",
                                             std::string(dtype_name(t.dtype())))
                              : absl::StrCat(name, "|", t.spec().str());
    h = stable_hash(s.data(), s.size(), h);
  }
  DT_CHECK(detail::agree(h).same,
           "[%s] the ranks save different states (names, order, shapes, dtypes or placements "
           "differ): every rank must pass the same state",
           kOp);
}

// Which tensors of `state` this rank writes its chunk of (collective). By the tensor's own mesh
// a chunk has one writer in each copy of that mesh (local_region: coordinate 0 on every dim
// that does not shard it). A mesh over part of the world may have copies elsewhere holding the
// same chunks: the tp submesh of a (dp, tp) mesh is one per dp group, each with its replica of
// the tensor, and a self mesh (a local tensor) is one per rank. Those candidates are gathered,
// and the lowest world rank among a chunk's candidates writes it (PyTorch DCP's
// dedup_save_plans with save_to_lowest_rank), so each distinct chunk is written once however
// the tensor is replicated, and a tensor only some ranks hold is written by one of them.
std::vector<bool> plan_writes(const DeviceMesh& world, const StateDict& state) {
  std::vector<bool> writes(state.size());
  detail::ChunkRecords candidates;  // on a mesh over part of the world
  std::vector<size_t> candidate_of;
  detail::run_on_all_ranks(world, [&] {
    for (size_t i = 0; i < state.size(); ++i) {
      const DTensor& t = state[i].second;
      const detail::Region r = detail::local_region(t);
      writes[i] = r.writes && shape_numel(r.shape) > 0;
      if (writes[i] && t.device_mesh().size() < world_size()) {
        candidates.emplace_back(state[i].first, ChunkInfo{"", "", r.offset, r.shape, 0});
        candidate_of.push_back(i);
      }
    }
  });
  const std::vector<std::string> all =
      detail::all_gather_strings(detail::records_to_json(candidates));
  absl::flat_hash_set<std::string> taken;  // by a lower rank
  for (int rank = 0; rank < world_rank(); ++rank) {
    for (const auto& [name, c] : detail::records_from_json(all[rank])) {
      taken.insert(detail::chunk_entry_name(name, c.offset));
    }
  }
  for (size_t k = 0; k < candidates.size(); ++k) {
    const auto& [name, c] = candidates[k];
    if (taken.contains(detail::chunk_entry_name(name, c.offset))) writes[candidate_of[k]] = false;
  }
  return writes;
}

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

// Writes the chunks this rank writes (plan_writes) into its file in `tmp`, with the save's id in
// the file's metadata; returns their records.
detail::ChunkRecords write_own_chunks(const StateDict& state, const std::vector<bool>& writes,
                                      const std::string& save_id, const std::string& tmp) {
  std::vector<std::pair<std::string, Tensor>> entries;
  detail::ChunkRecords records;
  const std::string file = detail::rank_file_name(world_rank());
  for (size_t i = 0; i < state.size(); ++i) {
    if (!writes[i]) continue;
    const auto& [name, t] = state[i];
    const detail::Region r = detail::local_region(t);
    ChunkInfo c{file, detail::chunk_entry_name(name, r.offset), r.offset, r.shape, 0};
    entries.emplace_back(c.entry, t.to_local().to(Device()).contiguous());
    records.emplace_back(name, std::move(c));
  }
  if (entries.empty()) return records;  // nothing owned: no file
  const std::vector<uint32_t> crcs = detail::write_safetensors(
      absl::StrCat(tmp, "/", file), entries, {{detail::kSaveIdKey, save_id}}, kOp);
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
  const DeviceMesh world = detail::world_mesh();
  const bool root = world_rank() == 0;
  std::string dir, tmp;
  detail::run_on_all_ranks(world, [&] {
    dir = detail::normalize_dir(dir_arg, kOp);
    tmp = dir + ".tmp";
    detail::validate_state(state, kOp);
  });
  detail::run_on_all_ranks(world, [&] { check_same_state_everywhere(state); });
  const std::vector<bool> writes = plan_writes(world, state);
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
  detail::run_on_all_ranks(world, [&] { mine = write_own_chunks(state, writes, save_id, tmp); });
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
