// The checkpoint's index.json and the per-rank chunk records rank 0 assembles it from
// (internal to the checkpoint layer). Layout in docs/CHECKPOINT.md.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/checkpoint/checkpoint.h"

namespace dtensor::checkpoint::detail {

inline constexpr char kIndexFile[] = "index.json";

// The index format this build writes; it reads versions 1 and 2. Version 2 added the save id,
// in the index and in the metadata of every file it lists.
inline constexpr int kIndexVersion = 2;

// A parsed index.json.
struct Index {
  int version = kIndexVersion;
  // Unique per save (new_save_id), also in every file of the save (kSaveIdKey): a load that
  // meets a file of another save knows the checkpoint was replaced under it. Empty in version 1.
  std::string save_id;
  std::map<std::string, TensorInfo> tensors;
};

// The key of every rank file's safetensors "__metadata__" holding its save's id (version 2).
inline constexpr char kSaveIdKey[] = "dtensor.save_id";

// 32 hex digits from std::random_device and the clock.
std::string new_save_id();

// "rank-00003.safetensors"
std::string rank_file_name(int rank);
// "<name>#<offset0>,<offset1>,...": a chunk's safetensors entry (unique per tensor and offset).
std::string chunk_entry_name(const std::string& tensor, IntSpan offset);

std::string index_to_json(const Index& index, int world_size);
// Parses and validates (see read_index); errors name `path`.
Index index_from_json(const std::string& text, const std::string& path);
// read_index(dir) with the index's version and save id.
Index read_index_file(const std::string& dir);

// The chunks one rank wrote, as JSON text (what rank 0 gathers to build the index).
using ChunkRecords = std::vector<std::pair<std::string, ChunkInfo>>;
std::string records_to_json(const ChunkRecords& records);
ChunkRecords records_from_json(const std::string& text);

// A file name the index may hold: non-empty, no '/' or NUL, not "." or "..".
bool is_plain_file_name(std::string_view name);

}  // namespace dtensor::checkpoint::detail
