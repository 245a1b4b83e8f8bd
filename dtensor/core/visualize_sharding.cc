#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/core/detail/util.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

std::string visualize_sharding(const DTensor& t, bool print) {
  DT_CHECK(t.defined(), "[visualize_sharding] the DTensor is undefined (expected a DTensor)");
  const DeviceMesh& mesh = t.device_mesh();
  const Shape& me = mesh.get_coordinate();
  for (int64_t c : me) {
    if (c != 0) return "";
  }
  if (me.empty()) return "";
  // (offset, shape) of each distinct block -> the world ranks holding it, ordered by offset.
  std::map<std::pair<Shape, Shape>, std::vector<int>> blocks;
  const std::vector<int>& ranks = mesh.ranks();
  for (size_t m = 0; m < ranks.size(); ++m) {
    const LocalShard s =
        t.spec().local_shard(detail::unravel_index(static_cast<int64_t>(m), mesh.shape()));
    blocks[{s.offset, s.shape}].push_back(ranks[m]);
  }
  std::string out = absl::StrFormat("global %s %s, placements %s, mesh %s\n", shape_str(t.shape()),
                                    dtype_name(t.dtype()), placements_str(t.placements()),
                                    shape_str(mesh.shape()));
  for (const auto& [key, holders] : blocks) {
    const auto& [offset, shape] = key;
    auto range = [&](int64_t d) {
      return absl::StrFormat("[%d, %d)", offset[d], offset[d] + shape[d]);
    };
    // 1-d: elements; 2-d: rows and cols; any other rank: one range per dim ("x"-joined).
    if (t.dim() == 0) {
      absl::StrAppendFormat(&out, "  scalar ranks %s", absl::StrJoin(holders, ", "));
    } else if (t.dim() == 1) {
      absl::StrAppendFormat(&out, "  elements %-12s ranks %s", range(0),
                            absl::StrJoin(holders, ", "));
    } else if (t.dim() == 2) {
      absl::StrAppendFormat(&out, "  rows %-12s cols %-12s ranks %s", range(0), range(1),
                            absl::StrJoin(holders, ", "));
    } else {
      std::vector<std::string> ranges;
      for (int64_t d = 0; d < t.dim(); ++d) ranges.push_back(range(d));
      absl::StrAppendFormat(&out, "  block %-30s ranks %s", absl::StrJoin(ranges, " x "),
                            absl::StrJoin(holders, ", "));
    }
    if (shape_numel(shape) == 0) out += " (empty)";
    out += "\n";
  }
  if (t.spec().has_partial()) out += "  (Partial: each block holds a partial value)\n";
  if (print) std::cout << out << std::flush;
  return out;
}

}  // namespace dtensor
