#include "dtensor/core/detail/log.h"

#include <absl/strings/str_format.h>

#include <string>

#include "dtensor/core/propagation/op_schema.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/core/redistribute.h"

namespace dtensor::detail {

namespace {
std::string input_placements(const OpSchema& schema) {
  std::string s;
  for (const DTensorSpec* in : schema.inputs()) {
    if (!s.empty()) s += ", ";
    s += placements_str(in->placements());
  }
  return s;
}
std::string output_placements(const OutputSharding& sharding) {
  std::string s;
  for (const auto& out : sharding.outputs) {
    if (!s.empty()) s += ", ";
    s += placements_str(out->placements());
  }
  return s;
}
}  // namespace

void log_dispatch(const OpSchema& schema, const OutputSharding& sharding) {
  log_line(LogTopic::kDispatch,
           absl::StrFormat("%s: inputs %s -> outputs %s (strategy %s%s)", schema.name(),
                           input_placements(schema), output_placements(sharding), sharding.str(),
                           sharding.needs_redistribute() ? ", inputs redistributed" : ""));
}

void log_propagation(const OpSchema& schema, const OutputSharding& sharding, bool cache_hit) {
  log_line(LogTopic::kPropagation,
           absl::StrFormat("%s: cache %s, strategy %s, redistribution cost %.3g us", schema.str(),
                           cache_hit ? "hit" : "miss", sharding.str(), sharding.cost));
}

void log_redistribute(const DTensorSpec& src, const DTensorSpec& dst,
                      const RedistributePlan& plan) {
  log_line(LogTopic::kRedistribute,
           absl::StrFormat("%s -> %s on mesh %s, global %s %s: %d step%s %s, cost %.3g us",
                           placements_str(src.placements()), placements_str(dst.placements()),
                           shape_str(src.mesh().shape()), shape_str(src.shape()),
                           dtype_name(src.dtype()), plan.steps.size(),
                           plan.steps.size() == 1 ? "" : "s", plan.str(), plan.cost));
}

}  // namespace dtensor::detail
