#include "dtensor/parallel/local_map.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/runtime.h"
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

// What fn's results look like on one rank, before any exchange: fine, or the first problem
// (code, and the output count or index it concerns). Carried in the exchanged record so every
// rank raises the same error when any rank's results are bad.
enum OutputProblem : int64_t { kOutputsFine = 0, kWrongCount = 1, kUndefined = 2, kNotLocal = 3 };
struct OutputStatus {
  int64_t code = kOutputsFine;
  int64_t detail = 0;
};

OutputStatus output_status(const DTensorList& out, size_t expected) {
  if (out.size() != expected) return {kWrongCount, static_cast<int64_t>(out.size())};
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined()) return {kUndefined, static_cast<int64_t>(i)};
    if (!is_local(out[i])) return {kNotLocal, static_cast<int64_t>(i)};
  }
  return {};
}

[[noreturn]] void raise_output_problem(OutputStatus s, size_t expected, int rank) {
  switch (s.code) {
    case kWrongCount:
      DT_FAIL(
          "[local_map] the function returned %d outputs on rank %d but out_placements has %d "
          "entries (expected one per output)",
          s.detail, rank, expected);
    case kUndefined:
      DT_FAIL("[local_map] output %d is undefined on rank %d (expected a local DTensor)", s.detail,
              rank);
    default:
      DT_FAIL(
          "[local_map] output %d on rank %d is a DTensor on a mesh, not a local DTensor "
          "(expected a local DTensor: the function computes on local shards)",
          s.detail, rank);
  }
}

// The global shape of output `index` (placements `p`) from the records of one group: the members
// of the mesh differing from `base` only on `dims` (`all`: the record of the mesh's rank at
// row-major index L at L * stride + offset). Along each tensor dim the sum of one full set of its
// pieces (the members at coordinate 0 on the group's other dims), then checked against the
// torch.chunk layout compute_local_shape_and_offset gives every member. Every rank holds every
// record and checks every group in the same order, so every rank raises the same error. The
// dims no mesh dim shards are taken from `like` (this rank's local shape; nullptr: 1). Returns
// an empty shape (from_local then raises its own error on every rank) when a Shard dim is out of
// range.
Shape global_from_records(size_t index, const Shape* like, const Placements& p,
                          const DeviceMesh& mesh, const std::vector<int64_t>& dims,
                          const Shape& base, const std::vector<int64_t>& all, size_t stride,
                          size_t offset) {
  const int64_t k = mesh.ndim();
  Shape group_shape;
  for (int64_t m : dims) group_shape.push_back(mesh.size(m));
  int64_t members = 1;
  for (int64_t s : group_shape) members *= s;
  // The mesh coordinate of member r: `base`, with the group's dims replaced.
  auto coord_of = [&](int64_t r) {
    Shape c = base;
    const Shape g = detail::unravel_index(r, group_shape);
    for (size_t j = 0; j < dims.size(); ++j) c[static_cast<size_t>(dims[j])] = g[j];
    return c;
  };
  auto linear_of = [&](int64_t r) {
    const Shape c = coord_of(r);
    int64_t linear = 0;
    for (int64_t m = 0; m < k; ++m) linear = linear * mesh.size(m) + c[static_cast<size_t>(m)];
    return linear;
  };
  auto rec = [&](int64_t r) { return &all[static_cast<size_t>(linear_of(r)) * stride + offset]; };
  auto world_rank = [&](int64_t r) { return mesh.ranks()[static_cast<size_t>(linear_of(r))]; };
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
  const int64_t ndim = rec(0)[0];
  // The tensor dim each mesh dim shards (-1: none).
  std::vector<int64_t> tdim(static_cast<size_t>(k), -1);
  for (int64_t m = 0; m < k; ++m) {
    const Placement& q = p[static_cast<size_t>(m)];
    if (q.is_shard()) tdim[static_cast<size_t>(m)] = q.dim() < 0 ? q.dim() + ndim : q.dim();
  }
  Shape global = like != nullptr ? *like : Shape(static_cast<size_t>(ndim), 1);
  for (int64_t d = 0; d < ndim; ++d) {
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

// The outputs whose global shape is exchanged: a Shard placement on a mesh dim of size > 1 and
// no out_shapes entry. Depends only on the plan, so every rank agrees on whether to exchange.
std::vector<size_t> exchanged_outputs(const std::vector<Placements>& places,
                                      const std::vector<std::optional<Shape>>& shapes,
                                      const DeviceMesh& mesh) {
  std::vector<size_t> outputs;
  for (size_t i = 0; i < places.size(); ++i) {
    if (!shapes.empty() && shapes[i].has_value()) continue;
    if (!sharding_dims(places[i], mesh).empty()) outputs.push_back(i);
  }
  return outputs;
}

// The global shapes of the exchanged outputs (others: empty, from_local's rule is exact for
// them), and the agreement on `status`. One small int64 all-gather over the whole mesh (its
// flattened communicator) per call: [status code, detail, then per exchanged output its record],
// the same length on every rank whatever fn returned. Every rank then checks every rank's status
// and every group's records in the same order, so an error is raised on every rank of the mesh.
// Nothing is exchanged when no output is, or on a rank outside the mesh.
void exchange_out_shapes(const DTensorList& out, OutputStatus status,
                         const std::vector<Placements>& places,
                         const std::vector<std::optional<Shape>>& shapes, const DeviceMesh& mesh,
                         std::vector<Shape>& global) {
  const std::vector<size_t> outputs = exchanged_outputs(places, shapes, mesh);
  if (outputs.empty() || !mesh.contains_me()) return;
  const CommDebugMode::OpScope label("local_map");
  const CaptureExempt exempt;
  const int64_t k = mesh.ndim();
  const size_t stride_one = static_cast<size_t>(1 + k);
  std::vector<int64_t> record{status.code, status.detail};
  Tensor hint;
  for (size_t i : outputs) {
    if (status.code != kOutputsFine) {
      record.insert(record.end(), stride_one, kNoSize);
      continue;
    }
    append_record(out[i].to_local(), places[i], record);
    if (!hint.defined()) hint = out[i].to_local();
  }
  std::vector<int64_t> all_dims;
  for (int64_t m = 0; m < k; ++m) {
    if (mesh.size(m) > 1) all_dims.push_back(m);
  }
  Communicator& comm = *mesh.flattened_communicator(all_dims);
  const Device device = detail::mesh_device(mesh, hint);
  const int64_t stride = static_cast<int64_t>(record.size());
  const Tensor mine = from_vector(record, {stride}, device);
  const Tensor gathered = empty({comm.size(), stride}, TensorOptions(DType::kInt64, device));
  comm.all_gather(gathered, mine)->wait();
  const std::vector<int64_t> all = gathered.to_vector<int64_t>();
  for (int64_t r = 0; r < comm.size(); ++r) {
    const int64_t* rec = &all[static_cast<size_t>(r * stride)];
    if (rec[0] != kOutputsFine) {
      raise_output_problem({rec[0], rec[1]}, places.size(), mesh.ranks()[static_cast<size_t>(r)]);
    }
  }
  const Shape& me = mesh.get_coordinate();
  for (size_t j = 0; j < outputs.size(); ++j) {
    const size_t i = outputs[j];
    const std::vector<int64_t> dims = sharding_dims(places[i], mesh);
    const size_t offset = 2 + j * stride_one;
    const Shape local = out[i].to_local().shape();
    // Every group (its member at coordinate 0 on `dims`), in row-major order; this rank's own
    // group also gives its global shape.
    for (int64_t linear = 0; linear < mesh.size(); ++linear) {
      const Shape base = detail::unravel_index(linear, mesh.shape());
      bool is_base = true, mine_group = true;
      for (int64_t m = 0; m < k; ++m) {
        const bool in_dims = std::find(dims.begin(), dims.end(), m) != dims.end();
        const size_t mu = static_cast<size_t>(m);
        if (in_dims) is_base = is_base && base[mu] == 0;
        if (!in_dims) mine_group = mine_group && base[mu] == me[mu];
      }
      if (!is_base) continue;
      const Shape g = global_from_records(i, mine_group ? &local : nullptr, places[i], mesh, dims,
                                          base, all, static_cast<size_t>(stride), offset);
      if (mine_group) global[i] = g;
    }
    // Replicas (ranks differing only on mesh dims that do not shard the output) hold pieces of
    // the same sizes: else the groups' global shapes would differ.
    for (int64_t linear = 0; linear < mesh.size(); ++linear) {
      Shape c = detail::unravel_index(linear, mesh.shape());
      for (int64_t m = 0; m < k; ++m) {
        if (std::find(dims.begin(), dims.end(), m) == dims.end()) c[static_cast<size_t>(m)] = 0;
      }
      int64_t first = 0;
      for (int64_t m = 0; m < k; ++m) first = first * mesh.size(m) + c[static_cast<size_t>(m)];
      auto piece = [&](int64_t l) {
        const int64_t* rec = &all[static_cast<size_t>(l * stride) + offset];
        return std::vector<int64_t>(rec, rec + stride_one);
      };
      DT_CHECK(piece(linear) == piece(first),
               "[local_map] output %d with placements %s: rank %d and rank %d differ only on mesh "
               "dims that do not shard it but their local outputs differ (ndim, then the size "
               "along each mesh dim's sharded dim, -1 for none: %s on rank %d, %s on rank %d); "
               "expected the same piece sizes on replicas",
               i, placements_str(places[i]), mesh.ranks()[static_cast<size_t>(first)],
               mesh.ranks()[static_cast<size_t>(linear)], shape_str(piece(first)),
               mesh.ranks()[static_cast<size_t>(first)], shape_str(piece(linear)),
               mesh.ranks()[static_cast<size_t>(linear)]);
    }
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
  const auto& shapes = plan.options.out_shapes;
  const OutputStatus status = output_status(out, plan.out_placements.size());
  std::vector<Shape> inferred(plan.out_placements.size());
  // With an exchange every rank raises for a bad output on any rank; without one (see the header)
  // only the rank whose fn returned it.
  exchange_out_shapes(out, status, plan.out_placements, shapes, plan.mesh, inferred);
  if (status.code != kOutputsFine) {
    raise_output_problem(status, plan.out_placements.size(), world_rank());
  }
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
  DT_CHECK(options.out_shapes.empty() || options.out_shapes.size() == out_placements.size(),
           "[local_map] out_shapes has %d entries but out_placements has %d (expected one per "
           "output, or none)",
           options.out_shapes.size(), out_placements.size());
  check_lists(in_placements, mesh, "in_placements", /*allow_empty=*/false);
  check_lists(options.in_grad_placements, mesh, "in_grad_placements", /*allow_empty=*/true);
  auto plan =
      std::make_shared<const Plan>(Plan{std::move(fn), std::move(out_placements),
                                        std::move(in_placements), mesh, std::move(options)});
  return [plan](absl::Span<const DTensor> args) { return call(*plan, args); };
}

}  // namespace dtensor
