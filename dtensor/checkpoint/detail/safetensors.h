// The safetensors file layout (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON {"<entry>": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ..., "__metadata__": {...}} padded with spaces to a multiple
// of 8, then the raw little-endian data; offsets are relative to the data's start and the
// entries tile it without gaps. Only the checkpoint layer writes and reads it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/checkpoint/detail/file_io.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor::checkpoint::detail {

// "F32", "F64", "F16", "BF16", "I32", "I64", "BOOL".
std::string_view safetensors_dtype(DType dtype);
std::optional<DType> dtype_from_safetensors(std::string_view name);

// The "__metadata__" map (string to string, as the format requires): {"format": "pt",
// "writer": "dtensor"} plus what the caller adds.
using SafetensorsMetadata = std::map<std::string, std::string>;

// A file's layout before any data is written: the 8-byte length and the header (padded so that
// the data starts 8-byte aligned), each entry's absolute byte offset (in the order given) and
// the file's total size. `metadata` is added to "__metadata__" = {"format": "pt", "writer":
// "dtensor"}.
struct SafetensorsEntryMeta {
  std::string name;
  DType dtype;
  Shape shape;
};
struct SafetensorsLayout {
  std::vector<unsigned char> prefix;
  std::vector<uint64_t> begin;
  uint64_t file_size = 0;
};
SafetensorsLayout layout_safetensors(const std::vector<SafetensorsEntryMeta>& entries,
                                     const SafetensorsMetadata& metadata);

// Writes `entries` (name, contiguous CPU tensor) in order with `metadata` added to the header's
// "__metadata__", fsyncs the file, and returns the CRC-32 of each entry's bytes.
std::vector<uint32_t> write_safetensors(const std::string& path,
                                        const std::vector<std::pair<std::string, Tensor>>& entries,
                                        const SafetensorsMetadata& metadata, std::string_view op);

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // absolute byte offsets in the file
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> entries;
  SafetensorsMetadata metadata;  // empty when the file has none
};

// Reads and validates a file's header: the JSON parses, every entry has a known dtype, a
// non-negative shape whose byte size equals its data_offsets range, and lies inside the file
// (a truncated file fails here); "__metadata__", when present, maps strings to strings. Throws
// "[op] file '<path>': ...".
SafetensorsHeader read_safetensors_header(const File& file, std::string_view op);

}  // namespace dtensor::checkpoint::detail
