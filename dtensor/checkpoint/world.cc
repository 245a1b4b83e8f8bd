#include "dtensor/checkpoint/detail/world.h"

#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>

#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor::checkpoint::detail {

DeviceMesh world_mesh() {
  const int64_t shape[] = {world_size()};
  return init_device_mesh(kCPU, shape, {"world"});
}

void run_on_all_ranks(const DeviceMesh& world, const std::function<void()>& fn) {
  std::string error;
  try {
    fn();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "unknown error";
  }
  const int64_t dims[] = {0};
  check_on_all_ranks(world, dims, error);
}

std::vector<std::string> all_gather_strings(const std::string& mine) {
  const CommunicatorPtr comm = world_communicator();
  const int n = comm->size();
  Tensor len = from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}, {1});
  Tensor lens = empty({n}, kInt64);
  comm->all_gather(lens, len)->wait();
  const std::vector<int64_t> sizes = lens.to_vector<int64_t>();
  // Strings travel as int64 words (there is no byte dtype), padded to the longest.
  const int64_t words = (*std::max_element(sizes.begin(), sizes.end()) + 7) / 8;
  Tensor buf = zeros({std::max<int64_t>(words, 1)}, kInt64);
  std::memcpy(buf.data_ptr(), mine.data(), mine.size());
  Tensor all = empty({n * buf.numel()}, kInt64);
  comm->all_gather(all, buf)->wait();
  std::vector<std::string> out(n);
  const char* base = static_cast<const char*>(all.data_ptr());
  for (int r = 0; r < n; ++r) out[r].assign(base + r * buf.numel() * 8, sizes[r]);
  return out;
}

Agreement agree(std::optional<uint64_t> value, bool flag) {
  // The value as int64 (its sign is irrelevant to equality); a rank without one passes the
  // identity of each reduction, so that min >= max exactly when the values passed agree. The
  // flag rides along in the same reductions (its max says whether any rank set it).
  constexpr int64_t kNone[] = {std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min()};
  const int64_t f = flag ? 1 : 0;
  Tensor lo =
      from_vector(std::vector<int64_t>{value ? static_cast<int64_t>(*value) : kNone[0], f}, {2});
  Tensor hi =
      from_vector(std::vector<int64_t>{value ? static_cast<int64_t>(*value) : kNone[1], f}, {2});
  const CommunicatorPtr comm = world_communicator();
  comm->all_reduce(lo, ReduceOp::kMin)->wait();
  comm->all_reduce(hi, ReduceOp::kMax)->wait();
  const std::vector<int64_t> l = lo.to_vector<int64_t>(), h = hi.to_vector<int64_t>();
  return {l[0] >= h[0], h[1] != 0};
}

Region local_region(const DTensor& t) {
  Region r;
  const DTensorSpec& spec = t.spec();
  if (is_self_mesh(spec.mesh())) {
    r.offset.assign(spec.ndim(), 0);
    r.shape = spec.shape();
    r.holds = true;
    r.writes = true;
    return r;
  }
  const Shape& coord = spec.mesh().get_coordinate();
  if (coord.empty()) return r;
  const LocalShard shard = spec.local_shard();
  r.offset = shard.offset;
  r.shape = shard.shape;
  r.holds = true;
  r.writes = true;
  for (size_t d = 0; d < coord.size(); ++d) {
    if (!spec.placement(d).is_shard() && coord[d] != 0) r.writes = false;
  }
  return r;
}

void validate_state(const StateDict& state, std::string_view op) {
  absl::flat_hash_set<std::string_view> seen;
  for (const auto& [name, t] : state) {
    DT_CHECK(!name.empty(), "[%s] a tensor has an empty name", op);
    DT_CHECK(seen.insert(name).second, "[%s] tensor '%s' appears twice in the state", op, name);
    DT_CHECK(t.defined(), "[%s] tensor '%s' is undefined", op, name);
    DT_CHECK(!t.spec().has_partial(),
             "[%s] tensor '%s' has Partial placements %s: a partial value is not the tensor; "
             "redistribute it to Replicate or Shard first",
             op, name, placements_str(t.placements()));
  }
}

void check_has_data(const StateDict& state, std::string_view op) {
  for (const auto& [name, t] : state) {
    DT_CHECK(!t.device().is_meta(),
             "[%s] tensor '%s' is on the meta device: it holds no data to %s (checkpoint::%s "
             "plans it without data: checkpoint/plan.h)",
             op, name, op == "checkpoint::save" ? "write" : "read into",
             op == "checkpoint::save" ? "plan_save" : "plan_load");
  }
}

// Every rank must save the same names, in the same order, with the same global shapes, dtypes
// and layouts, or the index would mix tensors (or a Hugging Face file's layout differ between
// ranks): compare a stable hash of them over the world.
void check_same_state_everywhere(const StateDict& state, std::string_view op) {
  uint64_t h = kStableHashSeed;
  for (const auto& [name, t] : state) {
    // A one-rank mesh is a self mesh on its rank and not on the others (and any placement on
    // it is the whole tensor), so only its tensor's shape and dtype are compared.
    const std::string s = t.device_mesh().size() == 1
                              ? absl::StrCat(name, "|self|", absl::StrJoin(t.shape(), ","), "|",
                                             std::string(dtype_name(t.dtype())))
                              : absl::StrCat(name, "|", t.spec().str());
    h = stable_hash(s.data(), s.size(), h);
  }
  DT_CHECK(agree(h).same,
           "[%s] the ranks save different states (names, order, shapes, dtypes or placements "
           "differ): every rank must pass the same state",
           op);
}

// Which tensors of `state` this rank writes its chunk of (collective). By the tensor's own mesh
// a chunk has one writer in each copy of that mesh (local_region: coordinate 0 on every dim
// that does not shard it). A mesh over part of the world may have copies elsewhere holding the
// same chunks: the tp submesh of a (dp, tp) mesh is one per dp group, each with its replica of
// the tensor, and a self mesh (a local tensor) is one per rank. Those candidates are gathered,
// and the lowest world rank among a chunk's candidates writes it (PyTorch DCP's
// dedup_save_plans with save_to_lowest_rank), so each distinct chunk is written once however
// the tensor is replicated, and a tensor only some ranks hold is written by one of them.
std::vector<bool> plan_writes(const DeviceMesh& world, const StateDict& state) {
  std::vector<bool> writes(state.size());
  ChunkRecords candidates;  // on a mesh over part of the world
  std::vector<size_t> candidate_of;
  run_on_all_ranks(world, [&] {
    for (size_t i = 0; i < state.size(); ++i) {
      const DTensor& t = state[i].second;
      const Region r = local_region(t);
      writes[i] = r.writes && shape_numel(r.shape) > 0;
      if (writes[i] && t.device_mesh().size() < world_size()) {
        candidates.emplace_back(state[i].first, ChunkInfo{"", "", r.offset, r.shape, 0});
        candidate_of.push_back(i);
      }
    }
  });
  // The fake backend has no other ranks to ask (its all_gather returns filler): each copy's
  // writer keeps its chunks (plan_save documents this), except a local tensor's, which every
  // rank holds, so rank 0 writes it.
  if (fake_backend()) {
    for (size_t k = 0; k < candidates.size(); ++k) {
      const size_t i = candidate_of[k];
      if (is_self_mesh(state[i].second.device_mesh())) writes[i] = world_rank() == 0;
    }
    return writes;
  }
  const std::vector<std::string> all = all_gather_strings(records_to_json(candidates));
  absl::flat_hash_set<std::string> taken;  // by a lower rank
  for (int rank = 0; rank < world_rank(); ++rank) {
    for (const auto& [name, c] : records_from_json(all[rank])) {
      taken.insert(chunk_entry_name(name, c.offset));
    }
  }
  for (size_t k = 0; k < candidates.size(); ++k) {
    const auto& [name, c] = candidates[k];
    if (taken.contains(chunk_entry_name(name, c.offset))) writes[candidate_of[k]] = false;
  }
  return writes;
}

std::string normalize_dir(const std::string& dir, std::string_view op) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  DT_CHECK(!d.empty(), "[%s] empty checkpoint directory", op);
  return d;
}

}  // namespace dtensor::checkpoint::detail
