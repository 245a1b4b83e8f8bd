#include "dtensor/parallel/local_map.h"

#include <memory>
#include <utility>

#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

// `p` with each Shard(d < 0) counted from the last of `ndim` dims (as the DTensor's own
// placements are stored); a dim still out of range is left for the redistribute to reject.
Placements normalized(const Placements& p, int64_t ndim) {
  Placements out = p;
  for (Placement& q : out) {
    if (q.is_shard() && q.dim() < 0 && q.dim() + ndim >= 0) q = Shard(q.dim() + ndim);
  }
  return out;
}

// Each given list of `lists` has one placement per mesh dim (an empty one is "not given" where
// allow_empty).
void check_lists(const std::vector<std::optional<Placements>>& lists, const DeviceMesh& mesh,
                 const char* what, bool allow_empty) {
  for (size_t i = 0; i < lists.size(); ++i) {
    if (!lists[i] || (allow_empty && lists[i]->empty())) continue;
    DT_CHECK(static_cast<int64_t>(lists[i]->size()) == mesh.ndim(),
             "[local_map] %s[%d] is %s, %d placements for a %d-d mesh (expected one per mesh dim)",
             what, i, placements_str(*lists[i]), lists[i]->size(), mesh.ndim());
  }
}

struct Plan {
  LocalMapFunction fn;
  std::vector<Placements> out_placements;
  std::vector<std::optional<Placements>> in_placements;
  DeviceMesh mesh;
  LocalMapOptions options;
};

DTensorList call(const Plan& plan, absl::Span<const DTensor> args) {
  const size_t n = args.size();
  const auto& in = plan.in_placements;
  const auto& grad = plan.options.in_grad_placements;
  DT_CHECK(in.empty() || in.size() == n,
           "[local_map] got %d inputs but %d in_placements (expected one entry per input, "
           "std::nullopt for an input that passes through)",
           n, in.size());
  DT_CHECK(grad.empty() || grad.size() == n,
           "[local_map] got %d inputs but %d in_grad_placements (expected one entry per input)", n,
           grad.size());
  std::vector<DTensor> local(args.begin(), args.end());
  bool seen_mesh_input = false;
  for (size_t i = 0; i < n; ++i) {
    const DTensor& x = args[i];
    if (!x.defined()) continue;
    if (!(x.device_mesh() == plan.mesh)) {
      DT_CHECK(is_local(x),
               "[local_map] input %d is on %s (expected the local_map mesh %s or a local DTensor)",
               i, x.device_mesh().str(), plan.mesh.str());
      continue;
    }
    seen_mesh_input = true;
    DTensor arg = x;
    if (!in.empty()) {
      DT_CHECK(in[i].has_value(),
               "[local_map] input %d is a DTensor on the mesh with placements %s but "
               "in_placements[%d] is std::nullopt (expected its placements)",
               i, placements_str(x.placements()), i);
      const Placements want = normalized(*in[i], x.dim());
      if (x.placements() != want) {
        DT_CHECK(plan.options.redistribute_inputs,
                 "[local_map] input %d has placements %s but in_placements[%d] is %s (pass "
                 "redistribute_inputs = true to redistribute it)",
                 i, placements_str(x.placements()), i, placements_str(*in[i]));
        arg = x.redistribute(want);
      }
    }
    const bool has_grad = !grad.empty() && grad[i] && !grad[i]->empty();
    local[i] =
        has_grad ? arg.to_local_dtensor(normalized(*grad[i], arg.dim())) : arg.to_local_dtensor();
  }
  DTensorList out = plan.fn(local);
  if (!seen_mesh_input) return out;
  DT_CHECK(out.size() == plan.out_placements.size(),
           "[local_map] the function returned %d outputs but out_placements has %d entries "
           "(expected one per output)",
           out.size(), plan.out_placements.size());
  const auto& shapes = plan.options.out_shapes;
  DT_CHECK(shapes.empty() || shapes.size() == out.size(),
           "[local_map] the function returned %d outputs but out_shapes has %d entries", out.size(),
           shapes.size());
  for (size_t i = 0; i < out.size(); ++i) {
    DT_CHECK(out[i].defined(), "[local_map] output %d is undefined (expected a local DTensor)", i);
    DT_CHECK(is_local(out[i]),
             "[local_map] output %d is a DTensor on %s (expected a local DTensor: the function "
             "computes on local shards)",
             i, out[i].device_mesh().str());
    const bool has_shape = !shapes.empty() && shapes[i].has_value();
    const IntSpan shape = has_shape ? IntSpan(*shapes[i]) : IntSpan();
    out[i] = DTensor::from_local(out[i], plan.mesh, plan.out_placements[i], plan.options.run_check,
                                 shape);
  }
  return out;
}

}  // namespace

LocalMapFunction local_map(LocalMapFunction fn, std::vector<Placements> out_placements,
                           std::vector<std::optional<Placements>> in_placements,
                           const DeviceMesh& mesh, LocalMapOptions options) {
  DT_CHECK(fn != nullptr, "[local_map] the function is empty");
  DT_CHECK(mesh.defined(), "[local_map] the device mesh is an empty handle (expected a mesh)");
  for (size_t i = 0; i < out_placements.size(); ++i) {
    DT_CHECK(static_cast<int64_t>(out_placements[i].size()) == mesh.ndim(),
             "[local_map] out_placements[%d] is %s, %d placements for a %d-d mesh (expected one "
             "per mesh dim)",
             i, placements_str(out_placements[i]), out_placements[i].size(), mesh.ndim());
  }
  check_lists(in_placements, mesh, "in_placements", /*allow_empty=*/false);
  check_lists(options.in_grad_placements, mesh, "in_grad_placements", /*allow_empty=*/true);
  auto plan =
      std::make_shared<const Plan>(Plan{std::move(fn), std::move(out_placements),
                                        std::move(in_placements), mesh, std::move(options)});
  return [plan](absl::Span<const DTensor> args) { return call(*plan, args); };
}

}  // namespace dtensor
