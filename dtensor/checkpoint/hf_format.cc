#include "dtensor/checkpoint/detail/hf_format.h"

#include <absl/strings/str_format.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <vector>

#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint::detail {

namespace {

using json = nlohmann::json;

// Consume five digits, or a prefix, from the front of `s`; false when they are not there.
bool eat_five_digits(std::string_view& s) {
  if (s.size() < 5) return false;
  for (int i = 0; i < 5; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  s.remove_prefix(5);
  return true;
}

bool eat(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string hf_shard_file_name(int k, int n) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", k, n);
}

bool is_hf_shard_file_name(std::string_view name) {
  return eat(name, "model-") && eat_five_digits(name) && eat(name, "-of-") &&
         eat_five_digits(name) && name == ".safetensors";
}

std::string hf_index_to_json(const std::map<std::string, std::string>& weight_map,
                             uint64_t total_parameters, uint64_t total_size) {
  const json index = {
      {"metadata", {{"total_parameters", total_parameters}, {"total_size", total_size}}},
      {"weight_map", weight_map}};
  // nlohmann's objects keep their keys sorted: json.dumps(index, indent=2, sort_keys=True).
  return index.dump(2) + "\n";
}

std::map<std::string, std::string> hf_weight_map_from_json(const std::string& text,
                                                           const std::string& path,
                                                           std::string_view op) {
  const json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  DT_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
           "[%s] index '%s' is corrupt: not a JSON object with a \"weight_map\" object", op, path);
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : index["weight_map"].items()) {
    DT_CHECK(file.is_string() && is_plain_file_name(file.get<std::string>()),
             "[%s] index '%s' maps tensor '%s' to %s, which is not a file name inside the "
             "directory",
             op, path, name, file.dump());
    out.emplace(name, file.get<std::string>());
  }
  return out;
}

void for_each_run(IntSpan shape, IntSpan off, IntSpan box,
                  const std::function<void(int64_t at, int64_t in_box, int64_t n)>& fn) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < ndim; ++d) {
    if (box[d] == 0) return;
  }
  // Dims k+1.. are covered whole, so each run spans box[k] * inner elements. Example: a
  // [6, 8] matrix, box offset [0, 4] shape [6, 2] (a column shard): k = 1, inner = 1, six runs
  // of 2 elements starting at 4, 12, 20, ...
  int64_t k = ndim - 1;
  while (k >= 0 && box[k] == shape[k]) --k;
  if (k < 0) {
    fn(0, 0, shape_numel(shape));
    return;
  }
  std::vector<int64_t> stride(ndim, 1);
  for (int64_t d = ndim - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  const int64_t run = box[k] * stride[k];
  std::vector<int64_t> idx(k, 0);  // position in the box along dims 0..k-1
  for (int64_t in_box = 0;; in_box += run) {
    int64_t at = off[k] * stride[k];
    for (int64_t d = 0; d < k; ++d) at += (off[d] + idx[d]) * stride[d];
    fn(at, in_box, run);
    int64_t d = k - 1;
    while (d >= 0 && ++idx[d] == box[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace dtensor::checkpoint::detail

namespace dtensor::checkpoint {

HfRename hf_rename_map(std::map<std::string, std::string> table) {
  return [table = std::move(table)](const std::string& name) {
    const auto it = table.find(name);
    return it == table.end() ? name : it->second;
  };
}

}  // namespace dtensor::checkpoint
