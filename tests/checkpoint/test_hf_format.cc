// The Hugging Face layout helpers (checkpoint/detail/hf_format.h), single process: the byte
// runs a shard covers (what a rank reads or writes), shard file names as transformers writes
// them, the index in and out, and the rename table.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "dtensor/checkpoint/detail/hf_format.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/tensor/error.h"

namespace ck = dtensor::checkpoint;
namespace detail = dtensor::checkpoint::detail;
using Run = std::tuple<int64_t, int64_t, int64_t>;

namespace {

std::vector<Run> runs(dtensor::IntSpan shape, dtensor::IntSpan off, dtensor::IntSpan box) {
  std::vector<Run> out;
  detail::for_each_run(shape, off, box, [&](int64_t at, int64_t in_box, int64_t n) {
    out.emplace_back(at, in_box, n);
  });
  return out;
}

}  // namespace

TEST_CASE("hf for_each_run: a shard's contiguous runs", "[hf]") {
  // Rows 2..3 of a [6, 8] matrix (Shard(0)): one run.
  CHECK(runs({6, 8}, {2, 0}, {2, 8}) == std::vector<Run>{{16, 0, 16}});
  // Columns 4..5 (Shard(1)): one run per row.
  CHECK(runs({6, 8}, {0, 4}, {6, 2}) ==
        std::vector<Run>{{4, 0, 2}, {12, 2, 2}, {20, 4, 2}, {28, 6, 2}, {36, 8, 2}, {44, 10, 2}});
  // A block of a 3-d tensor [2, 3, 4]: rows 1..2 of dim 1, all of dim 2, both of dim 0.
  CHECK(runs({2, 3, 4}, {0, 1, 0}, {2, 2, 4}) == std::vector<Run>{{4, 0, 8}, {16, 8, 8}});
  // [S(0), S(1)] on a 2x2 mesh of a [4, 6] matrix: rows 2..3, columns 3..5.
  CHECK(runs({4, 6}, {2, 3}, {2, 3}) == std::vector<Run>{{15, 0, 3}, {21, 3, 3}});
  // The whole tensor, a scalar, an empty shard.
  CHECK(runs({3, 5}, {0, 0}, {3, 5}) == std::vector<Run>{{0, 0, 15}});
  CHECK(runs({}, {}, {}) == std::vector<Run>{{0, 0, 1}});
  CHECK(runs({4, 6}, {4, 0}, {0, 6}).empty());
}

TEST_CASE("hf file names, index and rename table", "[hf]") {
  CHECK(detail::hf_shard_file_name(2, 11) == "model-00002-of-00011.safetensors");
  CHECK(detail::is_hf_shard_file_name("model-00002-of-00011.safetensors"));
  CHECK_FALSE(detail::is_hf_shard_file_name("model-0002-of-00011.safetensors"));
  CHECK_FALSE(detail::is_hf_shard_file_name("model.safetensors"));
  CHECK_FALSE(detail::is_hf_shard_file_name("model-00002-of-00011.safetensors.tmp"));

  const std::string text = detail::hf_index_to_json({{"b", "f2"}, {"a", "f1"}}, 7, 28);
  const auto j = nlohmann::json::parse(text);
  CHECK(j["metadata"]["total_size"] == 28);
  CHECK(j["metadata"]["total_parameters"] == 7);
  CHECK(detail::hf_weight_map_from_json(text, "idx", "op") ==
        std::map<std::string, std::string>{{"a", "f1"}, {"b", "f2"}});
  CHECK_THROWS_WITH(detail::hf_weight_map_from_json("[]", "idx", "op"),
                    Catch::Contains("[op] index 'idx' is corrupt"));
  CHECK_THROWS_WITH(
      detail::hf_weight_map_from_json(R"({"weight_map": {"a": "../x"}})", "idx", "op"),
      Catch::Contains("maps tensor 'a' to \"../x\""));

  const ck::HfRename r = ck::hf_rename_map({{"lm_head.weight", "output.weight"}});
  CHECK(r("lm_head.weight") == "output.weight");
  CHECK(r("model.norm.weight") == "model.norm.weight");
}
