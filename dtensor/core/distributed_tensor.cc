#include "dtensor/core/distributed_tensor.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/detail/chunks.h"
#include "dtensor/core/detail/redistribute_no_grad.h"
#include "dtensor/core/detail/util.h"
#include "dtensor/core/redistribute.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/detail/capture_hook.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor {
namespace {

// Dims a from_local shape check compares (a deeper local tensor has its ndim checked and its
// first kCheckDims sizes compared; the rest enter the shape hash).
constexpr int64_t kCheckDims = 16;
// The call's other arguments that must agree across ranks (placements, src_data_rank, an
// explicit global shape/stride), as text: kCallWords int64 words of it travel in the record
// (what an error message shows), and a hash of the whole text decides.
constexpr int64_t kCallWords = 16;
// ndim, dtype, sizes (padded with -1), hash of the full shape, hash of the call text, the text.
constexpr int64_t kShapeHash = 2 + kCheckDims;
constexpr int64_t kCallHash = kShapeHash + 1;
constexpr int64_t kCallText = kCallHash + 1;
constexpr int64_t kRecordLen = kCallText + kCallWords;

// Gathers one int64 record per mesh member, in row-major mesh order: all-gathers over the
// innermost mesh dim first, then over outer dims with the growing buffer (a size-1 mesh dim
// needs no collective: its one member's record is already in place).
std::vector<int64_t> gather_records(const DeviceMesh& mesh, const std::vector<int64_t>& record,
                                    Device device) {
  // The records are data even when the checked tensor is meta (a dry run's).
  if (device.is_meta()) device = Device();
  Tensor buf = from_vector(record, {static_cast<int64_t>(record.size())}, device);
  for (int64_t i = mesh.ndim() - 1; i >= 0; --i) {
    if (mesh.size(i) == 1) continue;
    Communicator& comm = *mesh.communicator(i);
    Tensor out = empty(
        [&] {
          Shape s{comm.size()};
          s.insert(s.end(), buf.shape().begin(), buf.shape().end());
          return s;
        }(),
        TensorOptions(DType::kInt64, device));
    comm.all_gather(out, buf)->wait();
    buf = out;
  }
  return buf.to_vector<int64_t>();
}

// This rank's record: its tensor's ndim, dtype and first kCheckDims sizes (-1 beyond ndim), a
// hash of the whole shape, and the call's arguments `call` (text and hash).
std::vector<int64_t> meta_record(const Tensor& t, std::string_view call) {
  std::vector<int64_t> record(kRecordLen, -1);
  record[0] = t.dim();
  record[1] = static_cast<int64_t>(t.dtype());
  for (int64_t d = 0; d < std::min(t.dim(), kCheckDims); ++d) record[2 + d] = t.size(d);
  record[kShapeHash] =
      static_cast<int64_t>(stable_hash(t.shape().data(), t.shape().size() * sizeof(int64_t)));
  record[kCallHash] = static_cast<int64_t>(stable_hash(call.data(), call.size()));
  char* text = reinterpret_cast<char*>(&record[kCallText]);
  std::memset(text, 0, kCallWords * 8);
  std::memcpy(text, call.data(), std::min<size_t>(call.size(), kCallWords * 8 - 1));
  return record;
}

Shape record_shape(const int64_t* r) {
  return Shape(r + 2, r + 2 + std::min(r[0], kCheckDims));
}
std::string record_call(const int64_t* r) {
  const char* text = reinterpret_cast<const char*>(r + kCallText);
  return std::string(text, strnlen(text, kCallWords * 8 - 1));
}

// The ranks whose records differ from `ref` in [begin, end) (world ranks, mesh order).
std::vector<int> differing(const std::vector<int64_t>& all, const std::vector<int>& ranks,
                           const int64_t* ref, int64_t begin, int64_t end) {
  std::vector<int> bad;
  for (size_t m = 0; m < ranks.size(); ++m) {
    const int64_t* r = &all[m * kRecordLen];
    if (!std::equal(ref + begin, ref + end, r + begin)) bad.push_back(ranks[m]);
  }
  return bad;
}

// Every rank of the mesh must make the same call: the same arguments `call`, and (with a
// source rank) the shape and dtype the source passes. Each rank throws the same error naming
// the first mismatching rank and what it passed next to the reference rank's. One small
// all_gather per mesh dim of size > 1.
void check_same_call(const std::string& op, const Tensor& tensor, std::string_view call,
                     const DeviceMesh& mesh, size_t ref_index, bool compare_tensor, Device device) {
  const std::vector<int64_t> all = gather_records(mesh, meta_record(tensor, call), device);
  const std::vector<int>& ranks = mesh.ranks();
  const int64_t* ref = &all[ref_index * kRecordLen];
  auto rec_of = [&](int rank) {
    return &all[static_cast<size_t>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin()) *
                kRecordLen];
  };
  // The call is compared with the mesh's first member (the same reference on every rank, even
  // when the ranks disagree on the source).
  std::vector<int> bad = differing(all, ranks, all.data(), kCallHash, kCallHash + 1);
  if (!bad.empty()) {
    DT_FAIL(
        "[%s] the ranks disagree on the call: rank %d passed %s where rank %d passed %s "
        "(expected the same arguments on every rank of the mesh; mismatching ranks: %s)",
        op, bad[0], record_call(rec_of(bad[0])), ranks[0], record_call(all.data()),
        absl::StrJoin(bad, ", "));
  }
  if (!compare_tensor) return;
  bad = differing(all, ranks, ref, 0, kCallHash);
  if (bad.empty()) return;
  const int64_t* first = rec_of(bad[0]);
  DT_FAIL(
      "[%s] argument tensor differs across ranks: rank %d passed shape %s%s %s but "
      "src_data_rank %d passed %s%s %s (expected the same shape and dtype on every rank of the "
      "mesh; mismatching ranks: %s)",
      op, bad[0], shape_str(record_shape(first)), first[0] > kCheckDims ? "..." : "",
      dtype_name(static_cast<DType>(first[1])), ranks[ref_index], shape_str(record_shape(ref)),
      ref[0] > kCheckDims ? "..." : "", dtype_name(static_cast<DType>(ref[1])),
      absl::StrJoin(bad, ", "));
}

// Scatters step i of the source's data: `piece` (valid on this rank when `valid`, undefined or
// stale otherwise) of shape `shape` is cut into torch.chunk pieces along tensor dim `dim`, each
// padded to the chunk size ceil(m / n) so that block k of the root's [n, block...] buffer is
// chunk k (detail::pack_chunks, the layout the redistribute executor uses); this rank keeps its
// chunk, unpadded.
Tensor scatter_chunks(Communicator& comm, const Tensor& piece, const Shape& shape, int64_t dim,
                      int root, int64_t my_index, bool valid, const TensorOptions& options) {
  const int64_t m = shape[dim];
  const int64_t n = comm.size();
  const int64_t chunk = chunk_bounds(m, n, 0).size;
  Shape block = shape;
  block[dim] = chunk;
  Tensor out = empty(block, options);
  Tensor in;
  if (my_index == root) {
    // A root holding stale data sends bytes of the right shape, replaced at a later step.
    in = valid ? detail::pack_chunks(piece, dim, n)
               : detail::block_buffer(n, block, out, /*scratch=*/true);
  }
  comm.scatter(out, in, root)->wait();
  const int64_t mine = chunk_bounds(m, n, my_index).size;
  return mine == chunk ? out : out.narrow(dim, 0, mine).contiguous();
}

// distribute_tensor from the rank at `src_coord`: walks the mesh dims in order 0..ndim-1 (the
// nesting order of compute_local_shape_and_offset). At step i every rank holds the piece that
// dims 0..i-1 assign to its coordinates (the same shape across each dim-i group); the group's
// member at the source's coordinate on dim i scatters the chunks of a Shard(d) dim or
// broadcasts the piece for Replicate/Partial. After step i the ranks whose coordinates on dims
// > i equal the source's hold the source's data; the other groups move stale bytes of the right
// shape, replaced at a later step.
Tensor scatter_from_source(const Tensor& tensor, const DTensorSpec& spec, const Shape& coord,
                           const Shape& src_coord, Device device) {
  const DeviceMesh& mesh = spec.mesh();
  const TensorOptions options(tensor.dtype(), device);
  bool valid = coord == src_coord;
  Tensor piece = valid ? tensor.to(device).contiguous() : Tensor();
  Shape shape = tensor.shape();
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    if (mesh.size(i) == 1) continue;  // one member: it already holds its piece
    Communicator& comm = *mesh.communicator(i);
    const int root = static_cast<int>(src_coord[i]);
    const Placement& p = spec.placement(i);
    if (p.is_shard()) {
      piece = scatter_chunks(comm, piece, shape, p.dim(), root, coord[i], valid, options);
      shape = piece.shape();
    } else {
      if (!piece.defined()) piece = empty(shape, options);
      comm.broadcast(piece, root)->wait();
    }
    valid = std::equal(coord.begin() + i + 1, coord.end(), src_coord.begin() + i + 1);
  }
  return piece;
}

Shape inferred_global_shape(IntSpan local_shape, const DeviceMesh& mesh, PlacementSpan placements) {
  Shape global(local_shape.begin(), local_shape.end());
  const int64_t ndim = static_cast<int64_t>(global.size());
  for (size_t i = 0; i < placements.size(); ++i) {
    if (!placements[i].is_shard()) continue;
    const int64_t d = detail::normalize_shard_dim(
        placements[i].dim(), ndim, static_cast<int64_t>(i), placements, "from_local");
    global[d] *= mesh.size(static_cast<int64_t>(i));
  }
  return global;
}

// Every rank of the mesh compares every member's local shape and dtype with what the
// placements imply, so all of them throw the same error.
Shape check_local_shapes(const Tensor& local, const DeviceMesh& mesh, PlacementSpan placements,
                         IntSpan shape, IntSpan stride, Device device) {
  const std::string call =
      absl::StrFormat("placements %s, shape %s, stride %s", placements_str(placements),
                      shape.empty() ? "(inferred)" : shape_str(shape),
                      stride.empty() ? "(contiguous)" : shape_str(stride));
  const std::vector<int64_t> all = gather_records(mesh, meta_record(local, call), device);
  const std::vector<int>& ranks = mesh.ranks();
  auto rec = [&](size_t member) { return &all[member * kRecordLen]; };
  auto rec_shape = [&](size_t member) { return record_shape(rec(member)); };
  const std::vector<int> disagree = differing(all, ranks, rec(0), kCallHash, kCallHash + 1);
  if (!disagree.empty()) {
    const size_t m =
        static_cast<size_t>(std::find(ranks.begin(), ranks.end(), disagree[0]) - ranks.begin());
    DT_FAIL(
        "[from_local] the ranks disagree on the call: rank %d passed %s where rank %d passed %s "
        "(expected the same placements, shape and stride on every rank of the mesh; mismatching "
        "ranks: %s)",
        disagree[0], record_call(rec(m)), ranks[0], record_call(rec(0)),
        absl::StrJoin(disagree, ", "));
  }
  for (size_t m = 1; m < ranks.size(); ++m) {
    DT_CHECK(rec(m)[1] == rec(0)[1],
             "[from_local] rank %d holds a local shard of dtype %s but rank %d holds %s "
             "(expected the same dtype on every rank)",
             ranks[m], dtype_name(static_cast<DType>(rec(m)[1])), ranks[0],
             dtype_name(static_cast<DType>(rec(0)[1])));
    DT_CHECK(rec(m)[0] == rec(0)[0],
             "[from_local] rank %d holds a %d-d local shard %s but rank %d holds a %d-d one %s "
             "(expected the same ndim on every rank)",
             ranks[m], rec(m)[0], shape_str(rec_shape(m)), ranks[0], rec(0)[0],
             shape_str(rec_shape(0)));
  }
  Shape global;
  if (!shape.empty()) {
    global.assign(shape.begin(), shape.end());
  } else if (rec(0)[0] <= kCheckDims) {
    global = inferred_global_shape(rec_shape(0), mesh, placements);  // mesh's first rank
  } else {
    global = inferred_global_shape(local.shape(), mesh, placements);
  }
  for (size_t i = 0; i < placements.size(); ++i) {
    if (placements[i].is_shard()) {
      detail::normalize_shard_dim(placements[i].dim(), static_cast<int64_t>(global.size()),
                                  static_cast<int64_t>(i), placements, "from_local");
    }
  }
  std::vector<int> bad;
  std::string first;
  for (size_t m = 0; m < ranks.size(); ++m) {
    const Shape coord = detail::unravel_index(static_cast<int64_t>(m), mesh.shape());
    Shape expected = compute_local_shape_and_offset(global, mesh.shape(), coord, placements).shape;
    if (static_cast<int64_t>(expected.size()) > kCheckDims) expected.resize(kCheckDims);
    const Shape got = rec_shape(m);
    if (got == expected && rec(m)[0] == static_cast<int64_t>(global.size())) continue;
    if (bad.empty()) {
      first = absl::StrFormat(
          "[from_local] rank %d holds a local shard of shape %s but placements %s on global "
          "shape %s imply %s",
          ranks[m], shape_str(got), placements_str(placements), shape_str(global),
          shape_str(expected));
    }
    bad.push_back(ranks[m]);
  }
  if (bad.size() > 1) {
    absl::StrAppendFormat(&first, " (mismatching ranks: %s)", absl::StrJoin(bad, ", "));
  }
  DT_CHECK(bad.empty(), "%s", first);
  return global;
}

// from_local(run_check=true): PyTorch broadcasts the data of Replicate mesh dims from the dim's
// first member, so replicas that differed become equal instead of staying silently different.
Tensor broadcast_replicas(Tensor local, const DeviceMesh& mesh, PlacementSpan placements) {
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    if (!placements[i].is_replicate() || mesh.size(i) == 1) continue;
    local = local.contiguous();
    if (local.storage().use_count() > 1) local = local.clone();  // never write the caller's data
    mesh.communicator(i)->broadcast(local, 0)->wait();
  }
  return local;
}

}  // namespace

DTensor::DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec)
    : local_(std::move(local)), spec_(std::move(spec)) {}

DTensor::DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec, WorkPtr pending)
    : local_(std::move(local)), spec_(std::move(spec)), pending_(std::move(pending)) {}

void DTensor::wait() const {
  if (pending_ == nullptr) return;
  pending_->wait();  // throws the task's error (pending_ stays set: every use throws it)
  pending_.reset();
}

DTensor DTensor::from_local(const Tensor& local, const DeviceMesh& mesh, PlacementSpan placements,
                            bool run_check, IntSpan shape, IntSpan stride) {
  DT_CHECK(local.defined(), "[from_local] the local tensor is undefined (expected a tensor)");
  DT_CHECK(mesh.defined(), "[from_local] the device mesh is an empty handle (expected a mesh)");
  DT_CHECK(static_cast<int64_t>(placements.size()) == mesh.ndim(),
           "[from_local] got %d placements %s for a %d-d mesh (expected one per mesh dim)",
           placements.size(), placements_str(placements), mesh.ndim());
  DT_CHECK(stride.empty() || stride.size() == shape.size(),
           "[from_local] stride %s given for global shape %s (expected one stride per dim)",
           shape_str(stride), shape_str(shape));
  check_user_placements(placements, local.dtype(), "from_local");
  const Device device = detail::mesh_device(mesh, local);
  Shape global;
  if (run_check && mesh.contains_me()) {
    global = check_local_shapes(local, mesh, placements, shape, stride, device);
  } else if (shape.empty()) {
    global = inferred_global_shape(local.shape(), mesh, placements);
  } else {
    global.assign(shape.begin(), shape.end());
  }
  TensorMeta meta = stride.empty()
                        ? TensorMeta(global, local.dtype())
                        : TensorMeta(global, Shape(stride.begin(), stride.end()), local.dtype());
  auto spec = std::make_shared<const DTensorSpec>(
      mesh, Placements(placements.begin(), placements.end()), std::move(meta), "from_local");
  if (!mesh.contains_me()) {
    return DTensor(detail::empty_local(local.dim(), local.dtype(), device), std::move(spec));
  }
  Tensor moved = local.to(device);
  if (run_check) moved = broadcast_replicas(std::move(moved), mesh, spec->placements());
  return DTensor(std::move(moved), std::move(spec));
}

Tensor DTensor::full_tensor() const {
  DT_CHECK(defined(), "[full_tensor] the DTensor is undefined (expected a DTensor)");
  Placements replicated(spec_->placements().size(), Replicate());
  return detail::redistribute_no_grad(*this,
                                      spec_->with_placements(std::move(replicated), "full_tensor"))
      .to_local();
}

int64_t DTensor::size(int64_t dim) const {
  DT_CHECK(defined(), "[DTensor::size] the DTensor is undefined (expected a DTensor)");
  return spec_->shape()[normalize_dim(dim, spec_->ndim(), "DTensor::size")];
}

std::string DTensor::str() const {
  if (!defined()) return "DTensor()";
  return absl::StrFormat("DTensor(local=%s, global=%s, placements=%s, %s, mesh=%s)",
                         shape_str(local_.shape()), shape_str(spec_->shape()),
                         placements_str(spec_->placements()), dtype_name(spec_->dtype()),
                         shape_str(spec_->mesh().shape()));
}

std::ostream& operator<<(std::ostream& os, const DTensor& t) {
  return os << t.str();
}

DTensor distribute_tensor(const Tensor& tensor, const DeviceMesh& mesh, PlacementSpan placements,
                          std::optional<int> src_data_rank) {
  DT_CHECK(tensor.defined(), "[distribute_tensor] the tensor is undefined (expected a tensor)");
  DT_CHECK(mesh.defined(),
           "[distribute_tensor] the device mesh is an empty handle (expected a mesh)");
  check_user_placements(placements, tensor.dtype(), "distribute_tensor");
  auto spec = std::make_shared<const DTensorSpec>(
      mesh, Placements(placements.begin(), placements.end()),
      TensorMeta(tensor.shape(), tensor.dtype()), "distribute_tensor");
  const std::vector<int>& ranks = mesh.ranks();
  int64_t src_index = -1;
  if (src_data_rank == kMeshFirstRank) src_data_rank = ranks.front();
  if (src_data_rank) {
    auto it = std::find(ranks.begin(), ranks.end(), *src_data_rank);
    DT_CHECK(it != ranks.end(),
             "[distribute_tensor] src_data_rank %d is not a rank of the mesh (ranks %s); "
             "expected one of them or std::nullopt",
             *src_data_rank, absl::StrJoin(ranks, ", "));
    src_index = it - ranks.begin();
  }
  const Device device = detail::mesh_device(mesh, tensor);
  if (!mesh.contains_me()) {
    return DTensor(detail::empty_local(tensor.dim(), tensor.dtype(), device), std::move(spec));
  }
  const Shape& coord = mesh.get_coordinate();
  Tensor local;
  if (src_index >= 0) {
    check_same_call("distribute_tensor", tensor,
                    absl::StrFormat("placements %s, src_data_rank %d", placements_str(placements),
                                    *src_data_rank),
                    mesh, static_cast<size_t>(src_index), /*compare_tensor=*/true, device);
    local = scatter_from_source(tensor, *spec, coord,
                                detail::unravel_index(src_index, mesh.shape()), device);
  } else {
    const LocalShard shard = spec->local_shard(coord);
    local = tensor.to(device);
    for (int64_t d = 0; d < local.dim(); ++d) {
      if (shard.shape[d] != local.size(d)) local = local.narrow(d, shard.offset[d], shard.shape[d]);
    }
    local = local.contiguous();
  }
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    const Placement& p = spec->placement(i);
    if (p.is_partial() && p.reduce_op() == ReduceOp::kSum && coord[i] != 0) {
      local = zeros_like(local);
      break;
    }
  }
  return DTensor(std::move(local), std::move(spec));
}

DTensor distribute_tensor(const Tensor& tensor, PlacementSpan placements,
                          std::optional<int> src_data_rank) {
  return distribute_tensor(tensor, current_mesh(), placements, src_data_rank);
}

namespace {

// Local zeros. While a step is captured by dtensor::compile they are made by a recorded
// primitive, so replay makes them again: backward formulas call zeros_like (where / clamp-style
// masks, norms), and a tensor made in the step outside any primitive would be refused. State
// made this way on purpose (an optimizer's lazily created moments) is declared with
// detail::keep_in_capture, which makes it the graph's own tensor instead.
Tensor fresh_zeros(const Shape& shape, TensorOptions opts) {
  if (detail::capture_recorder() == nullptr) return zeros(shape, opts);
  Tensor z[1];
  detail::run_recorded("op", "zeros_like", {}, z, 0,
                       [shape, opts](absl::Span<const Tensor>, absl::Span<Tensor> out) {
                         out[0] = zeros(shape, opts);
                       });
  return std::move(z[0]);
}

}  // namespace

DTensor zeros_like(const DTensor& x) {
  DT_CHECK(x.defined(), "[zeros_like] the DTensor is undefined (expected a DTensor)");
  return DTensor(fresh_zeros(x.to_local().shape(), TensorOptions(x.dtype(), x.device())),
                 x.spec_ptr());
}

DTensor zeros_like(const DTensorSpec& spec) {
  return DTensor(
      fresh_zeros(spec.local_shard().shape, TensorOptions(spec.dtype(), local_device(spec.mesh()))),
      std::make_shared<const DTensorSpec>(spec));
}

// ---- autograd state accessors (the engine is in dtensor/autograd/) -----------------------------

bool DTensor::requires_grad() const {
  return autograd_ != nullptr && autograd_->requires_grad;
}

DTensor& DTensor::requires_grad_(bool requires_grad) {
  DT_CHECK(defined(), "[requires_grad_] the DTensor is undefined (expected a DTensor)");
  // A recorded op's output requires grad already: asking for it again changes nothing (as
  // PyTorch); only turning it off is refused.
  DT_CHECK(is_leaf() || requires_grad,
           "[requires_grad_] can only change requires_grad of a leaf DTensor (this one was "
           "produced by a recorded op; use detach() to get a leaf)");
  if (!is_leaf()) return *this;
  if (!requires_grad && autograd_ == nullptr) return *this;
  DT_CHECK(!requires_grad || is_floating(dtype()),
           "[requires_grad_] only floating DTensors can require gradients, got %s",
           dtype_name(dtype()));
  if (autograd_ == nullptr) autograd_ = std::make_shared<AutogradMeta>();
  autograd_->requires_grad = requires_grad;
  return *this;
}

bool DTensor::is_leaf() const {
  return autograd_ == nullptr || autograd_->grad_fn == nullptr;
}

const DTensor& DTensor::grad() const {
  static const DTensor* const kNone = new DTensor();
  return autograd_ != nullptr ? autograd_->grad : *kNone;
}

void DTensor::set_grad(const DTensor& grad) const {
  DT_CHECK(defined(), "[set_grad] the DTensor is undefined (expected a DTensor)");
  if (grad.defined()) {
    DT_CHECK(
        grad.shape() == shape() && grad.dtype() == dtype() && grad.device_mesh() == device_mesh(),
        "[set_grad] gradient %s does not match the DTensor %s (expected the same shape, "
        "dtype and mesh)",
        grad.str(), str());
  }
  DT_CHECK(autograd_ != nullptr || !grad.defined(),
           "[set_grad] the DTensor has no autograd state (call requires_grad_() first)");
  if (autograd_ != nullptr) autograd_->grad = grad.detach();
}

std::shared_ptr<autograd::Node> DTensor::grad_fn() const {
  return autograd_ != nullptr ? autograd_->grad_fn : nullptr;
}

DTensor DTensor::detach() const {
  return DTensor(local_, spec_, pending_);
}

const DeviceMesh& self_mesh(DeviceType device_type) {
  static std::mutex mu;
  static std::map<DeviceType, DeviceMesh>* meshes = new std::map<DeviceType, DeviceMesh>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = meshes->find(device_type);
  if (it == meshes->end()) {
    it = meshes->emplace(device_type, DeviceMesh(device_type, {1}, {world_rank()}, {"self"})).first;
  }
  return it->second;
}

bool is_self_mesh(const DeviceMesh& mesh) {
  return mesh.defined() && mesh.size() == 1 && mesh.contains_me();
}

DTensor local_dtensor(const Tensor& t) {
  DT_CHECK(t.defined(), "[local_dtensor] the tensor is undefined (expected a defined Tensor)");
  // A meta tensor lives on the CPU self mesh: meta is a property of the local tensor (no data),
  // not of the ranks, so it meets real CPU inputs (token ids) on the same mesh.
  const DeviceMesh& mesh = self_mesh(t.device().is_meta() ? kCPU : t.device().type);
  return DTensor(t, std::make_shared<const DTensorSpec>(mesh, Placements(1, Replicate()),
                                                        TensorMeta(t.shape(), t.dtype())));
}

bool is_local(const DTensor& x) {
  return x.defined() && is_self_mesh(x.device_mesh());
}

Device local_device(const DeviceMesh& mesh) {
  return detail::mesh_device(mesh, Tensor());
}

}  // namespace dtensor
