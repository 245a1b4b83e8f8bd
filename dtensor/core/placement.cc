#include "dtensor/core/placement.h"

#include <absl/strings/str_format.h>

#include "dtensor/tensor/error.h"

namespace dtensor {

Placement Placement::partial(ReduceOp op) {
  DT_CHECK(
      op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kMax || op == ReduceOp::kMin,
      "[Partial] reduce op %s is not supported (expected sum, avg, max or min)",
      reduce_op_name(op));
  Placement p;
  p.kind_ = PlacementKind::kPartial;
  p.op_ = op;
  return p;
}

std::string Placement::str() const {
  switch (kind_) {
    case PlacementKind::kReplicate:
      return "R";
    case PlacementKind::kShard:
      return "S(" + std::to_string(dim_) + ")";
    case PlacementKind::kPartial:
      return absl::StrFormat("P(%s)", reduce_op_name(op_));
  }
  return "?";
}

std::string placements_str(PlacementSpan placements) {
  std::string out = "[";
  for (size_t i = 0; i < placements.size(); ++i) {
    if (i > 0) out += ", ";
    out += placements[i].str();
  }
  out += "]";
  return out;
}

}  // namespace dtensor
