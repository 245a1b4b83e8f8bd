// checkpoint::load: read the index, read every target's overlapping chunks into staging
// buffers (checking files, headers, checksums, shapes and dtypes), agree over the world, and
// only then copy the staging buffers into the targets.
#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <memory>

#include "checkpoint/checkpoint.h"
#include "checkpoint/file_io.h"
#include "checkpoint/index.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/world.h"
#include "tensor/creation.h"
#include "tensor/error.h"
#include "tensor/shape_ops.h"

namespace dtensor::checkpoint {

namespace {

constexpr std::string_view kOp = "checkpoint::load";

// The files of one load, each opened and its header parsed once.
class FileCache {
 public:
  explicit FileCache(std::string dir) : dir_(std::move(dir)) {}

  struct Opened {
    detail::File file;
    std::map<std::string, detail::SafetensorsEntry> entries;
  };

  const Opened& get(const std::string& name) {
    auto it = files_.find(name);
    if (it == files_.end()) {
      auto o = std::make_unique<Opened>();
      o->file = detail::File::open_read(absl::StrCat(dir_, "/", name), kOp);
      o->entries = detail::read_safetensors_header(o->file, kOp);
      it = files_.emplace(name, std::move(o)).first;
    }
    return *it->second;
  }

 private:
  std::string dir_;
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

// This rank's part of target `t` assembled from the checkpoint (undefined when it holds none).
Tensor stage(const std::string& dir, const std::string& name, const DTensor& t,
             const std::map<std::string, TensorInfo>& index, FileCache& files) {
  const auto it = index.find(name);
  DT_CHECK(it != index.end(), "[%s] tensor '%s' is not in the checkpoint '%s'", kOp, name, dir);
  const TensorInfo& info = it->second;
  DT_CHECK(info.shape == t.shape() && info.dtype == t.dtype(),
           "[%s] tensor '%s' is %s [%s] in the checkpoint '%s' but the target is %s [%s]", kOp,
           name, dtype_name(info.dtype), absl::StrJoin(info.shape, ", "), dir,
           dtype_name(t.dtype()), absl::StrJoin(t.shape(), ", "));
  const detail::Region r = detail::local_region(t);
  if (!r.holds) return Tensor();
  Tensor out = empty(r.shape, info.dtype);
  int64_t covered = 0;
  Shape off, shape;
  for (const ChunkInfo& c : info.chunks) {
    if (!box_intersection(r.offset, r.shape, c.offset, c.shape, off, shape)) continue;
    const bool whole = c.offset == r.offset && c.shape == r.shape;
    const Tensor chunk = read_chunk(dir, name, info, c, files, out, whole);
    if (!whole) box_view(out, r.offset, off, shape).copy_(box_view(chunk, c.offset, off, shape));
    covered += shape_numel(shape);
  }
  DT_CHECK(covered == out.numel(),
           "[%s] tensor '%s': the checkpoint's chunks cover %d of the %d elements of this rank's "
           "shard",
           kOp, name, covered, out.numel());
  return out;
}

}  // namespace

void load(const StateDict& state, const std::string& dir_arg) {
  const DeviceMesh world = detail::world_mesh();
  std::vector<Tensor> staged(state.size());
  detail::run_on_all_ranks(world, [&] {
    const std::string dir = detail::normalize_dir(dir_arg, kOp);
    detail::validate_state(state, kOp);
    const std::map<std::string, TensorInfo> index = read_index(dir);
    FileCache files(dir);
    for (size_t i = 0; i < state.size(); ++i) {
      const std::string& name = state[i].first;
      try {
        staged[i] = stage(dir, name, state[i].second, index, files);
      } catch (const Error& e) {
        // Name the tensor too when the failure came from a file (open, truncation).
        const std::string_view msg = e.what();
        if (msg.find(absl::StrCat("'", name, "'")) != std::string_view::npos) throw;
        DT_FAIL("%s (loading tensor '%s')", msg, name);
      }
    }
  });
  // Every rank staged everything: commit. Nothing here can fail once shapes and dtypes
  // matched. A target that is its storage's one contiguous tensor takes the staging buffer's
  // memory (every tensor sharing the storage, e.g. a module's parameter, sees it) instead of
  // a copy of it; any other target is copied into.
  for (size_t i = 0; i < state.size(); ++i) {
    if (!staged[i].defined()) continue;
    const Tensor& dst = state[i].second.to_local();
    const Tensor& src = staged[i];
    auto whole = [](const Tensor& t) {
      return t.is_contiguous() && t.storage_offset() == 0 &&
             t.nbytes() == t.storage().nbytes();
    };
    if (whole(dst) && whole(src) && dst.dtype() == src.dtype() &&
        dst.storage().try_swap_data(src.storage())) {
      continue;
    }
    Tensor(dst).copy_(src);
  }
}

}  // namespace dtensor::checkpoint
