// The checkpoint's index.json and the per-rank chunk records rank 0 assembles it from
// (internal to the checkpoint layer). Layout in docs/CHECKPOINT.md.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace dtensor::checkpoint::detail {

inline constexpr char kIndexFile[] = "index.json";

// "rank-00003.safetensors"
std::string rank_file_name(int rank);
// "<name>#<offset0>,<offset1>,...": a chunk's safetensors entry (unique per tensor and offset).
std::string chunk_entry_name(const std::string& tensor, IntSpan offset);

std::string index_to_json(const std::map<std::string, TensorInfo>& index, int world_size);
// Parses and validates (see read_index); errors name `path`.
std::map<std::string, TensorInfo> index_from_json(const std::string& text, const std::string& path);

// The chunks one rank wrote, as JSON text (what rank 0 gathers to build the index).
using ChunkRecords = std::vector<std::pair<std::string, ChunkInfo>>;
std::string records_to_json(const ChunkRecords& records);
ChunkRecords records_from_json(const std::string& text);

// A file name the index may hold: non-empty, no '/' or NUL, not "." or "..".
bool is_plain_file_name(std::string_view name);

}  // namespace dtensor::checkpoint::detail
