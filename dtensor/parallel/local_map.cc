#include "dtensor/parallel/local_map.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
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

// While alive, this thread captures no step: the size exchange of infer_out_shapes runs at a
// dtensor::compile capture but is no primitive of the step (replays reuse the captured shapes,
// which the capture's input guards fix), so it is neither recorded nor refused.
class CaptureExempt {
 public:
  CaptureExempt() : saved_(detail::capture_recorder()) { detail::set_capture_recorder(nullptr); }
  ~CaptureExempt() { detail::set_capture_recorder(saved_); }
  CaptureExempt(const CaptureExempt&) = delete;
  CaptureExempt& operator=(const CaptureExempt&) = delete;

 private:
  detail::CaptureRecorder* saved_;
};

// The mesh dims of size > 1 that shard an output with `p` (ascending): the members it is
// split over.
std::vector<int64_t> sharding_dims(const Placements& p, const DeviceMesh& mesh) {
  std::vector<int64_t> dims;
  for (size_t m = 0; m < p.size(); ++m) {
    if (p[m].is_shard() && mesh.size(static_cast<int64_t>(m)) > 1) {
      dims.push_back(static_cast<int64_t>(m));
    }
  }
  return dims;
}

// An output's record: its ndim, then per mesh dim the local size along the tensor dim that mesh
// dim shards (-1 for a Replicate / Partial mesh dim or a Shard dim out of range). The same
// length on every rank whatever the local shape, so the exchange never mismatches.
constexpr int64_t kNoSize = -1;
void append_record(const Tensor& local, const Placements& p, std::vector<int64_t>& out) {
  const int64_t ndim = local.dim();
  out.push_back(ndim);
  for (const Placement& q : p) {
    const int64_t d = q.is_shard() && q.dim() < 0 ? q.dim() + ndim : q.dim();
    out.push_back(q.is_shard() && d >= 0 && d < ndim ? local.size(d) : kNoSize);
  }
}

// The global shape of output `index` (local `local`, placements `p`) from the records of the
// members of this rank's group over `dims` (`all`: member r's record at r * stride + offset,
// members row-major over `dims`): along each tensor dim the sum of one full set of its pieces
// (the members at coordinate 0 on the group's other dims), then checked against the torch.chunk
// layout compute_local_shape_and_offset gives every member. Raises on every member (they all
// hold the same records). Returns an empty shape (from_local then raises its own error on every
// rank) when a Shard dim is out of range.
Shape global_from_records(size_t index, const Tensor& local, const Placements& p,
                          const DeviceMesh& mesh, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& all, size_t stride, size_t offset) {
  const int64_t k = mesh.ndim();
  Shape group_shape;
  for (int64_t m : dims) group_shape.push_back(mesh.size(m));
  const int64_t members = static_cast<int64_t>(all.size() / stride);
  // The mesh coordinate of member r: this rank's, with the group's dims replaced.
  auto coord_of = [&](int64_t r) {
    Shape c = mesh.get_coordinate();
    const Shape g = detail::unravel_index(r, group_shape);
    for (size_t j = 0; j < dims.size(); ++j) c[static_cast<size_t>(dims[j])] = g[j];
    return c;
  };
  auto rec = [&](int64_t r) { return &all[static_cast<size_t>(r) * stride + offset]; };
  auto world_rank = [&](int64_t r) {
    const Shape c = coord_of(r);
    int64_t linear = 0;
    for (int64_t m = 0; m < k; ++m) linear = linear * mesh.size(m) + c[static_cast<size_t>(m)];
    return mesh.ranks()[static_cast<size_t>(linear)];
  };
  // What each member holds along the sharded dims, for the messages: "rank 2: [3, 1]".
  auto seen = [&] {
    std::vector<std::string> parts;
    for (int64_t r = 0; r < members; ++r) {
      std::vector<int64_t> sizes;
      for (int64_t m = 0; m < k; ++m) {
        if (p[static_cast<size_t>(m)].is_shard()) sizes.push_back(rec(r)[1 + m]);
      }
      parts.push_back(absl::StrFormat("rank %d: %s", world_rank(r), shape_str(sizes)));
    }
    return absl::StrJoin(parts, ", ");
  };
  for (int64_t r = 1; r < members; ++r) {
    DT_CHECK(rec(r)[0] == rec(0)[0],
             "[local_map] output %d with placements %s: the ranks' local outputs differ in ndim "
             "(%d-d on rank %d, %d-d on rank %d; local sizes along the sharded dims: %s)",
             index, placements_str(p), rec(0)[0], world_rank(0), rec(r)[0], world_rank(r), seen());
  }
  for (int64_t m = 0; m < k; ++m) {
    if (p[static_cast<size_t>(m)].is_shard() && rec(0)[1 + m] == kNoSize) return Shape();
  }
  // The tensor dim each mesh dim shards (-1: none).
  std::vector<int64_t> tdim(static_cast<size_t>(k), -1);
  for (int64_t m = 0; m < k; ++m) {
    const Placement& q = p[static_cast<size_t>(m)];
    if (q.is_shard()) tdim[static_cast<size_t>(m)] = q.dim() < 0 ? q.dim() + local.dim() : q.dim();
  }
  Shape global = local.shape();
  for (int64_t d = 0; d < local.dim(); ++d) {
    // The group's dims that shard d; a set of full pieces of d: the members at coordinate 0 on
    // the other group dims.
    std::vector<size_t> on_d, off_d;
    for (size_t j = 0; j < dims.size(); ++j) {
      (tdim[static_cast<size_t>(dims[j])] == d ? on_d : off_d).push_back(j);
    }
    if (on_d.empty()) continue;
    int64_t total = 0;
    int64_t m_d = -1;  // a mesh dim sharding d: which record entry holds the size along d
    for (size_t j : on_d) m_d = dims[j];
    for (int64_t r = 0; r < members; ++r) {
      const Shape g = detail::unravel_index(r, group_shape);
      bool first = true;
      for (size_t j : off_d) first = first && g[j] == 0;
      if (first) total += rec(r)[1 + m_d];
    }
    global[static_cast<size_t>(d)] = total;
  }
  for (int64_t r = 0; r < members; ++r) {
    const Shape want = compute_local_shape_and_offset(global, mesh.shape(), coord_of(r), p).shape;
    for (int64_t m = 0; m < k; ++m) {
      const int64_t d = tdim[static_cast<size_t>(m)];
      DT_CHECK(d < 0 || want[static_cast<size_t>(d)] == rec(r)[1 + m],
               "[local_map] output %d with placements %s: the local sizes along the sharded dims "
               "(%s) are not the torch.chunk pieces of any global size (expected ceil(n / "
               "ranks)-sized pieces in rank order, the last ones smaller or empty); pass "
               "out_shapes[%d] with its global shape, or return pieces that fit",
               index, placements_str(p), seen(), index);
    }
  }
  return global;
}

// The global shapes of the outputs with a Shard placement on a mesh dim of size > 1 and no
// out_shapes entry (others: empty, from_local's rule is exact for them). Outputs split over the
// same mesh dims share one all-gather of their records over those dims (the flattened
// communicator): one small int64 all-gather per such set of dims per call.
std::vector<Shape> infer_out_shapes(const DTensorList& out, const std::vector<Placements>& places,
                                    const std::vector<std::optional<Shape>>& shapes,
                                    const DeviceMesh& mesh) {
  std::vector<Shape> global(out.size());
  if (!mesh.contains_me()) return global;
  std::map<std::vector<int64_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!shapes.empty() && shapes[i].has_value()) continue;
    std::vector<int64_t> dims = sharding_dims(places[i], mesh);
    if (!dims.empty()) groups[std::move(dims)].push_back(i);
  }
  if (groups.empty()) return global;
  const CommDebugMode::OpScope label("local_map");
  const CaptureExempt exempt;
  const size_t stride_one = static_cast<size_t>(1 + mesh.ndim());
  for (const auto& [dims, outputs] : groups) {
    std::vector<int64_t> record;
    for (size_t i : outputs) append_record(out[i].to_local(), places[i], record);
    Communicator& comm = *mesh.flattened_communicator(dims);
    const Device device = detail::mesh_device(mesh, out[outputs[0]].to_local());
    const Tensor mine = from_vector(record, {static_cast<int64_t>(record.size())}, device);
    const Tensor gathered = empty({comm.size(), static_cast<int64_t>(record.size())},
                                  TensorOptions(DType::kInt64, device));
    comm.all_gather(gathered, mine)->wait();
    const std::vector<int64_t> all = gathered.to_vector<int64_t>();
    for (size_t j = 0; j < outputs.size(); ++j) {
      const size_t i = outputs[j];
      global[i] = global_from_records(i, out[i].to_local(), places[i], mesh, dims, all,
                                      record.size(), j * stride_one);
    }
  }
  return global;
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
  }
  const std::vector<Shape> inferred = infer_out_shapes(out, plan.out_placements, shapes, plan.mesh);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool has_shape = !shapes.empty() && shapes[i].has_value();
    const IntSpan shape = has_shape ? IntSpan(*shapes[i]) : IntSpan(inferred[i]);
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
