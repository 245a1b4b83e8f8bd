// Checkpoint planning: which chunks each rank writes (save) and reads (load), from the state's
// global metadata and the index alone (no tensor data, no file but index.json).
#include "dtensor/checkpoint/plan.h"

#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_join.h>

#include "dtensor/checkpoint/detail/index.h"
#include "dtensor/checkpoint/detail/plan.h"
#include "dtensor/checkpoint/detail/world.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor::checkpoint {

namespace detail {

std::vector<WriteItem> local_writes(const DeviceMesh& world, const StateDict& state) {
  const std::vector<bool> writes = plan_writes(world, state);
  const std::string file = rank_file_name(world_rank());
  std::vector<WriteItem> items;
  for (size_t i = 0; i < state.size(); ++i) {
    if (!writes[i]) continue;
    const auto& [name, t] = state[i];
    const Region r = local_region(t);
    const int64_t bytes = shape_numel(r.shape) * static_cast<int64_t>(dtype_size(t.dtype()));
    items.push_back(
        {name, file, chunk_entry_name(name, r.offset), r.offset, r.shape, t.dtype(), bytes});
  }
  return items;
}

std::vector<ReadItem> tensor_reads(const std::string& name, const DTensor& t,
                                   const std::map<std::string, TensorInfo>& index,
                                   const std::string& dir) {
  constexpr std::string_view kOp = "checkpoint::load";
  const auto it = index.find(name);
  DT_CHECK(it != index.end(), "[%s] tensor '%s' is not in the checkpoint '%s'", kOp, name, dir);
  const TensorInfo& info = it->second;
  DT_CHECK(info.shape == t.shape() && info.dtype == t.dtype(),
           "[%s] tensor '%s' is %s [%s] in the checkpoint '%s' but the target is %s [%s]", kOp,
           name, dtype_name(info.dtype), absl::StrJoin(info.shape, ", "), dir,
           dtype_name(t.dtype()), absl::StrJoin(t.shape(), ", "));
  std::vector<ReadItem> items;
  const Region r = local_region(t);
  if (!r.holds) return items;
  int64_t covered = 0;
  for (const ChunkInfo& c : info.chunks) {
    ReadItem item{name, c, {}, {}, info.dtype, 0};
    if (!box_intersection(r.offset, r.shape, c.offset, c.shape, item.offset, item.shape)) continue;
    item.bytes = shape_numel(c.shape) * static_cast<int64_t>(dtype_size(info.dtype));
    covered += shape_numel(item.shape);
    items.push_back(std::move(item));
  }
  // The index's validation proves its chunks tile the tensor; an index built by hand for
  // plan_load may not.
  DT_CHECK(covered == shape_numel(r.shape),
           "[%s] tensor '%s': the checkpoint's chunks cover %d of the %d elements of this rank's "
           "shard",
           kOp, name, covered, shape_numel(r.shape));
  return items;
}

}  // namespace detail

SavePlan plan_save(const StateDict& state) {
  constexpr std::string_view kOp = "checkpoint::save";
  const DeviceMesh world = detail::world_mesh();
  detail::run_on_all_ranks(world, [&] { detail::validate_state(state, kOp); });
  detail::run_on_all_ranks(world, [&] { detail::check_same_state_everywhere(state, kOp); });
  SavePlan plan;
  plan.rank = world_rank();
  plan.items = detail::local_writes(world, state);
  for (const WriteItem& w : plan.items) plan.bytes += w.bytes;
  for (const auto& [name, t] : state) {
    plan.total_bytes += shape_numel(t.shape()) * static_cast<int64_t>(dtype_size(t.dtype()));
  }
  if (fake_backend()) return plan;  // the other ranks' plans are not there to gather
  Tensor mine = from_vector(std::vector<int64_t>{plan.bytes}, {1});
  Tensor all = empty({world_size()}, kInt64);
  world_communicator()->all_gather(all, mine)->wait();
  plan.rank_bytes = all.to_vector<int64_t>();
  plan.files = 0;
  for (int64_t b : plan.rank_bytes) plan.files += b > 0 ? 1 : 0;
  return plan;
}

namespace {

LoadPlan plan_reads(const StateDict& state, const std::map<std::string, TensorInfo>& index,
                    const std::string& dir) {
  detail::validate_state(state, "checkpoint::load");
  LoadPlan plan;
  absl::flat_hash_set<std::string> files;
  for (const auto& [name, t] : state) {
    for (ReadItem& item : detail::tensor_reads(name, t, index, dir)) {
      plan.bytes += item.bytes;
      files.insert(item.chunk.file);
      plan.items.push_back(std::move(item));
    }
  }
  plan.files = static_cast<int>(files.size());
  return plan;
}

}  // namespace

LoadPlan plan_load(const StateDict& state, const std::map<std::string, TensorInfo>& index) {
  return plan_reads(state, index, "(an index given to plan_load)");
}

LoadPlan plan_load(const StateDict& state, const std::string& dir) {
  const std::string d = detail::normalize_dir(dir, "checkpoint::load");
  return plan_reads(state, detail::read_index_file(d).tensors, d);
}

}  // namespace dtensor::checkpoint
