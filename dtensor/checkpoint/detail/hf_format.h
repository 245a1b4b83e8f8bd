// The Hugging Face directory layout (internal to the checkpoint layer): the weight files'
// names, model.safetensors.index.json in and out, and the byte runs a box of a row-major tensor
// occupies (what a rank reads or writes of its shard). Used by hf_load.cc and hf_save.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "dtensor/tensor/shape.h"

namespace dtensor::checkpoint::detail {

inline constexpr char kHfWeightsFile[] = "model.safetensors";
inline constexpr char kHfIndexFile[] = "model.safetensors.index.json";
inline constexpr char kHfConfigFile[] = "config.json";

// "model-00002-of-00005.safetensors" (k counts from 1, as transformers names its shards).
std::string hf_shard_file_name(int k, int n);
// Whether `name` is such a shard name, of any k and n (a stale shard of an earlier save).
bool is_hf_shard_file_name(std::string_view name);

// model.safetensors.index.json: {"metadata": {"total_parameters": P, "total_size": B},
// "weight_map": {entry: file, ...}} as save_pretrained writes it (keys sorted, 2-space indent).
std::string hf_index_to_json(const std::map<std::string, std::string>& weight_map,
                             uint64_t total_parameters, uint64_t total_size);
// The weight_map of an index file's text, validated: an object of strings, each a plain file
// name (the index cannot point outside its directory). Throws "[op] index '<path>' ...".
std::map<std::string, std::string> hf_weight_map_from_json(const std::string& text,
                                                           const std::string& path,
                                                           std::string_view op);

// The contiguous runs of elements that the box (offset `off`, shape `box`) of a row-major tensor
// of shape `shape` covers, in order: fn(first element's index in the tensor, its index in the
// box laid out row-major, number of elements). Trailing dims the box covers whole merge into
// its runs: a box of whole rows (Shard(0)) is one run, a column block of a matrix (Shard(1)) is
// one run per row. None for an empty box.
void for_each_run(IntSpan shape, IntSpan off, IntSpan box,
                  const std::function<void(int64_t at, int64_t in_box, int64_t n)>& fn);

}  // namespace dtensor::checkpoint::detail
