// checkpoint::load: read the index, read every target's overlapping chunks into staging
// buffers (checking files, headers, save ids, checksums, shapes and dtypes), agree over the
// world — and read again when a concurrent save replaced the checkpoint meanwhile — and only
// then copy the staging buffers into the targets.
#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/detail/plan.h"
#include "dtensor/checkpoint/detail/safetensors.h"
#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor::checkpoint {

namespace {

constexpr std::string_view kOp = "checkpoint::load";

// How many times a load reads a checkpoint that a concurrent save keeps replacing before it
// gives up ("is being replaced"), and the first pause between two reads (doubled each time).
constexpr int kAttempts = 8;
constexpr std::chrono::milliseconds kFirstPause{10};

// The files of one load, each opened and its header parsed once. Each must belong to the save
// the index describes (the same save id): files are never modified once written, so every byte
// read through a file opened here is that save's.
class FileCache {
 public:
  FileCache(std::string dir, std::string save_id)
      : dir_(std::move(dir)), save_id_(std::move(save_id)) {}

  struct Opened {
    detail::File file;
    std::map<std::string, detail::SafetensorsEntry> entries;
  };

  const Opened& get(const std::string& name) {
    auto it = files_.find(name);
    if (it == files_.end()) {
      auto o = std::make_unique<Opened>();
      o->file = detail::File::open_read(absl::StrCat(dir_, "/", name), kOp);
      detail::SafetensorsHeader header = detail::read_safetensors_header(o->file, kOp);
      const auto id = header.metadata.find(detail::kSaveIdKey);
      const std::string file_id = id == header.metadata.end() ? "" : id->second;
      DT_CHECK(file_id == save_id_,
               "[%s] file '%s' belongs to another save (save id '%s') than the index of '%s' "
               "(save id '%s')",
               kOp, o->file.path(), file_id, dir_, save_id_);
      o->entries = std::move(header.entries);
      it = files_.emplace(name, std::move(o)).first;
    }
    return *it->second;
  }

 private:
  std::string dir_, save_id_;
  absl::flat_hash_map<std::string, std::unique_ptr<Opened>> files_;
};

// Reads chunk `c` of tensor `name`: into `dst` when it has exactly the chunk's shape (the
// common same-layout case: no extra copy), otherwise into a fresh buffer; verifies its entry
// against the index and its checksum. Returns the tensor holding the chunk.
Tensor read_chunk(const std::string& dir, const std::string& name, const TensorInfo& info,
                  const ChunkInfo& c, FileCache& files, const Tensor& dst, bool into_dst) {
  const std::string path = absl::StrCat(dir, "/", c.file);
  const FileCache::Opened& f = files.get(c.file);
  const auto e = f.entries.find(c.entry);
  DT_CHECK(e != f.entries.end(), "[%s] file '%s' has no entry '%s' (listed in the index)", kOp,
           path, c.entry);
  DT_CHECK(e->second.dtype == info.dtype && e->second.shape == c.shape,
           "[%s] file '%s' entry '%s' is %s [%s], the index says %s [%s]", kOp, path, c.entry,
           dtype_name(e->second.dtype), absl::StrJoin(e->second.shape, ", "),
           dtype_name(info.dtype), absl::StrJoin(c.shape, ", "));
  Tensor buf = into_dst ? dst : empty(c.shape, info.dtype);
  const uint32_t crc = f.file.pread_all_crc(buf.data_ptr(), buf.nbytes(), e->second.begin);
  DT_CHECK(crc == c.crc32,
           "[%s] file '%s' entry '%s' is corrupt: CRC-32 0x%08x, the index says 0x%08x", kOp, path,
           c.entry, crc, c.crc32);
  return buf;
}

// This rank's part of target `t` assembled from the checkpoint (undefined when it holds none),
// by the reads its plan holds (plan.h).
Tensor stage(const std::string& dir, const std::string& name, const DTensor& t,
             const std::map<std::string, TensorInfo>& index, FileCache& files) {
  const std::vector<ReadItem> reads = detail::tensor_reads(name, t, index, dir);
  const detail::Region r = detail::local_region(t);
  if (!r.holds) return Tensor();
  const TensorInfo& info = index.at(name);
  Tensor out = empty(r.shape, info.dtype);
  for (const ReadItem& read : reads) {
    const ChunkInfo& c = read.chunk;
    const bool whole = c.offset == r.offset && c.shape == r.shape;
    const Tensor chunk = read_chunk(dir, name, info, c, files, out, whole);
    if (!whole) {
      box_view(out, r.offset, read.offset, read.shape)
          .copy_(box_view(chunk, c.offset, read.offset, read.shape));
    }
  }
  return out;
}

// Every target staged from the checkpoint `index` describes (see load()).
void stage_all(const StateDict& state, const std::string& dir, const detail::Index& index,
               std::vector<Tensor>& staged) {
  FileCache files(dir, index.save_id);
  for (size_t i = 0; i < state.size(); ++i) {
    const std::string& name = state[i].first;
    try {
      staged[i] = stage(dir, name, state[i].second, index.tensors, files);
    } catch (const Error& e) {
      // Name the tensor too when the failure came from a file (open, truncation).
      const std::string_view msg = e.what();
      if (msg.find(absl::StrCat("'", name, "'")) != std::string_view::npos) throw;
      DT_FAIL("%s (loading tensor '%s')", msg, name);
    }
  }
}

// What one rank saw in one read of the checkpoint.
struct Attempt {
  std::string save_id;    // of the index it read
  std::string error;      // what failed, if anything
  bool replaced = false;  // the checkpoint changed while it read it
};

// The save id of the index in `dir`, if it can be read now.
std::optional<std::string> current_save_id(const std::string& dir) {
  try {
    return detail::read_index_file(dir).save_id;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Whether a failure to read `dir` is a save replacing it. A save never changes a checkpoint in
// place: it swaps a complete new directory for the old one and then deletes the old, so a
// reader that read the index of one save (`save_id`) and then met a file of another, or a file
// that the save already deleted, finds another index, or none, when it looks again. A reader
// that could not read the index (no `save_id`) was caught mid-swap when it can read it now, or
// when `dir` is missing beside `dir.old` (the three-rename fallback of detail/file_io.h,
// between its first two renames); that look takes two calls, during which the renames may
// finish, so the index is read once more after it.
bool being_replaced(const std::string& dir, const std::optional<std::string>& save_id) {
  if (save_id) {
    const std::optional<std::string> now = current_save_id(dir);
    return !now || *now != *save_id;
  }
  if (current_save_id(dir)) return true;
  if (!detail::path_exists(dir) && detail::path_exists(dir + ".old")) return true;
  return current_save_id(dir).has_value();
}

// Agreed over the world: true when every rank read the same save whole. False (on every rank)
// when any rank saw the checkpoint replaced, or the ranks that read the index read different
// ones: read it again. Otherwise a rank's error is raised on every rank (one rank that cannot
// read the index is an error, not a replacement).
bool settled(const DeviceMesh& world, const Attempt& a) {
  const detail::Agreement ag =
      detail::agree(a.error.empty() ? std::optional(stable_hash(a.save_id.data(), a.save_id.size()))
                                    : std::nullopt,
                    a.replaced);
  if (ag.any || !ag.same) return false;
  detail::run_on_all_ranks(world, [&] {
    if (!a.error.empty()) throw std::runtime_error(a.error);
  });
  return true;
}

// One read of the checkpoint into `staged`; false when it must be read again (settled()).
bool try_load(const DeviceMesh& world, const StateDict& state, const std::string& dir,
              const LoadOptions& options, std::vector<Tensor>& staged) {
  Attempt a;
  detail::Index index;
  try {
    index = detail::read_index_file(dir);
    a.save_id = index.save_id;
  } catch (const std::exception& e) {
    a.error = e.what();
    a.replaced = being_replaced(dir, std::nullopt);
  }
  if (!settled(world, a)) return false;
  if (options.after_index) detail::run_on_all_ranks(world, options.after_index);
  staged.assign(state.size(), Tensor());
  try {
    stage_all(state, dir, index, staged);
  } catch (const std::exception& e) {
    a.error = e.what();
    a.replaced = being_replaced(dir, a.save_id);
  }
  return settled(world, a);
}

}  // namespace

void load(const StateDict& state, const std::string& dir_arg, const LoadOptions& options) {
  const DeviceMesh world = detail::world_mesh();
  std::string dir;
  detail::run_on_all_ranks(world, [&] {
    dir = detail::normalize_dir(dir_arg, kOp);
    detail::validate_state(state, kOp);
    detail::check_has_data(state, kOp);
  });
  std::vector<Tensor> staged;
  for (int attempt = 1; !try_load(world, state, dir, options, staged); ++attempt) {
    if (attempt < kAttempts) {
      std::this_thread::sleep_for(kFirstPause * (1 << (attempt - 1)));
      continue;
    }
    // Every rank is here (try_load's answer is agreed); the message is agreed too.
    detail::run_on_all_ranks(world, [&] {
      const std::string old = dir + ".old";
      const bool moved = !detail::path_exists(dir) && detail::path_exists(old);
      DT_FAIL(
          "[%s] checkpoint '%s' is being replaced by a concurrent save: it changed while each "
          "of %d reads of it was under way (no target was modified); load it once the save "
          "has finished%s",
          kOp, dir, kAttempts,
          moved ? absl::StrCat(" (it is missing and '", old,
                               "' holds the previous checkpoint: if no save is running, one "
                               "was interrupted there; rename it back)")
                : "");
    });
  }
  // Every rank staged everything: commit. Nothing here can fail once shapes and dtypes
  // matched. A target that is its storage's one contiguous tensor takes the staging buffer's
  // memory (every tensor sharing the storage, e.g. a module's parameter, sees it) instead of
  // a copy of it; any other target is copied into.
  for (size_t i = 0; i < state.size(); ++i) {
    if (!staged[i].defined()) continue;
    const Tensor& dst = state[i].second.to_local();
    const Tensor& src = staged[i];
    auto whole = [](const Tensor& t) {
      return t.is_contiguous() && t.storage_offset() == 0 && t.nbytes() == t.storage().nbytes();
    };
    if (whole(dst) && whole(src) && dst.dtype() == src.dtype() &&
        dst.storage().try_swap_data(src.storage())) {
      continue;
    }
    Tensor(dst).copy_(src);
  }
}

}  // namespace dtensor::checkpoint
