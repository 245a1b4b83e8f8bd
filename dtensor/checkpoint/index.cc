#include "dtensor/checkpoint/detail/index.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/checkpoint/detail/safetensors.h"
#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint::detail {

namespace {

using json = nlohmann::json;

constexpr std::string_view kFormat = "dtensor-checkpoint";

json chunk_to_json(const ChunkInfo& c) {
  return {{"file", c.file},
          {"entry", c.entry},
          {"offset", std::vector<int64_t>(c.offset.begin(), c.offset.end())},
          {"shape", std::vector<int64_t>(c.shape.begin(), c.shape.end())},
          {"crc32", c.crc32}};
}

// Reads a JSON array of non-negative integers into a Shape; false when it is not one.
bool read_dims(const json& j, Shape& out) {
  if (!j.is_array()) return false;
  out.clear();
  for (const auto& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t{1} << 62)) return false;
    out.push_back(v.get<int64_t>());
  }
  return true;
}

ChunkInfo chunk_from_json(const json& j, const std::string& where) {
  ChunkInfo c;
  DT_CHECK(j.is_object() && j.contains("file") && j["file"].is_string() && j.contains("entry") &&
               j["entry"].is_string() && j.contains("offset") && read_dims(j["offset"], c.offset) &&
               j.contains("shape") && read_dims(j["shape"], c.shape) && j.contains("crc32") &&
               j["crc32"].is_number_unsigned() && j["crc32"].get<uint64_t>() <= 0xffffffffu,
           "%s: a chunk lacks file, entry, offset, shape or crc32", where);
  c.file = j["file"].get<std::string>();
  c.entry = j["entry"].get<std::string>();
  c.crc32 = j["crc32"].get<uint32_t>();
  return c;
}

std::string box_str(const ChunkInfo& c) {
  return absl::StrCat("offset [", absl::StrJoin(c.offset, ", "), "] shape [",
                      absl::StrJoin(c.shape, ", "), "]");
}

// No two non-empty chunks share an element. With every chunk inside the bounds and the element
// counts adding up to the tensor's, this proves the chunks tile it exactly: a count alone would
// accept an overlap that leaves a gap of the same size (which a load would fill with nothing).
// A sweep along the dim where the chunks' offsets differ most: sorted by their start there, a
// chunk can only overlap the ones that start before it ends, so a grid of k chunks costs about
// k * (chunks per band), not k^2.
void check_disjoint(const std::string& name, const TensorInfo& t, const std::string& where) {
  std::vector<const ChunkInfo*> live;
  for (const ChunkInfo& c : t.chunks) {
    if (shape_numel(c.shape) > 0) live.push_back(&c);
  }
  const size_t nd = t.shape.size();
  if (live.size() < 2 || nd == 0) return;  // 0-d: two chunks fail the count check
  size_t sweep = 0, most = 0;
  for (size_t d = 0; d < nd; ++d) {
    std::vector<int64_t> starts;
    for (const ChunkInfo* c : live) starts.push_back(c->offset[d]);
    std::sort(starts.begin(), starts.end());
    const size_t distinct = std::unique(starts.begin(), starts.end()) - starts.begin();
    if (distinct > most) most = distinct, sweep = d;
  }
  std::sort(live.begin(), live.end(), [sweep](const ChunkInfo* a, const ChunkInfo* b) {
    return a->offset[sweep] < b->offset[sweep];
  });
  auto overlap = [nd](const ChunkInfo& a, const ChunkInfo& b) {
    for (size_t d = 0; d < nd; ++d) {
      if (a.offset[d] >= b.offset[d] + b.shape[d] || b.offset[d] >= a.offset[d] + a.shape[d]) {
        return false;
      }
    }
    return true;
  };
  for (size_t i = 0; i < live.size(); ++i) {
    const int64_t end = live[i]->offset[sweep] + live[i]->shape[sweep];
    for (size_t j = i + 1; j < live.size() && live[j]->offset[sweep] < end; ++j) {
      DT_CHECK(!overlap(*live[i], *live[j]),
               "%s: tensor '%s' of shape [%s] has overlapping chunks (%s and %s): the index is "
               "corrupt",
               where, name, absl::StrJoin(t.shape, ", "), box_str(*live[i]), box_str(*live[j]));
    }
  }
}

// Chunks inside the global shape, with the tensor's rank, adding up to its element count and
// pairwise disjoint: together, an exact tiling of the tensor. Each chunk's entry is the one
// save names after the tensor and the offset (chunk_entry_name): the files name their entries
// so, so chunks or tensors trading offsets, entries or files in an edited index are refused
// here, before any file is read (on load each entry must then be in its file, with the index's
// dtype, shape, checksum and save id).
void validate(const std::string& name, const TensorInfo& t, const std::string& where) {
  int64_t covered = 0;
  for (const ChunkInfo& c : t.chunks) {
    DT_CHECK(is_plain_file_name(c.file),
             "%s: tensor '%s' names file '%s', which is not a plain file name inside the "
             "checkpoint directory",
             where, name, c.file);
    DT_CHECK(c.offset.size() == t.shape.size() && c.shape.size() == t.shape.size(),
             "%s: tensor '%s' of shape [%s] has a chunk of rank %d", where, name,
             absl::StrJoin(t.shape, ", "), c.shape.size());
    DT_CHECK(c.entry == chunk_entry_name(name, c.offset),
             "%s is corrupt: tensor '%s' has a chunk at offset [%s] whose entry is '%s' (expected "
             "'%s')",
             where, name, absl::StrJoin(c.offset, ", "), c.entry, chunk_entry_name(name, c.offset));
    int64_t n = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      DT_CHECK(c.offset[d] + c.shape[d] <= t.shape[d],
               "%s: tensor '%s' of shape [%s] has a chunk at offset [%s] of shape [%s] outside it",
               where, name, absl::StrJoin(t.shape, ", "), absl::StrJoin(c.offset, ", "),
               absl::StrJoin(c.shape, ", "));
      n *= c.shape[d];
    }
    covered += n;
  }
  const int64_t numel = shape_numel(t.shape, "checkpoint::read_index");
  DT_CHECK(covered == numel, "%s: the chunks of tensor '%s' hold %d elements, expected %d", where,
           name, covered, numel);
  check_disjoint(name, t, where);
}

}  // namespace

std::string rank_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank-%05d.safetensors", rank);
  return buf;
}

std::string chunk_entry_name(const std::string& tensor, IntSpan offset) {
  return absl::StrCat(tensor, "#", absl::StrJoin(offset, ","));
}

bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::string index_to_json(const Index& index, int world_size) {
  json tensors = json::object();
  // Hugging Face's model.safetensors.index.json maps each entry to its file; keeping that map
  // lets their sharded-checkpoint tools list the files' entries.
  json weight_map = json::object();
  for (const auto& [name, t] : index.tensors) {
    json chunks = json::array();
    for (const ChunkInfo& c : t.chunks) {
      chunks.push_back(chunk_to_json(c));
      weight_map[c.entry] = c.file;
    }
    tensors[name] = {{"dtype", safetensors_dtype(t.dtype)},
                     {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                     {"chunks", std::move(chunks)}};
  }
  json metadata = {{"format", kFormat}, {"version", index.version}, {"world_size", world_size}};
  if (index.version >= 2) metadata["save_id"] = index.save_id;
  const json doc = {{"metadata", std::move(metadata)},
                    {"weight_map", std::move(weight_map)},
                    {"tensors", std::move(tensors)}};
  return doc.dump(1);
}

Index index_from_json(const std::string& text, const std::string& path) {
  const std::string where = absl::StrCat("[checkpoint::read_index] index '", path, "'");
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  DT_CHECK(doc.is_object() && doc.contains("metadata") && doc["metadata"].is_object() &&
               doc["metadata"].value("format", "") == kFormat && doc.contains("tensors") &&
               doc["tensors"].is_object(),
           "%s is corrupt: not a %s index JSON", where, kFormat);
  const json& meta = doc["metadata"];
  Index index;
  index.version = meta.contains("version") && meta["version"].is_number_integer()
                      ? meta["version"].get<int>()
                      : 0;
  DT_CHECK(index.version == 1 || index.version == kIndexVersion,
           "%s has format version %d; this build reads versions 1 to %d", where, index.version,
           kIndexVersion);
  if (index.version >= 2) {
    DT_CHECK(meta.contains("save_id") && meta["save_id"].is_string() &&
                 !meta["save_id"].get<std::string>().empty(),
             "%s is corrupt: format version %d without a save_id", where, index.version);
    index.save_id = meta["save_id"].get<std::string>();
  }
  for (const auto& [name, j] : doc["tensors"].items()) {
    TensorInfo t;
    DT_CHECK(j.is_object() && j.contains("dtype") && j["dtype"].is_string() &&
                 j.contains("shape") && read_dims(j["shape"], t.shape) && j.contains("chunks") &&
                 j["chunks"].is_array(),
             "%s is corrupt: tensor '%s' lacks dtype, shape or chunks", where, name);
    const auto dtype = dtype_from_safetensors(j["dtype"].get<std::string>());
    DT_CHECK(dtype.has_value(), "%s: tensor '%s' has unknown dtype '%s'", where, name,
             j["dtype"].get<std::string>());
    t.dtype = *dtype;
    for (const auto& c : j["chunks"]) t.chunks.push_back(chunk_from_json(c, where));
    validate(name, t, where);
    index.tensors.emplace(name, std::move(t));
  }
  return index;
}

std::string new_save_id() {
  std::random_device rd;
  const uint64_t hi = (uint64_t{rd()} << 32) ^ rd();
  const uint64_t lo =
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
      (uint64_t{rd()} << 32);
  return absl::StrFormat("%016x%016x", hi, lo);
}

Index read_index_file(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kIndexFile);
  return index_from_json(read_text_file(path, "checkpoint::read_index"), path);
}

std::string records_to_json(const ChunkRecords& records) {
  json out = json::array();
  for (const auto& [name, c] : records) {
    out.push_back({{"name", name}, {"chunk", chunk_to_json(c)}});
  }
  return out.dump();
}

ChunkRecords records_from_json(const std::string& text) {
  const json in = json::parse(text);
  ChunkRecords out;
  for (const auto& r : in) {
    out.emplace_back(r["name"].get<std::string>(),
                     chunk_from_json(r["chunk"], "[checkpoint::save]"));
  }
  return out;
}

}  // namespace dtensor::checkpoint::detail

namespace dtensor::checkpoint {

std::map<std::string, TensorInfo> read_index(const std::string& dir) {
  return detail::read_index_file(dir).tensors;
}

}  // namespace dtensor::checkpoint
