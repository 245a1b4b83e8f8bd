// The dtensor layer's debug-log lines (topics dispatch, propagation, redistribute; see
// dtensor/collectives/debug_log.h). Call sites check log_enabled(topic) first, so nothing here runs
// while logging is off.
#pragma once

#include "dtensor/collectives/debug_log.h"
#include "dtensor/core/dtensor_spec.h"

namespace dtensor {
class OpSchema;
struct OutputSharding;
struct RedistributePlan;
}  // namespace dtensor

namespace dtensor::detail {

// "add: inputs [S(0)], [R] -> strategy [S(0)] <- ([S(0)], [R] -> [S(0)]) -> outputs [S(0)]"
void log_dispatch(const OpSchema& schema, const OutputSharding& sharding);
// "add(...specs...): cache hit|miss, strategy ..., cost 12.3 us"
void log_propagation(const OpSchema& schema, const OutputSharding& sharding, bool cache_hit);
// "[S(0), R] -> [R, R] on mesh [2, 2], global [8, 16] float32: plan [...] cost 12.3 us"
void log_redistribute(const DTensorSpec& src, const DTensorSpec& dst, const RedistributePlan& plan);

}  // namespace dtensor::detail
